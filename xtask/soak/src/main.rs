//! Soak run of chronos-rs: a producer at a steady rate, a worker server with retries, retention
//! and dead letters, and a scheduler firing every second, all in this process against a
//! throwaway Redis, for `--minutes N`. Each minute it samples Redis `used_memory`, `DBSIZE` and
//! this process's RSS and prints one line; at the end it judges whether each stayed within a
//! band after the warm-up, and exits non-zero when one grew.
//!
//! Run through `cargo xtask soak --minutes N` (release build). The retention and archive windows
//! are short on purpose, so that the steady state (the janitor trimming as fast as tasks arrive)
//! is reached within minutes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use chronos::fred::interfaces::ServerInterface;
use chronos::prelude::*;
use serde::{Deserialize, Serialize};

/// How a soak task behaves, and with which enqueue options it was sent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Mode {
    /// Succeeds at once.
    Plain,
    /// Succeeds at once and is kept for [`RETENTION`].
    Retained,
    /// Unique for a few seconds (payloads differ, so none is refused); succeeds.
    Unique,
    /// Fails its first attempt and succeeds on the retry.
    FailOnce,
    /// Fails without retry and is archived.
    DeadArchived,
    /// Fails without retry and is dropped.
    DeadDiscarded,
}

/// Out of every 100 tasks: 70 plain, 15 retained, 5 unique, 8 failing once, 1 archived, 1
/// discarded. At 300/s that is 3 archived per second and 45 retained per second, enough for the
/// janitor's trimming to decide whether memory stays flat.
fn mode_of(n: u64) -> Mode {
    match n % 100 {
        0..=69 => Mode::Plain,
        70..=84 => Mode::Retained,
        85..=89 => Mode::Unique,
        90..=97 => Mode::FailOnce,
        98 => Mode::DeadArchived,
        _ => Mode::DeadDiscarded,
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Work {
    n: u64,
    mode: Mode,
    body: String,
}

impl TaskArgs for Work {
    const KIND: &'static str = "soak:work";
}

/// What the 1 s schedule enqueues.
#[derive(Debug, Serialize, Deserialize)]
struct Tick {}

impl TaskArgs for Tick {
    const KIND: &'static str = "soak:tick";
}

/// How long a retained completed task is kept.
const RETENTION: Duration = Duration::from_secs(30);
/// Archived tasks older than this are trimmed by the janitor...
const ARCHIVE_RETENTION: Duration = Duration::from_secs(60);
/// ...and at most this many are kept.
const ARCHIVE_MAX: u64 = 1_000;
/// The janitor's period (`--janitor-secs` changes it: a janitor that never runs in the soak's
/// time shows that the verdict catches growth).
const JANITOR: Duration = Duration::from_secs(10);
/// Samples taken while the system fills up to its steady state (retention and archive windows,
/// dedup keys, receipts) and are not judged: the archive window plus a minute.
const WARM_UP: Duration = Duration::from_secs(120);

struct Options {
    minutes: u64,
    rate: u64,
    sample: Duration,
    janitor: Duration,
}

fn parse_args() -> Result<Options> {
    let mut o = Options {
        minutes: 0,
        rate: 300,
        sample: Duration::from_secs(60),
        janitor: JANITOR,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || -> Result<u64> {
            it.next()
                .with_context(|| format!("{a} needs a number"))?
                .parse()
                .with_context(|| format!("{a} needs a number"))
        };
        match a.as_str() {
            "--minutes" => o.minutes = num()?,
            "--rate" => o.rate = num()?,
            // For trying the soak itself quickly; the verdict assumes minutes.
            "--sample-secs" => o.sample = Duration::from_secs(num()?.max(1)),
            "--janitor-secs" => o.janitor = Duration::from_secs(num()?.max(1)),
            other => bail!("unknown argument {other:?}"),
        }
    }
    if o.minutes == 0 || o.rate == 0 {
        bail!(
            "usage: chronos-soak --minutes N [--rate TASKS_PER_S] [--janitor-secs S] \
             [--sample-secs S] (N >= 1, rate >= 1)"
        );
    }
    Ok(o)
}

/// One line of the report.
#[derive(Debug, Clone, Copy)]
struct Sample {
    used_memory: u64,
    keys: u64,
    rss: u64,
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = parse_args()?;
    let redis = chronos_testkit::RedisServer::start().context("redis for the soak")?;
    let url = redis.url();
    let broker = RedisBroker::builder(&url)
        .namespace("soak")
        .connect()
        .await?;
    println!(
        "== soak: {} min at {} tasks/s (70% plain, 15% retained {RETENTION:?}, 5% unique, 8% \
         failing once, 1% archived, 1% discarded) + a 1 s schedule; archive kept \
         {ARCHIVE_RETENTION:?} / {ARCHIVE_MAX}, janitor every {:?}; redis at {url}",
        opts.minutes, opts.rate, opts.janitor
    );

    let mut mux = Mux::new();
    mux.handle(|ctx: Context, t: Task<Work>| async move {
        match t.args.mode {
            Mode::FailOnce if ctx.attempt() == 1 => Err(TaskError::retry("first attempt fails")),
            Mode::DeadArchived | Mode::DeadDiscarded => {
                Err(TaskError::skip_retry("dead on arrival"))
            }
            _ => Ok(()),
        }
    })?;
    mux.handle(|_ctx: Context, _t: Task<Tick>| async { Ok(()) })?;
    let config = ServerConfig::default()
        .concurrency(64)
        .janitor_interval(opts.janitor)
        .archive_retention(ARCHIVE_RETENTION)
        .archive_max(ARCHIVE_MAX)
        .retry_delay(|_, _| Duration::from_secs(1));
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    scheduler.register_interval(
        Duration::from_secs(1),
        &Tick {},
        ScheduleOptions::new().id("soak-tick"),
    )?;
    let scheduler = scheduler.start().await?;

    let enqueued = Arc::new(AtomicU64::new(0));
    let producer = tokio::spawn(produce(
        Client::new(broker.clone()),
        opts.rate,
        enqueued.clone(),
    ));

    let started = Instant::now();
    let total = opts.sample * opts.minutes as u32;
    let mut samples = Vec::new();
    println!(
        "{:>6} {:>12} {:>8} {:>10} {:>9} {:>9} {:>7} {:>6} {:>6}",
        "minute", "used_memory", "keys", "rss", "enqueued", "succeeded", "failed", "dead", "ticks"
    );
    let mut next = started + opts.sample;
    while next <= started + total {
        tokio::time::sleep_until(next.into()).await;
        next += opts.sample;
        if producer.is_finished() {
            bail!("the producer stopped: {:?}", producer.await);
        }
        let s = sample(&broker).await?;
        let stats = server.stats();
        println!(
            "{:>6} {:>12} {:>8} {:>10} {:>9} {:>9} {:>7} {:>6} {:>6}",
            samples.len() + 1,
            s.used_memory,
            s.keys,
            s.rss,
            enqueued.load(Ordering::Relaxed),
            stats.succeeded,
            stats.failed,
            stats.dead,
            scheduler.stats().fired
        );
        samples.push(s);
    }
    producer.abort();
    scheduler.shutdown().await;
    server.shutdown().await;

    // The judged samples are those after the warm-up, counted in samples (one a minute), so a
    // quick try with `--sample-secs` keeps the same shape.
    let warm = WARM_UP.as_secs().div_ceil(60) as usize;
    verdict(&samples, warm)
}

/// How far a measure may stray from its first judged sample: a fraction of it, or an absolute
/// slack where the fraction of a small value would be noise (the janitor trims every 10 s, so
/// a sample can catch up to 10 s of retained tasks more or less).
struct Band {
    name: &'static str,
    fraction: f64,
    slack: u64,
    get: fn(&Sample) -> u64,
}

const BANDS: [Band; 3] = [
    Band {
        name: "redis used_memory",
        fraction: 0.10,
        slack: 256 << 10,
        get: |s| s.used_memory,
    },
    Band {
        name: "redis keys",
        fraction: 0.10,
        slack: 200,
        get: |s| s.keys,
    },
    Band {
        name: "process RSS",
        fraction: 0.20,
        slack: 4 << 20,
        get: |s| s.rss,
    },
];

/// Flat after the warm-up: every judged sample within its band around the first judged one,
/// and no measure rising at every step by more than its slack in all (a slow leak that the
/// band would only catch in a longer run).
fn verdict(samples: &[Sample], warm: usize) -> Result<()> {
    let judged = samples.get(warm..).unwrap_or_default();
    if judged.len() < 2 {
        bail!(
            "{} samples after a warm-up of {warm}: run at least {} minutes for a verdict",
            judged.len(),
            warm + 2
        );
    }
    let mut failures = Vec::new();
    for band in &BANDS {
        let values: Vec<u64> = judged.iter().map(band.get).collect();
        let base = values[0];
        let allowed = ((base as f64 * band.fraction) as u64).max(band.slack);
        let (lo, hi) = (
            values.iter().copied().min().unwrap_or(base),
            values.iter().copied().max().unwrap_or(base),
        );
        let outside = values.iter().any(|&v| v.abs_diff(base) > allowed);
        let rising = values.windows(2).all(|w| w[1] > w[0])
            && values[values.len() - 1] - values[0] > band.slack;
        let status = if outside || rising { "GROWS" } else { "flat" };
        println!(
            "{:<18} {status}: {lo}..{hi} over minutes {}..{} (band {base} +/- {allowed})",
            band.name,
            warm + 1,
            samples.len()
        );
        if outside || rising {
            failures.push(band.name);
        }
    }
    if failures.is_empty() {
        println!("== verdict: flat (memory, keys and RSS within their bands after the warm-up)");
        Ok(())
    } else {
        bail!("not flat after the warm-up: {}", failures.join(", "))
    }
}

/// Enqueues `rate` tasks per second in batches every 100 ms, forever.
async fn produce(client: Client<RedisBroker>, rate: u64, enqueued: Arc<AtomicU64>) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let per_tick = rate.div_ceil(10);
    let body = "x".repeat(100);
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        let batch: Vec<Work> = (n..n + per_tick)
            .map(|n| Work {
                n,
                mode: mode_of(n),
                body: body.clone(),
            })
            .collect();
        n += per_tick;
        let results = client
            .enqueue_batch(batch.iter().map(|w| {
                let opts = EnqueueOptions::new();
                let opts = match w.mode {
                    Mode::Retained => opts.retention(RETENTION),
                    Mode::Unique => opts.unique(Duration::from_secs(5)),
                    Mode::DeadArchived => opts.max_retry(0),
                    Mode::DeadDiscarded => opts.discard_on_dead_letter(),
                    _ => opts,
                };
                (w, opts)
            }))
            .await?;
        for r in results {
            r?;
        }
        enqueued.fetch_add(per_tick, Ordering::Relaxed);
    }
}

async fn sample(broker: &RedisBroker) -> Result<Sample> {
    let info = broker.info().await?;
    let used_memory = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")?;
    let keys: u64 = broker.client().dbsize().await?;
    Ok(Sample {
        used_memory,
        keys,
        rss: rss_bytes()?,
    })
}

/// This process's resident set, from `/proc/self/status` (`VmRSS: <n> kB`).
fn rss_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .context("no VmRSS in /proc/self/status")
}
