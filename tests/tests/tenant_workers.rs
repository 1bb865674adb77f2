//! Tenants across worker processes: one tenant's concurrency cap holds across three servers,
//! and the slot a SIGKILLed worker held comes back through the recoverer.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chronos::fred::interfaces::{KeysInterface, SortedSetsInterface};
use chronos::prelude::*;
use chronos::{QueueName, TenantChange, Tenants};
use chronos_tests::{most_live_key, runs_key, Work};

fn spawn_worker(url: &str, ns: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_chronos-test-worker"))
        .env("CHRONOS_REDIS_URL", url)
        .env("CHRONOS_NS", ns)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn worker")
}

async fn setup() -> (String, String, RedisBroker) {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    (url, ns, broker)
}

#[tokio::test]
async fn a_tenants_cap_holds_across_three_worker_processes() {
    let (url, ns, broker) = setup().await;
    let queue = QueueName::new("default").expect("queue");
    broker
        .change_tenant_settings(&queue, Some("a"), &TenantChange::new().concurrency(Some(2)))
        .await
        .expect("cap");
    let client = Client::new(broker.clone());
    for _ in 0..12 {
        client
            .enqueue(&Work { sleep_ms: 300 }, EnqueueOptions::new().tenant("a"))
            .await
            .expect("enqueue");
    }
    // Three servers of ten slots each: without the cap they would run all twelve at once.
    let mut workers: Vec<Child> = (0..3).map(|_| spawn_worker(&url, &ns)).collect();
    chronos_testkit::eventually(Duration::from_secs(60), "every task completed", || async {
        broker
            .queue_stats(&queue)
            .await
            .map(|s| s.processed == 12)
            .unwrap_or(false)
    })
    .await;
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let most: Option<f64> = broker
        .client()
        .zscore(most_live_key(&ns), "most")
        .await
        .expect("zscore");
    assert_eq!(
        most,
        Some(2.0),
        "the most tasks of tenant a running at once"
    );
}

#[tokio::test]
async fn the_slot_a_killed_worker_held_comes_back() {
    let (url, ns, broker) = setup().await;
    let redis = broker.client().clone();
    let queue = QueueName::new("default").expect("queue");
    broker
        .change_tenant_settings(&queue, Some("a"), &TenantChange::new().concurrency(Some(1)))
        .await
        .expect("cap");
    let client = Client::new(broker.clone());
    let first = client
        .enqueue(
            &Work { sleep_ms: 30_000 },
            EnqueueOptions::new().tenant("a"),
        )
        .await
        .expect("enqueue");
    for _ in 0..3 {
        client
            .enqueue(&Work { sleep_ms: 0 }, EnqueueOptions::new().tenant("a"))
            .await
            .expect("enqueue");
    }
    let mut child = spawn_worker(&url, &ns);
    let key = runs_key(&ns, &first.id);
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "the worker process started the long task",
        || async { redis.get::<Option<i64>, _>(&key).await.ok().flatten() == Some(1) },
    )
    .await;
    // It holds tenant a's only slot; SIGKILL: no shutdown, no settle.
    child.kill().expect("kill");
    child.wait().expect("reap");
    let page = broker.tenants(&queue, 10).await.expect("tenants");
    assert_eq!((page.waiting, page.running), (3, 1), "{page:?}");

    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _task: Task<Work>| async move { Ok(()) })
        .expect("register");
    let config = ServerConfig {
        heartbeat_interval: Duration::from_millis(200),
        recover_min_idle: Duration::from_secs(1),
        recover_interval: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    chronos_testkit::eventually(
        Duration::from_secs(20),
        "all four tasks completed, one slot at a time",
        || async {
            broker
                .queue_stats(&queue)
                .await
                .map(|s| s.processed == 4)
                .unwrap_or(false)
        },
    )
    .await;
    server.shutdown().await;
    let page = broker.tenants(&queue, 10).await.expect("tenants");
    assert_eq!(
        (page.total, page.waiting, page.running),
        (1, 0, 0),
        "{page:?}"
    );
}
