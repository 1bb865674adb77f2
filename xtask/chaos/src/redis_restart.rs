//! Redis restart: an append-only Redis, SIGKILLed and started again twice while a producer
//! enqueues and three worker processes work, once with `appendfsync always` and once with
//! `everysec`.
//!
//! What each setting promises: `always` fsyncs every write before Redis replies, so no
//! acknowledged write may be lost to anything. `everysec` fsyncs once a second, so a crash of
//! the machine can lose up to about the last second of acknowledged writes; a crash of the Redis
//! process alone loses nothing, since Redis has written the file (to the kernel) before it
//! replies. A SIGKILL is a process crash, so both runs must lose nothing; the books still count
//! acknowledged-but-lost enqueues on their own and bound them by the enqueues acknowledged in
//! the last second before each kill, which is what `everysec` may lose at worst.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;

use crate::books;
use crate::procs::{spawn_worker, Job, Proc, WorkerOpts};
use crate::report::Row;

const WORKERS: usize = 3;
/// Tasks per enqueue call of the producer.
const BATCH: usize = 5;

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for fsync in ["always", "everysec"] {
        rows.push(one(short, fsync).await?);
    }
    Ok(rows)
}

/// What the producer got acknowledged, and when.
#[derive(Debug, Default)]
struct Produced {
    acked: Vec<(String, Instant)>,
    /// Tasks of calls that failed (Redis away) and were sent again.
    resent: u64,
}

async fn one(short: bool, fsync: &str) -> Result<Row> {
    // The producer runs for `length`; Redis is killed at a third and two thirds of it.
    let (length, pause) = if short {
        (Duration::from_secs(9), Duration::from_millis(20))
    } else {
        (Duration::from_secs(60), Duration::from_millis(10))
    };
    let mut server =
        chronos_testkit::RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", fsync])
            .context("redis")?;
    let url = server.url();
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let opts = WorkerOpts {
        concurrency: 8,
        recover_min_idle: Duration::from_secs(2),
    };
    let mut fleet: Vec<Proc> = (0..WORKERS)
        .map(|_| spawn_worker(&url, ns, &opts))
        .collect::<Result<_>>()?;

    let produced = Arc::new(Mutex::new(Produced::default()));
    let producer = tokio::spawn(produce(
        Client::new(broker.clone()),
        produced.clone(),
        Instant::now() + length,
        pause,
    ));
    let started = Instant::now();
    let mut in_flight = Vec::new();
    let mut last_second = Vec::new();
    let mut downtime = Vec::new();
    for k in 1..=2 {
        tokio::time::sleep((length * k / 3).saturating_sub(started.elapsed())).await;
        // Held by workers now: a kill can make these run again (a record written whose ack
        // was not, or an ack that failed while Redis was away).
        in_flight.push(
            books::work_stats(&broker)
                .await
                .map(|s| s.active)
                .unwrap_or(0),
        );
        server.kill();
        let killed = Instant::now();
        last_second.push(
            lock(&produced)
                .acked
                .iter()
                .filter(|(_, at)| killed.duration_since(*at) <= Duration::from_secs(1))
                .count() as u64,
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = recorded(server.port()).await;
        server.restart().context("restart redis")?;
        // Back in business when a run is recorded again (the workers reconnected on their own).
        let back = Instant::now();
        while recorded(server.port()).await <= before && back.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        downtime.push(killed.elapsed());
    }
    producer.await??;
    books::wait_drained(&broker, Duration::from_secs(60)).await?;
    for p in &mut fleet {
        p.stop(Duration::from_secs(10));
    }
    let (ids, resent, producer_gap) = {
        let p = lock(&produced);
        let gap = p
            .acked
            .windows(2)
            .map(|w| w[1].1.duration_since(w[0].1))
            .max()
            .unwrap_or_default();
        (
            p.acked.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
            p.resent,
            gap,
        )
    };
    let b = books::tasks(&broker, ns, &ids).await?;
    let held: u64 = in_flight.iter().sum();
    let may_lose: u64 = last_second.iter().sum();
    let lost = b.lost.len() as u64;
    // What a crash may lose of acknowledged writes under this fsync policy (see above).
    let allowed = if fsync == "always" { 0 } else { may_lose };
    let broken = b.broken(held + resent, allowed);
    Ok(Row {
        scenario: format!("redis-restart ({fsync})"),
        load: format!("{} tasks, {WORKERS} procs", ids.len()),
        faults: "2 redis SIGKILL + restart".into(),
        lost,
        duplicated: b.duplicated,
        max_in_flight: in_flight.iter().copied().max().unwrap_or(0),
        recovery: downtime.iter().max().copied(),
        broken,
        notes: vec![format!(
            "acknowledged-but-lost enqueues {lost} (allowed {allowed}; acknowledged in the last \
             second before each kill {last_second:?}); duplicates {} <= held at kills {held} + \
             re-sent by the producer {resent}; kill to the next recorded run {:.1?}; longest \
             pause of the producer's acknowledgements {:.1?}",
            b.duplicated, downtime, producer_gap
        )],
    })
}

/// Enqueues batches of jobs with fresh ids until `until`; a call that fails is sent again with
/// the same ids (safe: an explicit id already stored with the same options is a success).
async fn produce(
    client: Client,
    produced: Arc<Mutex<Produced>>,
    until: Instant,
    pause: Duration,
) -> Result<()> {
    let job = Job { sleep_ms: 20 };
    let mut next = 0u64;
    while Instant::now() < until {
        let ids: Vec<String> = (next..next + BATCH as u64)
            .map(|i| format!("p{i}"))
            .collect();
        next += BATCH as u64;
        loop {
            let call = client
                .enqueue_batch(
                    ids.iter()
                        .map(|id| (&job, EnqueueOptions::new().task_id(id.clone()))),
                )
                .await;
            match call {
                Ok(results) if results.iter().all(Result::is_ok) => break,
                _ => {
                    lock(&produced).resent += ids.len() as u64;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        let at = Instant::now();
        lock(&produced)
            .acked
            .extend(ids.into_iter().map(|id| (id, at)));
        tokio::time::sleep(pause).await;
    }
    Ok(())
}

/// Runs recorded so far (0 while Redis is away: the caller compares). Asked over a fresh
/// connection each time, so that the figure is the workers' recovery, not that of this
/// process's own client.
async fn recorded(port: u16) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let key = crate::procs::runs_key("chaos");
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let cmd = format!("*2\r\n$4\r\nHLEN\r\n${}\r\n{key}\r\n", key.len());
        s.write_all(cmd.as_bytes()).await?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await?;
        // An integer reply (`:<n>`); anything else (LOADING while the file is read) is 0.
        let reply = String::from_utf8_lossy(&buf[..n]).into_owned();
        Ok::<u64, std::io::Error>(
            reply
                .strip_prefix(':')
                .and_then(|r| r.trim().parse().ok())
                .unwrap_or(0),
        )
    };
    tokio::time::timeout(Duration::from_millis(500), ask)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
