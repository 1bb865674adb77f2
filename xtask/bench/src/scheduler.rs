use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::{ClientLike, StreamsInterface};
use chronos::prelude::*;
use chronos::{Inspect, QueueName, Schedules};

use crate::fixture::payload;
use crate::report::{median, percentile};

const SCHEDULES: usize = 10_000;
const RUN: Duration = Duration::from_secs(10);
const FAILOVERS: usize = 3;

/// Trigger lateness at 10k one-second schedules, fire calls per trigger, and failover times of
/// real scheduler processes (crash and graceful).
pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!("== scheduler: {SCHEDULES} schedules every 1 s for {RUN:?}, redis at {url}");
    let broker = RedisBroker::builder(&url)
        .namespace("sched-bench")
        .connect()
        .await?;
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    let args = payload();
    for i in 0..SCHEDULES {
        scheduler.register_interval(
            Duration::from_secs(1),
            &args,
            ScheduleOptions::new().id(format!("s{i}")),
        )?;
    }
    let handle = scheduler.start().await?;
    tokio::time::sleep(RUN).await;
    let stats = handle.stats();
    handle.shutdown().await;
    let lateness = lateness(&broker).await?;
    println!(
        "{:<44} p50 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   ({} triggers)",
        "trigger lateness (enqueued - trigger time)",
        percentile(&lateness, 50.0),
        percentile(&lateness, 99.0),
        lateness.last().copied().unwrap_or(f64::NAN),
        lateness.len()
    );
    println!(
        "{:<44} {:.4} ({} fire calls for {} triggers; counters are kept inside the fire call)",
        "fire round trips per trigger",
        stats.fire_calls as f64 / stats.fired.max(1) as f64,
        stats.fire_calls,
        stats.fired
    );
    let _: () = broker.client().flushall(false).await?;

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

/// Lateness of every fired task: its enqueue time minus its trigger time (both in the task).
async fn lateness(broker: &RedisBroker) -> Result<Vec<f64>> {
    let queue = QueueName::new("default")?;
    let stream = broker.keyspace().queue(&queue).stream();
    let mut start = "-".to_string();
    let mut ids = Vec::new();
    loop {
        let page: Vec<(String, Vec<(String, chronos::fred::bytes::Bytes)>)> = broker
            .client()
            .xrange(&stream, start.as_str(), "+", Some(5000))
            .await?;
        let full = page.len() == 5000;
        for (mid, fields) in &page {
            if let Some((_, v)) = fields.iter().find(|(k, _)| k == "i") {
                ids.push(String::from_utf8_lossy(v).into_owned());
            }
            start = format!("({mid}");
        }
        if !full {
            break;
        }
    }
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(2000) {
        let recs = futures::future::join_all(chunk.iter().map(|id| broker.task(&queue, id))).await;
        for rec in recs.into_iter().flatten().flatten() {
            if let Ok(env) = rec.envelope {
                if let Some(t) = env
                    .headers
                    .get("chronos-trigger-ms")
                    .and_then(|t| t.parse::<i64>().ok())
                {
                    out.push((env.enqueued_at_ms - t) as f64);
                }
            }
        }
    }
    out.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
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
