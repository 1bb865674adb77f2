//! Work that becomes runnable while every server sleeps in its blocking read must wake one:
//! tenant and LIFO tasks (which wait in the tenant sets, not on a stream a server reads), a
//! LIFO task's retry, tasks handed back from a server that died, and a queue whose
//! handler-signalled block an operator lifted. Each test sets the safety interval long, so only
//! a wake-up can explain a prompt start.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{Client, Consume, EnqueueOptions, Lease, QueueName, RedisBroker};
use chronos_worker::{Context, Mux, Server, ServerConfig, ServerHandle, Task, TaskError};
use common::{eventually, fast_config, q, Job};

/// (server label, task number) per start.
type Log = Arc<Mutex<Vec<(&'static str, u32)>>>;

/// Two brokers on one fresh namespace: two servers as two processes would have them.
async fn pair() -> (RedisBroker, RedisBroker) {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let ns = chronos_testkit::namespace();
    let connect = || async {
        RedisBroker::builder(url.clone())
            .namespace(ns.clone())
            .connect()
            .await
            .expect("connect")
    };
    (connect().await, connect().await)
}

fn config() -> ServerConfig {
    ServerConfig {
        safety_interval: Duration::from_secs(120),
        recover_min_idle: Duration::from_secs(1),
        ..fast_config()
    }
}

/// A server labelled `who` whose handler records each start and sleeps the task's time; task
/// number 1000 and up fail their first attempt.
async fn serve(
    b: &RedisBroker,
    who: &'static str,
    log: &Log,
    config: ServerConfig,
) -> ServerHandle {
    let log = log.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let log = log.clone();
        async move {
            log.lock().expect("lock").push((who, t.args.n));
            if t.args.n >= 1000 && ctx.attempt() == 1 {
                return Err(TaskError::retry("first attempt fails"));
            }
            tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
            Ok(())
        }
    })
    .expect("register");
    Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start")
}

fn started(log: &Log, n: u32) -> bool {
    log.lock().expect("lock").iter().any(|(_, m)| *m == n)
}

fn starts(log: &Log) -> usize {
    log.lock().expect("lock").len()
}

async fn enqueue(b: &RedisBroker, n: u32, sleep_ms: u64, opts: EnqueueOptions) {
    Client::new(b.clone())
        .enqueue(&Job { n, sleep_ms }, opts)
        .await
        .expect("enqueue");
}

#[tokio::test]
async fn a_tenant_burst_reaches_every_idle_server() {
    let (a, b) = pair().await;
    // The tenant streams exist before the servers start, so both read them from the start.
    enqueue(&a, 0, 0, EnqueueOptions::new().tenant("t")).await;
    let log = Log::default();
    let one = serve(&a, "one", &log, config()).await;
    let two = serve(&b, "two", &log, config()).await;
    eventually(Duration::from_secs(5), "the first task ran", || async {
        started(&log, 0)
    })
    .await;
    // Both park in their blocking reads.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Eight tasks of 3 s on 2 x 4 slots: one server alone cannot start them all.
    // In one call, so the rotation is never empty between them: each must still wake a
    // server, as each entry of a plain burst does.
    let jobs: Vec<Job> = (1..=8).map(|n| Job { n, sleep_ms: 3_000 }).collect();
    Client::new(a.clone())
        .enqueue_batch(jobs.iter().map(|j| (j, EnqueueOptions::new().tenant("t"))))
        .await
        .expect("enqueue");
    // A server whose slots are all busy may still take one task for its buffer (it starts
    // when a slot frees): at least seven start at once, on both servers.
    let sent = std::time::Instant::now();
    let both = || {
        let log = log.lock().expect("lock");
        let on = |who| log.iter().skip(1).filter(|(w, _)| *w == who).count();
        on("one") >= 1 && on("two") >= 1 && log.len() >= 8
    };
    while !both() && sent.elapsed() < Duration::from_millis(2_000) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        both(),
        "the burst started on both servers: {:?}",
        log.lock().expect("lock")
    );
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test]
async fn a_lifo_task_and_its_retry_wake_an_idle_server() {
    let (a, _) = pair().await;
    let log = Log::default();
    let config = ServerConfig {
        retry_delay: Arc::new(|_, _| Duration::from_millis(300)),
        ..config()
    };
    let server = serve(&a, "one", &log, config).await;
    enqueue(&a, 1, 0, EnqueueOptions::new().lifo()).await;
    eventually(
        Duration::from_secs(5),
        "the first LIFO task ran",
        || async { started(&log, 1) },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    enqueue(&a, 2, 0, EnqueueOptions::new().lifo()).await;
    eventually(
        Duration::from_secs(2),
        "a second LIFO task started",
        || async { started(&log, 2) },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Fails once; its retry, due 300 ms later, goes back to the front of the LIFO set.
    enqueue(&a, 1000, 0, EnqueueOptions::new().lifo()).await;
    eventually(Duration::from_secs(3), "the LIFO retry started", || async {
        log.lock()
            .expect("lock")
            .iter()
            .filter(|(_, n)| *n == 1000)
            .count()
            == 2
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn tenant_tasks_of_a_server_that_died_are_run_by_one_that_never_read_them() {
    let (a, b) = pair().await;
    let queue = q("default");
    // A server that will die holding them, blocked in its read before the other server is.
    let mut reader = a.open_reader().await.expect("reader");
    let ghost = {
        let a = a.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut held: Vec<Lease> = Vec::new();
            let first = a
                .fetch(&mut reader, &queue, "ghost", &[], 8, Duration::from_secs(5))
                .await
                .expect("blocking read");
            held.extend(first.leases);
            for _ in 0..20 {
                let f = a
                    .fetch(&mut reader, &queue, "ghost", &[], 8, Duration::ZERO)
                    .await
                    .expect("read");
                held.extend(f.leases);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let ids: Vec<_> = held.iter().map(|l| l.id.clone()).collect();
            a.start(&queue, &ids).await.expect("start");
            ids.len()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = Log::default();
    let server = serve(&b, "two", &log, config()).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // The first tenant task ever: the entry it leaves on the queue's stream wakes the ghost
    // alone, which takes what it can and then dies (it never settles).
    for n in 1..=6 {
        enqueue(&a, n, 0, EnqueueOptions::new().tenant("t")).await;
    }
    let held = ghost.await.expect("ghost");
    eventually(
        Duration::from_secs(10),
        "all six ran on the live server",
        || async { (1..=6).all(|n| started(&log, n)) },
    )
    .await;
    server.shutdown().await;
    eprintln!("the dead server held {held} of the six");
}

#[tokio::test]
async fn lifting_a_queue_wide_block_wakes_the_sleeping_fetcher() {
    let (a, _) = pair().await;
    let queue: QueueName = q("default");
    let log = Log::default();
    let l = log.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, t: Task<Job>| {
        let l = l.clone();
        async move {
            l.lock().expect("lock").push(("one", t.args.n));
            if t.args.n == 0 {
                return Err(TaskError::rate_limited(Duration::from_secs(600)).queue_wide());
            }
            Ok(())
        }
    })
    .expect("register");
    // Task 0 blocks the queue for ten minutes; 1 may be in the buffer already (fetched before
    // the block, it runs), 2 and 3 wait on the stream, so the fetcher's next read is answered
    // with the block and it sleeps until the block's end.
    let jobs: Vec<Job> = (0..4).map(|n| Job { n, sleep_ms: 0 }).collect();
    Client::new(a.clone())
        .enqueue_batch(jobs.iter().map(|j| (j, EnqueueOptions::new())))
        .await
        .expect("enqueue");
    let config = ServerConfig {
        concurrency: 1,
        ..config()
    };
    let server = Server::new(a.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "the queue is blocked", || async {
        a.queue_blocks(&queue, 10)
            .await
            .map(|b| b.queue_until_ms.is_some())
            .unwrap_or(false)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(!started(&log, 2) && !started(&log, 3), "ran while blocked");
    assert!(a.unblock(&queue, None).await.expect("unblock"));
    eventually(
        Duration::from_secs(3),
        "the waiting tasks started after the lift",
        || async { started(&log, 2) && started(&log, 3) },
    )
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn retries_of_no_delay_sent_together_are_forwarded_at_once() {
    let (a, _) = pair().await;
    let log = Log::default();
    let config = ServerConfig {
        concurrency: 8,
        retry_delay: Arc::new(|_, _| Duration::ZERO),
        ..config()
    };
    let server = serve(&a, "one", &log, config).await;
    // Each fails once: their retries land in the retry set while the forwarder moves the
    // earlier ones. One that lands between its listing and its move pushes no wake-up (an
    // earlier member is still there) and must not wait for the safety pass (two minutes).
    let jobs: Vec<Job> = (1000..1030).map(|n| Job { n, sleep_ms: 0 }).collect();
    Client::new(a.clone())
        .enqueue_batch(jobs.iter().map(|j| (j, EnqueueOptions::new())))
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "every retry ran", || async {
        starts(&log) == 60
    })
    .await;
    server.shutdown().await;
}
