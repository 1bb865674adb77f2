//! The `counting_broker` example, run as a test: a `Server` over the wrapper (which implements
//! only the capabilities a server needs) completes tasks against a real Redis, the counters move,
//! and an injected ack failure is retried without losing the task.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/counting_broker.rs"]
mod counting_broker;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::QueueName;
use counting_broker::Counting;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Job(u32);

impl TaskArgs for Job {
    const KIND: &'static str = "job";
}

#[tokio::test]
async fn server_over_a_counting_wrapper_completes_tasks_and_survives_an_injected_ack_fault() {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let inner = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let broker = Counting::new(inner.clone());
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let mut mux = Mux::new();
    mux.handle(move |_: Context, _: Task<Job>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    let config = ServerConfig::default()
        .heartbeat_interval(Duration::from_millis(100))
        .forward_interval(Duration::from_millis(50));
    // Shared through an Arc: the forwarding impls make `Arc<Counting<_>>` a broker too.
    let server = Server::new(Arc::new(broker.clone()), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    broker.fail_next("complete");
    let client = Client::new(broker.clone());
    for n in 0..5 {
        client
            .enqueue(&Job(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let queue = QueueName::new("default").expect("queue");
    chronos_testkit::eventually(Duration::from_secs(10), "all acked", || async {
        inner.queue_stats(&queue).await.expect("stats").processed == 5
    })
    .await;
    server.shutdown().await;

    assert_eq!(runs.load(Ordering::SeqCst), 5, "each task ran once");
    assert_eq!(broker.calls("enqueue"), 5);
    assert!(broker.calls("fetch") >= 1);
    assert!(broker.calls("paused_queues") >= 1);
    assert!(broker.calls("publish_server") >= 1);
    assert!(
        broker.calls("complete") >= 2,
        "the injected ack failure was retried: {} complete calls",
        broker.calls("complete")
    );
    let stats = inner.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.retry), (0, 0, 0));
}
