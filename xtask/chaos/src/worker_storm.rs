//! Worker storm: four worker processes, one picked at random SIGKILLed every 2 s and started
//! again, while they work through a backlog. Each kill strands what the process held (fetched,
//! running, or finished but not yet acked); another worker takes it over once its lease is idle.
//! Books: every task ran, duplicates at most the tasks the killed processes held.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::{Maintain, QueueName};
use rand::Rng;

use crate::books;
use crate::procs::{spawn_worker, Job, Proc, WorkerOpts, WORK_QUEUE};
use crate::report::Row;

const WORKERS: usize = 4;
const KILL_EVERY: Duration = Duration::from_secs(2);

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    // Short: ~3k tasks of 100 ms on 4 x 8 slots, about ten seconds of kills. Full: 100k tasks.
    let (tasks, sleep_ms) = if short { (3_000, 100) } else { (100_000, 5) };
    let opts = WorkerOpts {
        concurrency: 8,
        recover_min_idle: Duration::from_secs(2),
    };
    let server = chronos_testkit::RedisServer::start().context("redis")?;
    let url = server.url();
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let ids = enqueue(&broker, tasks, sleep_ms).await?;

    let mut fleet: Vec<Proc> = (0..WORKERS)
        .map(|_| spawn_worker(&url, ns, &opts))
        .collect::<Result<_>>()?;
    let queue = QueueName::new(WORK_QUEUE)?;
    let mut in_flight = Vec::new();
    let mut last_fault = Instant::now();
    let started = Instant::now();
    let mut rng = rand::thread_rng();
    for n in 1u32.. {
        tokio::time::sleep_until((started + KILL_EVERY * n).into()).await;
        let s = books::work_stats(&broker).await?;
        if s.pending + s.active + s.retry + s.scheduled == 0 {
            break;
        }
        let i = rng.gen_range(0..fleet.len());
        fleet[i].kill();
        last_fault = Instant::now();
        // What the dead consumer holds now is what its death can run twice; nothing moves it
        // before its lease has been idle for recover_min_idle.
        let held = broker
            .consumers(&queue)
            .await?
            .into_iter()
            .find(|(name, _, _)| *name == fleet[i].id)
            .map(|(_, pending, _)| pending)
            .unwrap_or(0);
        in_flight.push(held);
        fleet[i] = spawn_worker(&url, ns, &opts)?;
        if started.elapsed() > Duration::from_secs(if short { 120 } else { 1800 }) {
            break;
        }
    }
    let drained = books::wait_drained(&broker, Duration::from_secs(60)).await?;
    let elapsed = started.elapsed();
    for p in &mut fleet {
        p.stop(Duration::from_secs(10));
    }
    let b = books::tasks(&broker, ns, &ids).await?;
    let bound: u64 = in_flight.iter().sum();
    Ok(vec![Row {
        scenario: "worker-storm".into(),
        load: format!("{tasks} tasks, {WORKERS} procs"),
        faults: format!("{} SIGKILL / 2 s", in_flight.len()),
        lost: b.lost.len() as u64,
        duplicated: b.duplicated,
        max_in_flight: in_flight.iter().copied().max().unwrap_or(0),
        recovery: Some(drained.saturating_duration_since(last_fault)),
        broken: {
            let mut v = b.broken(bound, 0);
            if in_flight.len() < 3 {
                v.push(format!(
                    "only {} kills: the run was too short",
                    in_flight.len()
                ));
            }
            v
        },
        notes: vec![format!(
            "{:.0} tasks/s through the storm ({:.1} s); duplicates {} <= held at kills {} ({:?})",
            tasks as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64(),
            b.duplicated,
            bound,
            in_flight
        )],
    }])
}

/// Enqueues `n` jobs with ids `j<n>`, in batches; returns the ids.
pub(crate) async fn enqueue(broker: &RedisBroker, n: usize, sleep_ms: u64) -> Result<Vec<String>> {
    let client = Client::new(broker.clone());
    let ids: Vec<String> = (0..n).map(|i| format!("j{i}")).collect();
    let job = Job { sleep_ms };
    for chunk in ids.chunks(1000) {
        let results = client
            .enqueue_batch(
                chunk
                    .iter()
                    .map(|id| (&job, EnqueueOptions::new().task_id(id.clone()))),
            )
            .await?;
        for r in results {
            r?;
        }
    }
    Ok(ids)
}
