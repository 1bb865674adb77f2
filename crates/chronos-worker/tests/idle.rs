//! What an idle server costs and how it still reacts at once: one shared blocking read for all
//! its idle queues, due-time wake-ups pushed to the forwarder, pause changes pushed to the
//! server. Each test sets the safety interval long, so only the push can explain a prompt
//! reaction.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronos_broker::fred::interfaces::ClientLike as _;
use chronos_broker::{Client, EnqueueOptions, Inspect, RedisBroker};
use chronos_worker::{Context, Mux, Server, ServerConfig, Task};
use common::{broker, broker_at, eventually, fast_config, q, Job};

type Log = Arc<Mutex<Vec<(String, u32)>>>;

fn recording_mux() -> (Mux, Log) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let l = l.clone();
        async move {
            l.lock()
                .expect("lock")
                .push((ctx.queue().to_string(), t.args.n));
            if t.args.sleep_ms > 0 {
                tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
            }
            Ok(())
        }
    })
    .expect("register");
    (mux, log)
}

/// Long enough that no test here can pass by the safety poll.
fn pushed_config() -> ServerConfig {
    ServerConfig {
        safety_interval: Duration::from_secs(120),
        ..fast_config()
    }
}

fn ran(log: &Log) -> usize {
    log.lock().expect("lock").len()
}

#[tokio::test]
async fn delayed_task_is_forwarded_on_push_while_the_forwarder_sleeps() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // Far in the future: once the first pass sees it, the forwarder sleeps until the safety
    // interval.
    client
        .enqueue(
            &Job { n: 0, sleep_ms: 0 },
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        )
        .await
        .expect("far");
    let (mux, log) = recording_mux();
    let server = Server::new(b.clone(), mux, pushed_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = Instant::now();
    client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().process_in(Duration::from_millis(300)),
        )
        .await
        .expect("near");
    eventually(Duration::from_secs(5), "the near task ran", || async {
        ran(&log) == 1
    })
    .await;
    assert!(
        sent.elapsed() >= Duration::from_millis(250),
        "ran before it was due"
    );
    assert_eq!(log.lock().expect("lock")[0].1, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn pause_takes_effect_by_push_without_the_poll() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let server = Server::new(b.clone(), mux, pushed_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.set_paused(&q("default"), true).await.expect("pause");
    tokio::time::sleep(Duration::from_millis(500)).await;
    for n in 0..5 {
        client
            .enqueue(&Job { n, sleep_ms: 0 }, EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(ran(&log), 0, "tasks ran while paused");
    b.set_paused(&q("default"), false).await.expect("resume");
    eventually(Duration::from_secs(3), "resumed by push", || async {
        ran(&log) == 5
    })
    .await;
    server.shutdown().await;
}

/// Calls per command since the server started, from INFO commandstats.
async fn commandstats(b: &RedisBroker) -> HashMap<String, u64> {
    let text: String = b
        .client()
        .info(Some(chronos_broker::fred::types::InfoKind::CommandStats))
        .await
        .expect("info");
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

#[tokio::test]
async fn many_idle_queues_share_one_blocking_read_and_are_served_at_once() {
    // An own Redis, so that the counts are this server's alone.
    let redis = chronos_testkit::RedisServer::start().expect("own redis");
    let b = broker_at(&redis.url()).await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let names: Vec<String> = (0..20).map(|i| format!("q{i}")).collect();
    let cfg = pushed_config().queues(names.iter().map(|n| (n.clone(), 1)));
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let before = commandstats(&b).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = commandstats(&b).await;
    let delta = |c: &str| after.get(c).unwrap_or(&0) - before.get(c).unwrap_or(&0);
    // One blocking read per queue would be 20 a second, plus a claim each time it ends.
    assert!(
        delta("xreadgroup") <= 3,
        "{} XREADGROUP in 3 s",
        delta("xreadgroup")
    );
    // Every queue is still served at once, in any order.
    for (i, name) in names.iter().enumerate().rev() {
        let sent = Instant::now();
        client
            .enqueue(
                &Job {
                    n: i as u32,
                    sleep_ms: 0,
                },
                EnqueueOptions::new().queue(name.as_str()),
            )
            .await
            .expect("enqueue");
        eventually(Duration::from_secs(2), "served", || async {
            ran(&log) == names.len() - i
        })
        .await;
        assert!(sent.elapsed() < Duration::from_secs(2));
        assert_eq!(log.lock().expect("lock").last().expect("ran").0, *name);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn idle_server_shuts_down_without_waiting_for_its_shared_read() {
    let b = broker().await;
    let (mux, _log) = recording_mux();
    let cfg = pushed_config().queues([("a", 1), ("b", 1), ("c", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let t = Instant::now();
    server.shutdown().await;
    // The shared read blocks for up to 5 s; only the interrupt ends it sooner.
    assert!(
        t.elapsed() < Duration::from_millis(2_500),
        "shutdown took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn strict_priority_holds_when_tasks_arrive_at_idle_queues() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        strict_priority: true,
        concurrency: 1,
        ..pushed_config()
    }
    .queues([("urgent", 3), ("normal", 2), ("bulk", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A long task holds the only slot while the others arrive, so each is chosen by priority.
    client
        .enqueue(
            &Job {
                n: 99,
                sleep_ms: 800,
            },
            EnqueueOptions::new().queue("bulk"),
        )
        .await
        .expect("blocker");
    eventually(Duration::from_secs(2), "blocker started", || async {
        ran(&log) == 1
    })
    .await;
    for (queue, n) in [("bulk", 3), ("normal", 2), ("urgent", 1)] {
        client
            .enqueue(&Job { n, sleep_ms: 0 }, EnqueueOptions::new().queue(queue))
            .await
            .expect("enqueue");
    }
    eventually(Duration::from_secs(5), "all ran", || async {
        ran(&log) == 4
    })
    .await;
    let order: Vec<String> = log
        .lock()
        .expect("lock")
        .iter()
        .skip(1)
        .map(|(q, _)| q.clone())
        .collect();
    assert_eq!(order, ["urgent", "normal", "bulk"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_queue_that_runs_dry_again_is_watched_again_at_once() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let cfg = pushed_config().queues([("a", 1), ("b", 1), ("c", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // After each task "a" runs dry and parks while the shared read already waits on "b" and
    // "c" for up to 5 s: that read must be cut and renewed with "a", or the next task of "a"
    // waits for it to end.
    for n in 0..3 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sent = Instant::now();
        client
            .enqueue(&Job { n, sleep_ms: 0 }, EnqueueOptions::new().queue("a"))
            .await
            .expect("enqueue");
        eventually(Duration::from_secs(6), "served", || async {
            ran(&log) == n as usize + 1
        })
        .await;
        assert!(
            sent.elapsed() < Duration::from_millis(1_500),
            "task {n} waited {:?}",
            sent.elapsed()
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn pushes_arrive_again_after_the_subscriber_reconnects() {
    use chronos_broker::fred::interfaces::ClientInterface as _;
    use chronos_broker::fred::types::client::{ClientKillFilter, ClientKillType};
    // An own Redis: killing every pub/sub connection must not disturb other tests.
    let redis = chronos_testkit::RedisServer::start().expect("own redis");
    let b = broker_at(&redis.url()).await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let server = Server::new(b.clone(), mux, pushed_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed: i64 = b
        .client()
        .client_kill(vec![ClientKillFilter::Type(ClientKillType::Pubsub)])
        .await
        .expect("kill the subscriber");
    assert!(killed >= 1, "no subscriber connection to kill");
    // The subscriber reconnects and subscribes again; a push after that wakes the forwarder
    // that sleeps until the safety interval.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().process_in(Duration::from_millis(200)),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(4), "forwarded by push", || async {
        ran(&log) == 1
    })
    .await;
    // Pause changes too.
    b.set_paused(&q("default"), true).await.expect("pause");
    tokio::time::sleep(Duration::from_millis(500)).await;
    client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(ran(&log), 1, "ran while paused");
    b.set_paused(&q("default"), false).await.expect("resume");
    eventually(Duration::from_secs(3), "resumed", || async {
        ran(&log) == 2
    })
    .await;
    server.shutdown().await;
}
