//! Recovery at the worker level: a real `Server` against a real Redis for each
//! defect the broker and worker fixes closed (idle running count, janitor caps, undecodable and
//! corrupt tasks, unstarted prefetches of a crashed worker, recovery behind many live
//! deliveries, a lost dead-letter reply).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::fred::interfaces::{HashesInterface, StreamsInterface};
use chronos_broker::{
    now_ms, Client, Completion, Consume, EnqueueOptions, Inspect, Lease, LeaseId, Maintain,
    QueueName, RedisBroker, SettleExt, TaskState,
};
use chronos_testkit::{RedisServer, TcpProxy};
use chronos_worker::{
    Context, DeadLetterEvent, Mux, Server, ServerConfig, Task, TaskError, UnrunnablePolicy,
};
use common::{broker, broker_at, eventually, fast_config, q, Job};

/// Every dead-letter event the server reported.
type DeadLog = Arc<Mutex<Vec<DeadLetterEvent>>>;

/// Collects dead-letter events through the server's hook.
fn dead_sink(cfg: &mut ServerConfig) -> DeadLog {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let sink = dead.clone();
    cfg.on_dead_letter = Some(chronos_worker::dead_letter_hook(
        move |e: DeadLetterEvent| {
            sink.lock().expect("lock").push(e);
            async {}
        },
    ));
    dead
}

/// Marks fetched deliveries started, as the worker does right before a handler runs (a fake
/// consumer must do the same for its deliveries to count as attempts).
async fn mark_started(b: &RedisBroker, queue: &QueueName, leases: &[Lease]) {
    let ids: Vec<LeaseId> = leases.iter().map(|l| l.id.clone()).collect();
    for chunk in ids.chunks(1000) {
        let outcomes = b.start(queue, chunk).await.expect("start");
        for o in outcomes {
            assert!(
                matches!(o, chronos_broker::StartOutcome::Started(_)),
                "{o:?}"
            );
        }
    }
}

/// Fetches exactly `n` deliveries of `queue` for `consumer` (in reads of at most 1,000).
async fn fetch_all(b: &RedisBroker, queue: &QueueName, consumer: &str, n: usize) -> Vec<Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = (n - out.len()).min(1000);
        let f = b
            .fetch(&mut reader, queue, consumer, &[], want, Duration::ZERO)
            .await
            .expect("fetch");
        assert!(!f.leases.is_empty(), "queue ran dry at {}", out.len());
        out.extend(f.leases);
    }
    b.close_reader(reader).await;
    assert_eq!(out.len(), n);
    out
}

/// Enqueues jobs `from..to` to `queue` in batches, returning their ids in order.
async fn enqueue_jobs(b: &RedisBroker, queue: &str, from: u32, to: u32) -> Vec<String> {
    let client = Client::new(b.clone());
    let jobs: Vec<Job> = (from..to).map(|n| Job { n, sleep_ms: 0 }).collect();
    let mut ids = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(1000) {
        let res = client
            .enqueue_batch(
                chunk
                    .iter()
                    .map(|j| (j, EnqueueOptions::new().queue(queue))),
            )
            .await
            .expect("enqueue batch");
        for r in res {
            ids.push(r.expect("enqueued").id);
        }
    }
    ids
}

/// The attempt number of every run, per job `n`.
type Runs = Arc<Mutex<BTreeMap<u32, Vec<u32>>>>;

/// A mux whose `Job` handler records each run's attempt number per `n` and succeeds.
fn recording_mux() -> (Mux, Runs) {
    let runs: Runs = Arc::new(Mutex::new(BTreeMap::new()));
    let r = runs.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let r = r.clone();
        async move {
            r.lock()
                .expect("lock")
                .entry(t.args.n)
                .or_default()
                .push(ctx.attempt());
            Ok(())
        }
    })
    .expect("register");
    (mux, runs)
}

#[tokio::test]
async fn idle_server_reports_no_running_task() {
    let b = broker().await;
    let cfg = fast_config();
    let beat = cfg.heartbeat_interval;
    let t0 = now_ms();
    let server = Server::new(b.clone(), Mux::new(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    // The record written at start comes before the dispatcher takes a slot to wait for work
    // with. Waiting for a heartbeat two periods later makes sure that slot is taken: the old
    // count (busy slots) then read 1, while handlers actually running stay at 0 at any moment.
    let settled = t0 + 2 * beat.as_millis() as i64;
    let id = server.id().to_string();
    eventually(Duration::from_secs(5), "a later heartbeat", || async {
        b.servers()
            .await
            .expect("servers")
            .iter()
            .any(|r| r.id == id && r.last_seen_ms >= settled)
    })
    .await;
    let record = b
        .servers()
        .await
        .expect("servers")
        .into_iter()
        .find(|r| r.id == id)
        .expect("record");
    assert_eq!(record.running, 0, "published record: {record:?}");
    assert_eq!(server.stats().running, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn janitor_trims_archive_and_retained_sets_to_their_caps_in_one_sweep() {
    const ARCHIVED: usize = 5_000;
    const NEWEST: usize = 100;
    const RETAINED: usize = 3_000;
    let b = broker().await;
    let queue = q("default");
    enqueue_jobs(&b, "default", 0, (ARCHIVED + RETAINED) as u32).await;
    let leases = fetch_all(&b, &queue, "filler", ARCHIVED + RETAINED).await;
    mark_started(&b, &queue, &leases).await;
    let (to_archive, to_retain) = leases.split_at(ARCHIVED);
    let (older, newest) = to_archive.split_at(ARCHIVED - NEWEST);
    let bury = |ls: &[Lease]| {
        let ids: Vec<LeaseId> = ls.iter().map(|l| l.id.clone()).collect();
        let b = b.clone();
        async move {
            for chunk in ids.chunks(500) {
                let calls = chunk.iter().map(|l| b.dead_letter(l, "filler", true));
                for r in futures::future::join_all(calls).await {
                    assert_eq!(r.expect("dead"), chronos_broker::DeadOutcome::Archived);
                }
            }
        }
    };
    bury(older).await;
    // The archive is ordered by dead-letter time (Redis' clock, in ms): a pause makes the last
    // hundred strictly the newest, so the hundred kept are known exactly.
    tokio::time::sleep(Duration::from_millis(20)).await;
    bury(newest).await;
    let done: Vec<Completion> = to_retain
        .iter()
        .map(|l| Completion {
            lease: l.id.clone(),
            retention: Some(Duration::from_millis(1)),
            result: None,
        })
        .collect();
    for chunk in done.chunks(500) {
        assert_eq!(
            b.complete(&queue, chunk).await.expect("complete"),
            chunk.len() as u64
        );
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(
        (before.archived, before.completed),
        (ARCHIVED as u64, RETAINED as u64)
    );

    // One sweep only: the janitor runs at start, and its next run is an hour away.
    let cfg = ServerConfig {
        archive_max: NEWEST as u64,
        janitor_interval: Duration::from_secs(3600),
        ..fast_config()
    };
    let server = Server::new(b.clone(), Mux::new(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(
        Duration::from_secs(30),
        "archive and retained set trimmed to their caps",
        || async {
            let s = b.queue_stats(&queue).await.expect("stats");
            s.archived == NEWEST as u64 && s.completed == 0
        },
    )
    .await;
    let kept: HashSet<String> = b
        .list_tasks(&queue, TaskState::Archived, 0, 2 * NEWEST)
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.id)
        .collect();
    let want: HashSet<String> = newest.iter().map(|l| l.id.task_id.clone()).collect();
    assert_eq!(kept, want, "the newest {NEWEST} archived tasks are kept");
    server.shutdown().await;
}

#[tokio::test]
async fn undecodable_task_under_retry_policy_uses_the_records_max_retry() {
    let b = broker().await;
    let queue = q("default");
    b.ensure_queue(&queue).await.expect("queue");
    let keys = b.keyspace().queue(&queue);
    // A task whose entry carries garbage as its envelope; its record is sound and allows two
    // retries (the envelope, which would say so too, cannot be read).
    let id = "undecodable";
    let mid: String = b
        .client()
        .xadd(
            keys.stream(),
            false,
            None,
            "*",
            vec![("i", id.as_bytes()), ("e", [1u8, 0xc1, 0xff].as_slice())],
        )
        .await
        .expect("xadd");
    let _: i64 = b
        .client()
        .hset(
            keys.task(id),
            vec![
                ("r", "0"),
                ("x", "2"),
                ("s", "pending"),
                ("m", mid.as_str()),
            ],
        )
        .await
        .expect("hset");

    let mut cfg = fast_config();
    cfg.unrunnable = UnrunnablePolicy::Retry;
    cfg.retry_delay = Arc::new(|_, _| Duration::ZERO);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = attempts.clone();
    cfg.on_error = Some(Arc::new(move |f: &chronos_worker::TaskFailure| {
        seen.lock().expect("lock").push(f.attempt);
    }));
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), Mux::new(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "dead letter", || async {
        !dead.lock().expect("lock").is_empty()
    })
    .await;
    // Nothing is left to run it again: let any wrong extra attempt show up before asserting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        attempts.lock().expect("lock").clone(),
        vec![1, 2, 3],
        "first attempt plus the record's two retries"
    );
    assert_eq!(dead.lock().expect("lock").len(), 1, "dead-lettered once");
    assert_eq!(server.stats().failed, 3);
    let rec = b.task(&queue, id).await.expect("task").expect("kept");
    assert_eq!(rec.state, TaskState::Archived);
    let r: Option<String> = b.client().hget(keys.task(id), "r").await.expect("hget");
    assert_eq!(r.as_deref(), Some("3"));
    server.shutdown().await;
}

#[tokio::test]
async fn corrupt_task_record_fails_alone() {
    let b = broker().await;
    let queue = q("default");
    let ids = enqueue_jobs(&b, "default", 1, 4).await;
    let bad = ids[1].clone();
    let keys = b.keyspace().queue(&queue);
    let _: i64 = b
        .client()
        .hset(keys.task(&bad), vec![("r", "x")])
        .await
        .expect("hset");
    let (mux, runs) = recording_mux();
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    // The corrupt counter lives in the record only: the task's entry and envelope are sound, so
    // it runs like the others (a worker reads the attempt count from the entry), and nothing
    // else of its batch waits for it.
    eventually(Duration::from_secs(10), "every task ran", || async {
        runs.lock().expect("lock").len() == 3
    })
    .await;
    eventually(Duration::from_secs(5), "acks written", || async {
        b.queue_stats(&queue).await.expect("stats").processed == 3
    })
    .await;
    assert_eq!(
        runs.lock().expect("lock").clone(),
        BTreeMap::from([(1, vec![1]), (2, vec![1]), (3, vec![1])]),
        "each task ran once, on its first attempt, from the same fetch"
    );
    assert!(dead.lock().expect("lock").is_empty());
    let s = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((s.pending, s.active, s.archived), (0, 0, 0), "{s:?}");
    server.shutdown().await;
}

/// Fast loops with recovery after half a second of silence.
fn quick_recovery() -> ServerConfig {
    ServerConfig {
        recover_min_idle: Duration::from_millis(500),
        recover_interval: Duration::from_millis(100),
        heartbeat_interval: Duration::from_millis(150),
        ..fast_config()
    }
}

#[tokio::test]
async fn prefetched_but_unstarted_tasks_of_a_crashed_worker_spend_no_attempt() {
    const N: u32 = 5;
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    for n in 0..N {
        client
            .enqueue(&Job { n, sleep_ms: 0 }, EnqueueOptions::new().max_retry(0))
            .await
            .expect("enqueue");
    }
    // A worker fetched the batch into its buffer and died before starting any of it.
    let taken = fetch_all(&b, &queue, "crashed", N as usize).await;
    assert_eq!(taken.len(), N as usize);

    let (mux, runs) = recording_mux();
    let mut cfg = quick_recovery();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "every task ran", || async {
        runs.lock().expect("lock").len() == N as usize
    })
    .await;
    eventually(Duration::from_secs(5), "acks written", || async {
        b.queue_stats(&queue).await.expect("stats").processed == u64::from(N)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let runs = runs.lock().expect("lock").clone();
    assert!(
        runs.values().all(|a| *a == [1]),
        "each ran exactly once, as its first attempt: {runs:?}"
    );
    assert!(dead.lock().expect("lock").is_empty());
    let s = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((s.archived, s.failed, s.pending, s.active), (0, 0, 0, 0));
    server.shutdown().await;
}

#[tokio::test]
async fn many_live_deliveries_do_not_hide_a_crashed_workers_task() {
    const LIVE: usize = 5_000;
    const CRASHED: u32 = 1_000_000;
    let b = broker().await;
    let queue = q("default");
    // A live consumer holds 5,000 long-running deliveries and keeps heartbeating them.
    enqueue_jobs(&b, "default", 0, LIVE as u32).await;
    let live = fetch_all(&b, &queue, "alive", LIVE).await;
    mark_started(&b, &queue, &live).await;
    let live_ids: Vec<String> = live.iter().map(|l| l.id.msg_id.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let refresher = {
        let (b, queue, stop) = (b.clone(), queue.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let owned = b
                    .keep_alive(&queue, "alive", &live_ids, &[])
                    .await
                    .expect("extend");
                assert_eq!(owned.len(), live_ids.len(), "a live lease was taken");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    // Behind them in the pending list, a started delivery whose worker crashed.
    enqueue_jobs(&b, "default", CRASHED, CRASHED + 1).await;
    let crashed = fetch_all(&b, &queue, "crashed", 1).await;
    mark_started(&b, &queue, &crashed).await;

    let (mux, runs) = recording_mux();
    // Min idle 2 s against a 50 ms refresh: a loaded machine that stalls the refresher for a
    // moment does not let a live lease go idle, so only the crashed delivery qualifies.
    let config = ServerConfig {
        recover_min_idle: Duration::from_secs(2),
        ..quick_recovery()
    };
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    // Passes every 100 ms: a few passes after it went idle, it runs again.
    eventually(
        Duration::from_secs(30),
        "the crashed worker's task ran again",
        || async { !runs.lock().expect("lock").is_empty() },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    refresher.await.expect("refresher");
    assert_eq!(
        runs.lock().expect("lock").clone(),
        BTreeMap::from([(CRASHED, vec![2])]),
        "only the crashed delivery was reclaimed, on its second attempt"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn lost_dead_letter_reply_still_calls_the_hook() {
    let redis = RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = TcpProxy::start(target).await.expect("proxy");
    let via = broker_at(&proxy.url()).await;
    let queue = q("default");
    let dead_sha = via
        .script_shas()
        .into_iter()
        .find(|(name, _)| *name == "dead")
        .map(|(_, sha)| sha)
        .expect("dead script");

    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Job>| async {
        Err::<(), _>(TaskError::skip_retry("invalid address"))
    })
    .expect("register");
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(via.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    // The dead-letter call runs in Redis, its reply is lost and the connection cut; the client
    // re-sends it after reconnecting.
    proxy.drop_reply_to(&dead_sha);
    let info = Client::new(via.clone())
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    tokio::time::timeout(Duration::from_secs(10), proxy.wait_dropped(1))
        .await
        .expect("the dead-letter reply was dropped");
    eventually(
        Duration::from_secs(15),
        "dead-letter hook called",
        || async { !dead.lock().expect("lock").is_empty() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = dead.lock().expect("lock").clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].task_id, info.id);
    assert!(!events[0].discarded);
    assert_eq!(proxy.dropped_replies(), 1);
    let rec = via
        .task(&queue, &info.id)
        .await
        .expect("task")
        .expect("kept");
    assert_eq!(rec.state, TaskState::Archived);
    let s = via.queue_stats(&queue).await.expect("stats");
    assert_eq!((s.archived, s.failed), (1, 1), "{s:?}");
    assert_eq!(server.stats().dead, 1);
    server.shutdown().await;
}

/// A server of 100 queues passes over one queue per recovery period while every server lives:
/// the last queue's turn comes 20 s after its start. A server that stops heartbeating makes it
/// pass over every queue until that server's deliveries are idle long enough to take, so they
/// are re-run within seconds, not at the turn.
#[tokio::test]
async fn a_server_that_stops_heartbeating_is_recovered_at_once_on_every_queue() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let names: Vec<String> = (0..100).map(|i| format!("many{i}")).collect();
    let last = q("many99");
    client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().queue("many99"),
        )
        .await
        .expect("enqueue");
    // The lost server: it publishes a record and takes the task before the server starts,
    // keeps both fresh for a while, then stops heartbeating.
    let ghost = chronos_broker::ServerRecord {
        id: "ghost".into(),
        host: "gone".into(),
        pid: 1,
        queues: vec![("many99".into(), 1)],
        concurrency: 1,
        started_at_ms: now_ms(),
        running: 1,
        last_seen_ms: now_ms(),
        tasks: Vec::new(),
        archive_max: None,
    };
    let beat = Duration::from_millis(400);
    b.publish_server(&ghost, beat).await.expect("publish");
    let mut reader = b.open_reader().await.expect("reader");
    b.ensure_queue(&last).await.expect("queue");
    let f = b
        .fetch(&mut reader, &last, "ghost", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(f.leases.len(), 1, "the ghost holds the task");
    let held = vec![f.leases[0].id.msg_id.clone()];

    let ran = Arc::new(AtomicBool::new(false));
    let seen = ran.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, _t: Task<Job>| {
        let seen = seen.clone();
        async move {
            seen.store(true, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    let cfg = ServerConfig {
        recover_min_idle: Duration::from_secs(1),
        ..fast_config()
    }
    .queues(names.iter().map(|n| (n.clone(), 1)));
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    // The ghost heartbeats past the server's first passes over every queue.
    for _ in 0..15 {
        b.publish_server(&ghost, beat).await.expect("publish");
        b.keep_alive(&last, "ghost", &held, &[])
            .await
            .expect("keep");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!ran.load(Ordering::SeqCst), "the ghost's task is held");
    let stopped = std::time::Instant::now();
    eventually(
        Duration::from_secs(8),
        "the ghost's task re-run",
        || async { ran.load(Ordering::SeqCst) },
    )
    .await;
    // Its turn would come 20 s after the start; the lost server is noticed within its
    // record's TTL, and its delivery taken once idle for recover_min_idle.
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "re-run {:?} after the ghost stopped",
        stopped.elapsed()
    );
    server.shutdown().await;
}
