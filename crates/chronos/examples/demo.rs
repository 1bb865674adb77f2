//! The whole system in one process: a worker pool on three weighted queues, a producer, and the
//! cluster scheduler firing a 1 s interval schedule, with a live progress line, until Ctrl-C (or
//! `--seconds N`), then a graceful shutdown.
//!
//! `cargo xtask demo [--seconds N] [--rate TASKS_PER_S]`. Uses CHRONOS_REDIS_URL when set,
//! otherwise starts a throwaway redis-server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chronos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct SendEmail {
    n: u64,
    to: String,
}
impl TaskArgs for SendEmail {
    const KIND: &'static str = "email:send";
}

#[derive(Serialize, Deserialize)]
struct BuildReport {
    n: u64,
}
impl TaskArgs for BuildReport {
    const KIND: &'static str = "report:build";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("low").max_retry(2)
    }
}

#[derive(Serialize, Deserialize)]
struct Reconcile {
    ledger: String,
}
impl TaskArgs for Reconcile {
    const KIND: &'static str = "ledger:reconcile";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

#[derive(Serialize, Deserialize)]
struct ChargeCard {
    n: u64,
    cents: u64,
}
impl TaskArgs for ChargeCard {
    const KIND: &'static str = "payment:charge";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

struct Args {
    seconds: Option<u64>,
    rate: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        seconds: None,
        rate: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .context("missing value")?
                .parse::<u64>()
                .context("not a number")
        };
        match a.as_str() {
            "--seconds" => args.seconds = Some(value()?),
            "--rate" => args.rate = value()?.max(1),
            other => anyhow::bail!("unknown argument {other:?} (expected --seconds N, --rate N)"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    // Handler panics are part of the show: one counted line each, the message only (the task is
    // retried; a backtrace would bury the progress lines).
    static PANICS: AtomicU64 = AtomicU64::new(0);
    std::panic::set_hook(Box::new(|info| {
        let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        eprintln!("(demo) handler panic #{n}, caught and retried: {message}");
    }));
    let _redis; // keeps a throwaway server alive for the run
    let url = match std::env::var("CHRONOS_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Some(url) => url,
        None => {
            let server = chronos_testkit::RedisServer::start()?;
            let url = server.url();
            _redis = server;
            url
        }
    };
    println!(
        "chronos demo: redis at {url}, {} tasks/s, Ctrl-C to stop",
        args.rate
    );
    let broker = RedisBroker::builder(&url)
        .namespace("chronos-demo")
        .connect()
        .await?;

    let mut mux = Mux::new();
    // Emails: quick, and one in twenty fails once (a flaky SMTP relay) and is retried.
    mux.handle(|ctx: Context, t: Task<SendEmail>| async move {
        tokio::time::sleep(Duration::from_millis(2 + t.args.n % 8)).await;
        if t.args.n % 20 == 5 && ctx.attempt() == 1 {
            return Err(TaskError::retry(format!("relay refused {}", t.args.to)));
        }
        Ok(())
    })?;
    // Reports: slow; one in fifty has bad input and is dead-lettered at once.
    mux.handle(|_ctx: Context, t: Task<BuildReport>| async move {
        if t.args.n % 50 == 0 {
            return Err(TaskError::skip_retry("report template missing"));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(())
    })?;
    // Payments: one in a hundred panics on its first attempt; the panic is caught and retried.
    mux.handle(|ctx: Context, t: Task<ChargeCard>| async move {
        if t.args.n % 100 == 1 && ctx.attempt() == 1 {
            panic!(
                "card processor returned garbage for charge {}",
                t.args.cents
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    })?;

    // Fired every second by the scheduler below.
    let reconciled = Arc::new(AtomicU64::new(0));
    let r = reconciled.clone();
    mux.handle(move |_ctx: Context, _t: Task<Reconcile>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    })?;

    let config = ServerConfig {
        concurrency: 32,
        retry_delay: Arc::new(|retried, _| Duration::from_millis(500 * u64::from(retried))),
        ..ServerConfig::default()
    }
    .queues([("critical", 6), ("default", 3), ("low", 1)]);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    scheduler.register_interval(
        Duration::from_secs(1),
        &Reconcile {
            ledger: "main".into(),
        },
        ScheduleOptions::new().id("reconcile"),
    )?;
    let scheduler = scheduler.start().await?;

    let enqueued = Arc::new(AtomicU64::new(0));
    let stop = tokio_stop(args.seconds);
    let producer = tokio::spawn(produce(
        Client::new(broker.clone()),
        args.rate,
        enqueued.clone(),
        stop.clone(),
    ));

    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.notified() => break,
        }
        let s = server.stats();
        let rate = (s.succeeded - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), s.succeeded);
        println!(
            "[{:>4}s] enqueued {:>7}  done {:>7}  retried {:>5}  dead {:>4}  running {:>3}  {:>7.1} tasks/s  scheduled runs {:>3}{}",
            started.elapsed().as_secs(),
            enqueued.load(Ordering::Relaxed),
            s.succeeded,
            s.failed - s.dead.min(s.failed),
            s.dead,
            s.running,
            rate,
            reconciled.load(Ordering::Relaxed),
            if scheduler.is_leader() { " (leader)" } else { "" },
        );
    }
    println!("stopping: producer first, then a graceful server shutdown");
    producer.await??;
    scheduler.shutdown().await;
    server.shutdown().await;
    // The same table as `chronos stats` prints.
    let queues = chronos_admin::Admin::new(broker.clone()).queues().await?;
    print!("{}", chronos_admin::queue_table(&queues, None));
    Ok(())
}

/// Fires on Ctrl-C or after `seconds`.
fn tokio_stop(seconds: Option<u64>) -> Arc<tokio::sync::Notify> {
    let stop = Arc::new(tokio::sync::Notify::new());
    let s = stop.clone();
    tokio::spawn(async move {
        match seconds {
            Some(n) => tokio::time::sleep(Duration::from_secs(n)).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        s.notify_waiters();
        // A second notify for whoever started waiting late.
        s.notify_one();
    });
    stop
}

async fn produce(
    client: Client,
    rate: u64,
    enqueued: Arc<AtomicU64>,
    stop: Arc<tokio::sync::Notify>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let per_tick = (rate / 10).max(1);
    let mut n = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.notified() => return Ok(()),
        }
        for _ in 0..per_tick {
            n += 1;
            match n % 10 {
                0 => client
                    .enqueue(&BuildReport { n }, EnqueueOptions::new())
                    .await
                    .map(|_| ())?,
                1..=3 => client
                    .enqueue(&ChargeCard { n, cents: n * 7 }, EnqueueOptions::new())
                    .await
                    .map(|_| ())?,
                4 => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        EnqueueOptions::new().process_in(Duration::from_secs(2)),
                    )
                    .await
                    .map(|_| ())?,
                _ => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        EnqueueOptions::new(),
                    )
                    .await
                    .map(|_| ())?,
            }
            enqueued.fetch_add(1, Ordering::Relaxed);
        }
    }
}
