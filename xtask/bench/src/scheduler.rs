use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::{ClientLike, StreamsInterface};
use chronos::prelude::*;
use chronos::{QueueName, Schedules};

use crate::cost;
use crate::fixture::payload;
use crate::report::{median, percentile};

/// Schedule counts measured: the 100k, and 10k beside it to show how cost per trigger
/// moves with scale.
const SCALES: [usize; 2] = [10_000, 100_000];
/// The measured window, in whole seconds of triggers. At 100k one-second schedules that is
/// 500k tasks left in Redis (no worker runs, so the leader and Redis have the cores to
/// themselves): short enough to read back in seconds, long enough to hold a registry tick.
const WINDOW_SECS: u64 = 5;
/// Start-up (registration, the first registry publish, the term's catch-up) may take this long
/// before the first trigger fires.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Scales up to this one warm up until every fire history is full; beyond it the leader falls
/// behind (see the model line), and a longer run would only measure a deeper backlog.
const WARM_UP_UP_TO: usize = 10_000;
const FAILOVERS: usize = 3;

/// Trigger lateness, leader CPU and Redis cost per trigger at 10k and 100k one-second
/// schedules, then failover times of real scheduler processes (crash and graceful).
pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== scheduler: one leader, N schedules every 1 s, a {WINDOW_SECS} s window after start-up, \
         no worker; redis at {url}"
    );
    println!(
        "   lateness = redis time of the fire call that wrote the task (its stream entry id) - \
         trigger time"
    );
    let only: Option<usize> = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok());
    for n in SCALES.into_iter().filter(|n| only.is_none_or(|o| o == *n)) {
        at_scale(&url, n).await?;
    }
    if std::env::var_os("BENCH_SKIP_FAILOVER").is_some() {
        return Ok(());
    }

    let (crash, graceful) = failovers(&url).await?;
    println!(
        "{:<44} median {:>6.0} ms   runs {:.0?} (leader TTL 5 s)",
        "crash failover (SIGKILL leader -> new leader)",
        median(&crash),
        crash
    );
    println!(
        "{:<44} median {:>6.0} ms   runs {:.0?}",
        "graceful failover (SIGTERM leader -> new leader)",
        median(&graceful),
        graceful
    );
    Ok(())
}

/// One leader with `n` one-second schedules. Start-up is left out: the window opens half a
/// second after a whole second once the first trigger fired, and spans [`WINDOW_SECS`] whole
/// rounds, so the CPU and Redis snapshots around it hold exactly that many rounds of firing
/// plus whatever the scheduler's other loops (registry, runtime poll, adopter, lease renewal)
/// do in that time, which is theirs to pay too.
async fn at_scale(url: &str, n: usize) -> Result<()> {
    let broker = RedisBroker::builder(url)
        .namespace(format!("sched-bench-{n}"))
        .connect()
        .await?;
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    let args = payload();
    for i in 0..n {
        scheduler.register_interval(
            Duration::from_secs(1),
            &args,
            ScheduleOptions::new().id(format!("s{i}")),
        )?;
    }
    // INFO goes over a connection of its own: on the scheduler's pipelined one it would wait
    // behind every fire call in flight and snapshot the wrong moment.
    let probe = RedisBroker::builder(url)
        .namespace("sched-bench-probe")
        .connect()
        .await?;
    let started = Instant::now();
    let handle = scheduler.start().await?;
    while handle.stats().fired == 0 {
        anyhow::ensure!(
            started.elapsed() < START_TIMEOUT,
            "no trigger fired within {START_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first_fire = started.elapsed();
    // Each trigger also rewrites its schedule's fire history (the last FIRES_KEPT fires, one
    // packed value), which costs more the fuller it is: where the leader keeps up, the window
    // waits until every history is full, so the figures are the steady state's.
    let warm_up = if n <= WARM_UP_UP_TO {
        chronos::FIRES_KEPT as i64
    } else {
        0
    };
    let now = now_ms();
    let open = (now / 1000 + 1 + warm_up) * 1000 + 500;
    sleep_until_ms(open).await;
    let (s0, cpu0, stats0) = (
        cost::snap(probe.client()).await?,
        crate::cpu::process_us()?,
        handle.stats(),
    );
    let close = open + WINDOW_SECS as i64 * 1000;
    sleep_until_ms(close).await;
    let (cpu1, stats1) = (crate::cpu::process_us()?, handle.stats());
    let s1 = cost::snap(probe.client()).await?;
    handle.shutdown().await;

    let fired = stats1.fired - stats0.fired;
    let expected = n as u64 * WINDOW_SECS;
    let (late, written_late) = lateness(&broker, open, close).await?;
    let (tasks_due, written) = (late.len(), written_late.len());
    // Per task written in the window, not per trigger counted fired: the leader counts a round
    // when its last call answers, so a round cut by the window's edge would skew the count.
    let per = written.max(1) as f64;
    let redis = cost::delta(&s0, &s1, per);
    let wall_us = (close - open) as f64 * 1000.0;
    let leader_us = cpu1 - cpu0;
    println!(
        "-- {n} schedules (start-up to first trigger {:.1} s, then {warm_up} s of firing before \
         the window)",
        first_fire.as_secs_f64()
    );
    println!(
        "{:<44} p50 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   ({tasks_due} of {expected} \
         triggers written)",
        "trigger lateness",
        percentile(&late, 50.0),
        percentile(&late, 99.0),
        late.last().copied().unwrap_or(f64::NAN),
    );
    // Where the leader falls behind, the window's own triggers may not be written at all; the
    // tasks it did write meanwhile (of earlier triggers) say how far behind it is.
    println!(
        "{:<44} p50 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   ({written} tasks)",
        "lateness of the tasks written in the window",
        percentile(&written_late, 50.0),
        percentile(&written_late, 99.0),
        written_late.last().copied().unwrap_or(f64::NAN),
    );
    println!(
        "{:<44} {written} tasks written; the leader counted {fired} fired, {} missed, {} \
         suppressed, {} fire calls ({:.4} per task)",
        "in the window",
        stats1.missed - stats0.missed,
        stats1.suppressed - stats0.suppressed,
        stats1.fire_calls - stats0.fire_calls,
        (stats1.fire_calls - stats0.fire_calls) as f64 / per,
    );
    println!(
        "{:<44} {:>8.2} us   (busy {:.0} % of one core)",
        "leader process cpu per trigger",
        leader_us / per,
        100.0 * leader_us / wall_us
    );
    println!(
        "{:<44} {:>8.2} us   (busy {:.0} % of its thread)",
        "redis cpu per trigger",
        redis.cpu_us,
        100.0 * redis.cpu_us * per / wall_us
    );
    println!(
        "{:<44} {:>8.2}      top: {}",
        "redis calls per trigger",
        redis.calls,
        cost::top(&redis)
    );
    println!(
        "{:<44} {}",
        "redis time per trigger by command",
        cost::slowest(&redis)
    );
    // A round's fire calls run one after another on Redis' one thread, so the last trigger of
    // a round is written about (triggers x Redis time per trigger) after the first: the bound
    // the lateness target puts on how many triggers one primary can take per second.
    println!(
        "{:<44} {:>8.0} triggers per second per primary for a round under 250 ms; {:.0} at 100 % \
         of its thread",
        "model: one redis primary",
        250_000.0 / redis.cpu_us.max(0.01),
        1e6 / redis.cpu_us.max(0.01)
    );
    println!(
        "{:<44} won {} elections in the window, leading at its end: {}",
        "leadership",
        stats1.elections_won - stats0.elections_won,
        stats1.is_leader
    );
    let _: () = broker.client().flushall(false).await?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn sleep_until_ms(at_ms: i64) {
    let ms = at_ms.saturating_sub(now_ms()).max(0);
    tokio::time::sleep(Duration::from_millis(ms as u64)).await;
}

/// Lateness (ms, sorted) of every task whose trigger falls in `[open, close)`, and of every task
/// written in that span whatever its trigger. Lateness is a task's stream entry
/// id's time, which Redis takes when the fire call runs, minus the trigger time, which the task
/// id `<schedule>:<trigger unix seconds>` carries (one-second intervals trigger on whole
/// seconds). Reading ids from the stream alone, page by page, keeps half a million tasks
/// cheap to read and the memory one float each; reading each task's record would be a round
/// trip per task.
async fn lateness(broker: &RedisBroker, open: i64, close: i64) -> Result<(Vec<f64>, Vec<f64>)> {
    let queue = QueueName::new("default")?;
    let stream = broker.keyspace().queue(&queue).stream();
    // No task of a trigger at or after `open` can have been written before it.
    let mut start = format!("{open}-0");
    let mut out = Vec::new();
    let mut written_in = Vec::new();
    const PAGE: u64 = 5000;
    loop {
        let page: Vec<(String, Vec<(String, chronos::fred::bytes::Bytes)>)> = broker
            .client()
            .xrange(&stream, start.as_str(), "+", Some(PAGE))
            .await?;
        for (mid, fields) in &page {
            start = format!("({mid}");
            let written: i64 = mid
                .split_once('-')
                .and_then(|(ms, _)| ms.parse().ok())
                .context("stream entry id")?;
            let Some((_, id)) = fields.iter().find(|(k, _)| k == "i") else {
                continue;
            };
            let trigger = std::str::from_utf8(id)
                .ok()
                .and_then(|id| id.rsplit_once(':'))
                .and_then(|(_, secs)| secs.parse::<i64>().ok())
                .context("task id without a trigger second")?
                * 1000;
            if (open..close).contains(&trigger) {
                out.push((written - trigger) as f64);
            }
            if (open..close).contains(&written) {
                written_in.push((written - trigger) as f64);
            }
        }
        if (page.len() as u64) < PAGE {
            break;
        }
    }
    out.sort_by(|a, b| a.total_cmp(b));
    written_in.sort_by(|a, b| a.total_cmp(b));
    Ok((out, written_in))
}

/// Spawns two scheduler processes (this binary, `__scheduler` mode), kills or stops the leader,
/// and times until the other holds the lock.
async fn failovers(url: &str) -> Result<(Vec<f64>, Vec<f64>)> {
    let exe = std::env::current_exe()?;
    let mut crash = Vec::new();
    let mut graceful = Vec::new();
    for run in 0..FAILOVERS * 2 {
        let ns = format!("failover-{run}");
        let broker = RedisBroker::builder(url)
            .namespace(ns.as_str())
            .connect()
            .await?;
        let mut children = Vec::new();
        for _ in 0..2 {
            children.push(
                Command::new(&exe)
                    .args(["__scheduler", url, &ns])
                    .stdout(Stdio::null())
                    .spawn()
                    .context("spawn scheduler process")?,
            );
        }
        let old = leader_pid(&broker, None).await?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sig = if run % 2 == 0 { "-KILL" } else { "-TERM" };
        Command::new("kill")
            .args([sig, &old.to_string()])
            .status()?;
        let t0 = Instant::now();
        leader_pid(&broker, Some(old)).await?;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        if run % 2 == 0 {
            crash.push(ms)
        } else {
            graceful.push(ms)
        }
        for mut c in children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    Ok((crash, graceful))
}

async fn leader_pid(broker: &RedisBroker, not: Option<u32>) -> Result<u32> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Some(l) = broker.leader().await? {
            if let Some(pid) = l.id.strip_prefix("pid-").and_then(|p| p.parse().ok()) {
                if Some(pid) != not {
                    return Ok(pid);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::bail!("no leader after 20 s")
}

/// `chronos-bench __scheduler <url> <namespace>`: a scheduler process with one schedule, default
/// settings (leader TTL 5 s), that resigns on SIGTERM.
pub(crate) async fn child(url: &str, ns: &str) -> Result<()> {
    let broker = RedisBroker::builder(url).namespace(ns).connect().await?;
    let config = SchedulerConfig {
        instance_id: Some(format!("pid-{}", std::process::id())),
        ..SchedulerConfig::default()
    };
    let mut scheduler = Scheduler::new(broker, config);
    scheduler.register_interval(
        Duration::from_secs(1),
        &payload(),
        ScheduleOptions::new().id("tick"),
    )?;
    let handle = scheduler.start().await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    term.recv().await;
    handle.shutdown().await;
    Ok(())
}
