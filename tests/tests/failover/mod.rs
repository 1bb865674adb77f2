//! The whole system through a failover of the primary that serves its queue, shared by
//! `cluster_failover.rs` and `sentinel_failover.rs`: a producer enqueueing tasks with known ids,
//! two workers, a scheduler firing every second; replication to the replica is cut on purpose,
//! the primary is killed (SIGKILL) a moment later and its replica is promoted. Then the books:
//! every acknowledged enqueue ran, or was acknowledged inside the cut and is gone from Redis
//! (lost by asynchronous replication); nothing is left stuck; duplicates are counted. The
//! deployments and their cut are the harness shared with the chaos scenarios
//! (`chronos_tests::failover`); the load here runs in this process.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronos::prelude::*;
use chronos::{Inspect, QueueName};
use chronos_tests::failover::{Deployment, CUT, LATE_REPLY};
use chronos_tests::{Tick, Work};

/// The delay of every fourth task.
const DELAY: Duration = Duration::from_secs(1);

/// The figures of one run, for RELIABILITY.md.
#[derive(Debug)]
pub(crate) struct Books {
    /// Enqueues acknowledged in all.
    pub(crate) acked: usize,
    /// Of them, acknowledged between the cut and the kill.
    pub(crate) acked_in_cut: usize,
    /// Acknowledged in the cut, never ran and absent from Redis: lost by async replication.
    pub(crate) lost: usize,
    /// Tasks that ran more than once.
    pub(crate) duplicates: usize,
    /// Kill to the replica's promotion, as the fixture's polling (redis-cli, every 50 ms) sees
    /// it: an upper bound, clients may get there first.
    pub(crate) promotion: Duration,
    /// Kill to the first enqueue acknowledged again.
    pub(crate) enqueue_outage: Duration,
    /// Kill to the first completion of a task enqueued after the kill.
    pub(crate) recovery: Duration,
    /// Scheduler triggers that ran more than once.
    pub(crate) tick_duplicates: usize,
    /// Trigger seconds between the first and the last tick that never ran.
    pub(crate) tick_misses: usize,
}

#[derive(Default)]
struct Record {
    /// Task id -> when each run finished.
    runs: HashMap<String, Vec<Instant>>,
}

/// Runs the scenario against `url` (with `queue` served by the primary `dep` cuts and kills)
/// and checks the books; returns the figures.
/// With `durable`, every enqueue asks for one replica's acknowledgement
/// ([`EnqueueOptions::durable`]); one refused for want of it is retried like a failed one.
pub(crate) async fn run(
    name: &str,
    url: String,
    queue: &str,
    dep: Arc<dyn Deployment>,
    durable: bool,
) -> Books {
    let ns = chronos_testkit::namespace();
    let connect = || {
        RedisBroker::builder(url.clone())
            .namespace(ns.clone())
            .connect()
    };
    let record = Arc::new(Mutex::new(Record::default()));

    let mut servers = Vec::new();
    for _ in 0..2 {
        let mut mux = Mux::new();
        let r = record.clone();
        mux.handle(move |ctx: Context, task: Task<Work>| {
            let r = r.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
                note_run(&r, ctx.task_id());
                Ok(())
            }
        })
        .expect("work handler");
        let r = record.clone();
        mux.handle(move |ctx: Context, _t: Task<Tick>| {
            let r = r.clone();
            async move {
                note_run(&r, ctx.task_id());
                Ok(())
            }
        })
        .expect("tick handler");
        let config = ServerConfig {
            queues: vec![(queue.to_string(), 1)],
            concurrency: 4,
            heartbeat_interval: Duration::from_millis(200),
            recover_min_idle: Duration::from_secs(1),
            recover_interval: Duration::from_millis(200),
            forward_interval: Duration::from_millis(50),
            retry_delay: Arc::new(|_, _| Duration::from_millis(100)),
            ..ServerConfig::default()
        };
        let broker = connect().await.expect("worker connect");
        servers.push(
            Server::new(broker, mux, config)
                .expect("server")
                .start()
                .await
                .expect("start"),
        );
    }

    let mut scheduler = Scheduler::new(
        connect().await.expect("scheduler connect"),
        SchedulerConfig {
            leader_ttl: Duration::from_secs(2),
            ..SchedulerConfig::default()
        },
    );
    scheduler
        .register_interval(
            Duration::from_secs(1),
            &Tick {
                note: "tick".into(),
            },
            ScheduleOptions::new().id("tick").queue(queue),
        )
        .expect("register");
    let scheduler = scheduler.start().await.expect("scheduler start");

    // The producer: known ids, each enqueue retried with the same id until acknowledged (the
    // producer's side of the contract), every acknowledgement timed.
    let acks: Arc<Mutex<BTreeMap<u64, Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (acks, stop) = (acks.clone(), stop.clone());
        let client = Client::new(connect().await.expect("producer connect"));
        let queue = queue.to_string();
        tokio::spawn(async move {
            let (mut errors, mut not_replicated) = (0u64, 0u64);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let mut opts = EnqueueOptions::new()
                    .queue(queue.clone())
                    .task_id(format!("w-{n}"))
                    .max_retry(50);
                if durable {
                    opts = opts.durable(1, Duration::from_millis(200));
                }
                // One in four is delayed: a worker drains the stream within milliseconds, so
                // the writes a failover can lose are mostly those still waiting in Redis.
                if n % 4 == 3 {
                    opts = opts.process_in(DELAY);
                }
                match client.enqueue(&Work { sleep_ms: 10 }, opts).await {
                    Ok(_) => {
                        acks.lock().expect("acks").insert(n, Instant::now());
                        n += 1;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(e) => {
                        if matches!(e, chronos::BrokerError::NotReplicated { .. }) {
                            not_replicated += 1;
                        } else {
                            errors += 1;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            (errors, not_replicated)
        })
    };

    tokio::time::sleep(Duration::from_secs(3)).await;
    let d = dep.clone();
    let (cut, old, _) = tokio::task::spawn_blocking(move || d.cut())
        .await
        .expect("join")
        .expect("cut replication");
    let cut_at = cut.started();
    tokio::time::sleep(CUT).await;
    tokio::task::spawn_blocking(move || cut.kill_primary())
        .await
        .expect("join")
        .expect("kill primary");
    let kill_at = Instant::now();
    // An acknowledgement this close after the kill came from the dead primary (see LATE_REPLY).
    let cut_end = kill_at + LATE_REPLY;
    let d = dep.clone();
    tokio::task::spawn_blocking(move || d.wait_promoted(old, Duration::from_secs(30)))
        .await
        .expect("join")
        .expect("promotion");
    let promotion = kill_at.elapsed();
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::SeqCst);
    let (enqueue_errors, not_replicated) = producer.await.expect("producer");
    scheduler.shutdown().await;

    let acks = acks.lock().expect("acks").clone();
    let in_cut = |at: &Instant| *at >= cut_at && *at < cut_end;
    let ran = |id: &str| {
        record
            .lock()
            .map(|r| r.runs.contains_key(id))
            .unwrap_or(false)
    };
    // Every enqueue acknowledged outside the cut must run, however long the recoverer takes.
    let start = Instant::now();
    let mut unexplained: Vec<u64> = Vec::new();
    while start.elapsed() < Duration::from_secs(25) {
        unexplained = acks
            .iter()
            .filter(|(n, at)| !in_cut(at) && !ran(&format!("w-{n}")))
            .map(|(n, _)| *n)
            .collect();
        if unexplained.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let inspector = connect().await.expect("inspector connect");
    let q = QueueName::new(queue).expect("queue");
    chronos_testkit::eventually(
        Duration::from_secs(20),
        "nothing left pending, active, scheduled or waiting for a retry",
        || async {
            inspector.queue_stats(&q).await.is_ok_and(|s| {
                (s.pending, s.active, s.scheduled, s.retry, s.archived) == (0, 0, 0, 0, 0)
            })
        },
    )
    .await;
    for s in servers {
        s.shutdown().await;
    }

    let mut lost = Vec::new();
    for (n, _) in acks.iter().filter(|(_, at)| in_cut(at)) {
        let id = format!("w-{n}");
        if !ran(&id) {
            let stored = inspector.task(&q, &id).await.expect("task lookup");
            assert!(
                stored.is_none(),
                "{id} never ran but is still in Redis: {stored:?}"
            );
            lost.push(*n);
        }
    }
    let record = record.lock().expect("record");
    let duplicates = record
        .runs
        .iter()
        .filter(|(id, r)| id.starts_with("w-") && r.len() > 1)
        .count();
    let first_ack_after = acks
        .values()
        .filter(|at| **at > cut_end)
        .min()
        .copied()
        .expect("an enqueue after the kill");
    let recovery = acks
        .iter()
        .filter(|(_, at)| **at > cut_end)
        .filter_map(|(n, _)| record.runs.get(&format!("w-{n}")))
        .flatten()
        // A task refused as not replicated may have run on the old primary before the retry
        // that was acknowledged: only runs after the kill count.
        .filter(|at| **at > kill_at)
        .min()
        .copied()
        .expect("a task enqueued after the kill ran")
        - kill_at;
    let mut ticks: BTreeMap<i64, usize> = BTreeMap::new();
    for (id, r) in &record.runs {
        if let Some(sec) = id.strip_prefix("tick:").and_then(|s| s.parse().ok()) {
            ticks.insert(sec, r.len());
        }
    }
    let tick_duplicates = ticks.values().filter(|&&c| c > 1).count();
    let tick_misses = match (ticks.keys().next(), ticks.keys().last()) {
        (Some(a), Some(b)) => (b - a + 1) as usize - ticks.len(),
        _ => 0,
    };
    let books = Books {
        acked: acks.len(),
        acked_in_cut: acks.values().filter(|at| in_cut(at)).count(),
        lost: lost.len(),
        duplicates,
        promotion,
        enqueue_outage: first_ack_after - kill_at,
        recovery,
        tick_duplicates,
        tick_misses,
    };
    eprintln!(
        "[{name}{}] acked enqueues {}, acked during the {CUT:?} replication cut {}, lost \
         (acked in the cut, never ran, absent after failover) {} {lost:?}, tasks run twice {}, \
         producer errors {enqueue_errors}, refused as not replicated {not_replicated}; kill -> promotion {:?}, kill -> first enqueue acked \
         {:?}, kill -> first new completion {:?}; ticks {} (seconds {:?}..{:?}), run twice {}, \
         missed {}",
        if durable { ", durable" } else { "" },
        books.acked,
        books.acked_in_cut,
        books.lost,
        books.duplicates,
        books.promotion,
        books.enqueue_outage,
        books.recovery,
        ticks.len(),
        ticks.keys().next(),
        ticks.keys().last(),
        books.tick_duplicates,
        books.tick_misses,
    );
    assert!(
        unexplained.is_empty(),
        "acknowledged outside the cut and never ran: {unexplained:?}"
    );
    assert!(books.lost <= books.acked_in_cut);
    books
}

fn note_run(record: &Mutex<Record>, id: &str) {
    if let Ok(mut r) = record.lock() {
        r.runs
            .entry(id.to_string())
            .or_default()
            .push(Instant::now());
    }
}
