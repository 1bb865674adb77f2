//! Worker storm: four worker processes, one picked at random SIGKILLed every 2 s and started
//! again, while they work through a backlog. Each kill strands what the process held (fetched,
//! running, or finished but not yet acked); another worker takes it over once its lease is idle.
//! Books: every task ran, duplicates at most the tasks the killed processes held.
//!
//! Priority storm: the same, with the tasks spread over the ten priority levels and the queue's
//! aging bound at 2 s, so deliveries of every level's stream are stranded and reclaimed. Books
//! as above, and no level starved: every level's tasks all ran and its stream is empty.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::{Inspect, Maintain, QueueName};
use rand::Rng;

use crate::books;
use crate::procs::{spawn_worker, Job, Proc, WorkerOpts, WORK_QUEUE};
use crate::report::Row;

const WORKERS: usize = 4;
const KILL_EVERY: Duration = Duration::from_secs(2);

pub(crate) async fn run(short: bool, levels: bool) -> Result<Vec<Row>> {
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
    let ids = if levels {
        let key = broker
            .keyspace()
            .queue(&QueueName::new(WORK_QUEUE)?)
            .settings();
        let _: i64 = chronos::fred::interfaces::HashesInterface::hset(
            broker.client(),
            key,
            ("aging_ms", "2000"),
        )
        .await?;
        enqueue_at(&broker, tasks, sleep_ms, |i| {
            Priority::level((i % 10) as u8).ok()
        })
        .await?
    } else {
        enqueue(&broker, tasks, sleep_ms).await?
    };

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
    let stats = broker.queue_stats(&queue).await?;
    let waiting: Vec<(u8, u64)> = stats
        .levels
        .iter()
        .filter(|l| l.pending + l.active > 0)
        .map(|l| (l.priority.get(), l.pending + l.active))
        .collect();
    Ok(vec![Row {
        scenario: if levels {
            "priority-storm"
        } else {
            "worker-storm"
        }
        .into(),
        load: format!("{tasks} tasks, {WORKERS} procs"),
        faults: format!("{} SIGKILL / 2 s", in_flight.len()),
        lost: b.lost.len() as u64,
        duplicated: b.duplicated,
        max_in_flight: in_flight.iter().copied().max().unwrap_or(0),
        recovery: Some(drained.saturating_duration_since(last_fault)),
        broken: {
            let mut v = b.broken(bound, 0);
            if levels && stats.levels.len() < 10 {
                v.push(format!("only {} levels in use", stats.levels.len()));
            }
            if !waiting.is_empty() {
                v.push(format!("levels still holding tasks: {waiting:?}"));
            }
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
    enqueue_at(broker, n, sleep_ms, |_| None).await
}

/// [`enqueue`], job `i` at priority level `level(i)` (None: the default).
pub(crate) async fn enqueue_at(
    broker: &RedisBroker,
    n: usize,
    sleep_ms: u64,
    level: impl Fn(usize) -> Option<Priority>,
) -> Result<Vec<String>> {
    let client = Client::new(broker.clone());
    let ids: Vec<String> = (0..n).map(|i| format!("j{i}")).collect();
    let job = Job { sleep_ms };
    for chunk in ids.chunks(1000) {
        let results = client
            .enqueue_batch(chunk.iter().map(|id| {
                let i: usize = id[1..].parse().unwrap_or(0);
                let opts = EnqueueOptions::new().task_id(id.clone());
                let opts = match level(i) {
                    Some(p) => opts.priority(p),
                    None => opts,
                };
                (&job, opts)
            }))
            .await?;
        for r in results {
            r?;
        }
    }
    Ok(ids)
}
