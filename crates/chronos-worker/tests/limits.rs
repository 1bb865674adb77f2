//! Cluster-wide limits of a queue ([`QueueLimit`]) against a real Redis: a per-key rate holds
//! one key back while another runs, and a concurrency limit holds across servers.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronos_broker::{Client, EnqueueOptions, Inspect};
use chronos_worker::{Context, Mux, QueueLimit, Server, ServerConfig, Task};
use common::{broker, eventually, fast_config, q, Job};

/// (rate key, attempt, when) of every handler call.
type Starts = Arc<Mutex<Vec<(String, u32, Instant)>>>;

#[tokio::test]
async fn a_full_rate_key_waits_without_attempts_while_another_key_runs() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let starts: Starts = Arc::new(Mutex::new(Vec::new()));
    let s = starts.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let s = s.clone();
        async move {
            let key = ctx.rate_key().unwrap_or("").to_string();
            s.lock()
                .expect("lock")
                .push((key, ctx.attempt(), Instant::now()));
            Ok(())
        }
    })
    .expect("register");
    // Key `busy` gets 6 tasks, key `calm` 2, and the limit is 2 starts per second per key:
    // `busy` needs three windows, `calm` one.
    let mut jobs = Vec::new();
    for n in 0..6 {
        jobs.push((Job { n, sleep_ms: 0 }, "busy"));
    }
    for n in 6..8 {
        jobs.push((Job { n, sleep_ms: 0 }, "calm"));
    }
    let batch = jobs
        .iter()
        .map(|(j, k)| (j, EnqueueOptions::new().queue("keyed").rate_key(*k)));
    assert!(client
        .enqueue_batch(batch)
        .await
        .expect("enqueue")
        .iter()
        .all(|r| r.is_ok()));
    let cfg = fast_config().queues([("keyed", 1)]).limit(
        "keyed",
        QueueLimit::new().per_key_rate(2, Duration::from_secs(1)),
    );
    let began = Instant::now();
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "all 8 tasks ran", || async {
        starts.lock().expect("lock").len() >= 8
    })
    .await;
    server.shutdown().await;

    let starts = starts.lock().expect("lock").clone();
    assert_eq!(starts.len(), 8, "each task ran once: {starts:?}");
    assert!(
        starts.iter().all(|(_, attempt, _)| *attempt == 1),
        "deferral spends no attempt: {starts:?}"
    );
    let last = |key: &str| {
        starts
            .iter()
            .filter(|(k, _, _)| k == key)
            .map(|(_, _, t)| t.duration_since(began))
            .max()
            .expect("some")
    };
    let (calm, busy) = (last("calm"), last("busy"));
    assert!(
        calm < Duration::from_millis(900),
        "the calm key is not held back: {calm:?}"
    );
    // Six starts at two per aligned second cross at least two window boundaries.
    assert!(
        busy > Duration::from_secs(1),
        "the busy key was held back: {busy:?}"
    );
    assert!(calm < busy);
    let stats = b.queue_stats(&q("keyed")).await.expect("stats");
    assert_eq!((stats.scheduled, stats.retry, stats.archived), (0, 0, 0));
}

#[tokio::test]
async fn concurrency_limit_holds_across_two_servers() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let active = Arc::new(AtomicU32::new(0));
    let max = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let by_server: Arc<Mutex<HashMap<u8, u32>>> = Arc::default();
    let mux = |server: u8| {
        let (active, max, done, by_server) =
            (active.clone(), max.clone(), done.clone(), by_server.clone());
        let mut mux = Mux::new();
        mux.handle(move |_ctx: Context, t: Task<Job>| {
            let (active, max, done, by_server) =
                (active.clone(), max.clone(), done.clone(), by_server.clone());
            async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                *by_server.lock().expect("lock").entry(server).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
                active.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .expect("register");
        mux
    };
    let jobs: Vec<Job> = (0..30).map(|n| Job { n, sleep_ms: 60 }).collect();
    let opts = EnqueueOptions::new().queue("narrow");
    assert!(client
        .enqueue_batch(jobs.iter().map(|j| (j, opts.clone())))
        .await
        .expect("enqueue")
        .iter()
        .all(|r| r.is_ok()));
    // Each server alone could run 8 at once; the queue allows 3 across both.
    let cfg = || {
        ServerConfig {
            concurrency: 8,
            ..fast_config()
        }
        .queues([("narrow", 1)])
        .limit("narrow", QueueLimit::new().concurrency(3))
    };
    let one = Server::new(b.clone(), mux(1), cfg())
        .expect("server")
        .start()
        .await
        .expect("start");
    let two = Server::new(b.clone(), mux(2), cfg())
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(20), "30 tasks done", || async {
        done.load(Ordering::SeqCst) >= 30
    })
    .await;
    one.shutdown().await;
    two.shutdown().await;
    let max = max.load(Ordering::SeqCst);
    assert!(max <= 3, "at most 3 ran at once, saw {max}");
    assert_eq!(
        max, 3,
        "the limit, not something else, bounded the parallelism"
    );
    let by_server = by_server.lock().expect("lock").clone();
    assert_eq!(by_server.len(), 2, "both servers ran tasks: {by_server:?}");
    // Every permit was given back: a new grant gets all three.
    let stats = b.queue_stats(&q("narrow")).await.expect("stats");
    assert_eq!(stats.pending + stats.active, 0);
}

#[tokio::test]
async fn a_limit_on_a_queue_the_server_does_not_serve_is_refused() {
    let b = broker().await;
    let cfg = fast_config().limit(
        "elsewhere",
        QueueLimit::new().rate(5, Duration::from_secs(1)),
    );
    let err = Server::new(b, Mux::new(), cfg).expect_err("refused");
    assert!(err.to_string().contains("elsewhere"), "{err}");
    let zero = fast_config().limit("default", QueueLimit::new().concurrency(0));
    assert!(Server::new(broker().await, Mux::new(), zero).is_err());
}

#[tokio::test]
async fn a_queue_waiting_for_its_rate_does_not_hold_up_other_queues() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = ran.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let r = r.clone();
        async move {
            r.lock().expect("lock").push(ctx.queue().to_string());
            Ok(())
        }
    })
    .expect("register");
    for (queue, n) in [("slow", 20), ("free", 200)] {
        let jobs: Vec<Job> = (0..n).map(|n| Job { n, sleep_ms: 0 }).collect();
        let opts = EnqueueOptions::new().queue(queue);
        client
            .enqueue_batch(jobs.iter().map(|j| (j, opts.clone())))
            .await
            .expect("enqueue");
    }
    let cfg = ServerConfig {
        concurrency: 2,
        ..fast_config()
    }
    .queues([("slow", 1), ("free", 1)])
    .limit("slow", QueueLimit::new().rate(2, Duration::from_secs(1)));
    let began = Instant::now();
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(
        Duration::from_secs(10),
        "the free queue drained",
        || async {
            ran.lock()
                .expect("lock")
                .iter()
                .filter(|q| *q == "free")
                .count()
                >= 200
        },
    )
    .await;
    let took = began.elapsed();
    server.shutdown().await;
    let slow = ran
        .lock()
        .expect("lock")
        .iter()
        .filter(|q| *q == "slow")
        .count();
    // At 2 per second the slow queue started a handful meanwhile, and the free queue did not
    // wait for it.
    assert!(
        took < Duration::from_secs(3),
        "the free queue took {took:?}"
    );
    assert!(
        (1..=2 + 2 * took.as_secs() as usize + 1).contains(&slow),
        "slow ran {slow} in {took:?}"
    );
}

#[tokio::test]
async fn a_deferred_task_gives_its_queue_start_back() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let starts: Starts = Arc::new(Mutex::new(Vec::new()));
    let s = starts.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let s = s.clone();
        async move {
            let key = ctx.rate_key().unwrap_or("").to_string();
            s.lock()
                .expect("lock")
                .push((key, ctx.attempt(), Instant::now()));
            Ok(())
        }
    })
    .expect("register");
    // Eight tasks of one key ahead of four tasks of four other keys, in stream order.
    let mut jobs = Vec::new();
    for n in 0..8 {
        jobs.push((Job { n, sleep_ms: 0 }, "same".to_string()));
    }
    for n in 0..4 {
        jobs.push((Job { n, sleep_ms: 0 }, format!("other-{n}")));
    }
    for (job, key) in &jobs {
        client
            .enqueue(
                job,
                EnqueueOptions::new().queue("mixed").rate_key(key.as_str()),
            )
            .await
            .expect("enqueue");
    }
    // 4 starts per second (one every 250 ms), 1 per second per key.
    let cfg = fast_config().queues([("mixed", 1)]).limit(
        "mixed",
        QueueLimit::new()
            .rate(4, Duration::from_secs(1))
            .per_key_rate(1, Duration::from_secs(1)),
    );
    let began = Instant::now();
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "the other keys ran", || async {
        starts
            .lock()
            .expect("lock")
            .iter()
            .filter(|(k, _, _)| k.starts_with("other"))
            .count()
            >= 4
    })
    .await;
    let took = began.elapsed();
    server.shutdown().await;
    // Five starts at 250 ms spacing: done in about a second. Had the seven deferred tasks of
    // `same` spent a queue start each, the others would have waited almost two seconds more.
    assert!(
        took < Duration::from_millis(1600),
        "the other keys took {took:?}"
    );
}

#[tokio::test]
async fn a_long_task_keeps_its_concurrency_permit_past_the_token_ttl() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // (n, started, ended) of each run.
    let runs: Arc<Mutex<Vec<(u32, Instant, Instant)>>> = Arc::default();
    let r = runs.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, t: Task<Job>| {
        let r = r.clone();
        async move {
            let began = Instant::now();
            tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
            r.lock()
                .expect("lock")
                .push((t.args.n, began, Instant::now()));
            Ok(())
        }
    })
    .expect("register");
    let opts = EnqueueOptions::new().queue("long");
    // Longer than the permit's TTL (recover_min_idle, 3 s in fast_config): only the heartbeat
    // keeps it.
    client
        .enqueue(
            &Job {
                n: 0,
                sleep_ms: 3_600,
            },
            opts.clone(),
        )
        .await
        .expect("enqueue");
    let cfg = fast_config()
        .queues([("long", 1)])
        .limit("long", QueueLimit::new().concurrency(1));
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "the long task started", || async {
        b.queue_stats(&q("long"))
            .await
            .is_ok_and(|s| s.pending == 0)
    })
    .await;
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, opts)
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "both ran", || async {
        runs.lock().expect("lock").len() >= 2
    })
    .await;
    server.shutdown().await;
    let runs = runs.lock().expect("lock").clone();
    let long_end = runs.iter().find(|r| r.0 == 0).map(|r| r.2).expect("long");
    let short_start = runs.iter().find(|r| r.0 == 1).map(|r| r.1).expect("short");
    assert!(
        short_start >= long_end,
        "the second task started {:?} before the long one ended",
        long_end - short_start
    );
}
