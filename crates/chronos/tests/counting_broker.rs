//! The `counting_broker` example, run as a test: a `Server` over the wrapper (which implements
//! only the capabilities a server needs) completes tasks against a real Redis, the counters move,
//! and an injected ack failure is retried without losing the task. And the methods with a
//! default body are forwarded, not defaulted: an operator's cancel reaches the handler through
//! the wrapper, and the server calls each of them on it.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/counting_broker.rs"]
mod counting_broker;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::{ActionOutcome, Operate, QueueName, TaskAction, TaskState};
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
    broker.fail_next("settle");
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
        broker.calls("settle") >= 2,
        "the injected ack failure was retried: {} settle calls",
        broker.calls("settle")
    );
    let stats = inner.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.retry), (0, 0, 0));
}

#[derive(Serialize, Deserialize)]
struct Slow;

impl TaskArgs for Slow {
    const KIND: &'static str = "slow";
}

#[tokio::test]
async fn operator_cancel_reaches_the_handler_through_the_wrapper_and_every_default_method_is_forwarded(
) {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let inner = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let broker = Counting::new(inner.clone());
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let cancelled = Arc::new(AtomicBool::new(false));
    let seen = cancelled.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _: Task<Slow>| {
        let (started, seen) = (started_tx.clone(), seen.clone());
        async move {
            let _ = started.send(ctx.task_id().to_string());
            tokio::select! {
                _ = ctx.cancelled() => {
                    seen.store(true, Ordering::SeqCst);
                    Err(TaskError::skip_retry("cancelled by an operator"))
                }
                _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(()),
            }
        }
    })
    .expect("register slow");
    // Held long enough for a heartbeat to keep its concurrency permit.
    mux.handle(|_: Context, _: Task<Job>| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    })
    .expect("register job");
    // "default" is unlimited (the shared blocking read: watch, interrupter); "limited" takes
    // the Throttle methods (permits, their heartbeat, per-key admission).
    let config = ServerConfig::default()
        .queues([("default", 1), ("limited", 1)])
        .limit(
            "limited",
            QueueLimit::new()
                .concurrency(4)
                .per_key_rate(100, Duration::from_secs(1)),
        )
        .sample_queues(Duration::from_millis(200))
        .heartbeat_interval(Duration::from_millis(100))
        .forward_interval(Duration::from_millis(50))
        .recover_interval(Duration::from_millis(200));
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(broker.clone());
    let default = QueueName::new("default").expect("queue");
    let limited = QueueName::new("limited").expect("queue");

    let info = client
        .enqueue(&Slow, EnqueueOptions::new())
        .await
        .expect("enqueue slow");
    let running = tokio::time::timeout(Duration::from_secs(10), started_rx.recv())
        .await
        .expect("the slow task starts")
        .expect("handler alive");
    assert_eq!(running, info.id);
    // The operator's side: a separate program on the same Redis, as `chronos task cancel`. The
    // worker marks a delivery started as its handler starts, without waiting for the reply, so
    // for a moment the task can still read as pending (refused): ask again until it is active.
    chronos_testkit::eventually(Duration::from_secs(5), "cancel accepted", || async {
        let outcome = inner
            .act(&default, &info.id, TaskAction::Cancel)
            .await
            .expect("cancel");
        match outcome {
            ActionOutcome::Done => true,
            ActionOutcome::Refused(Some(TaskState::Pending)) => false,
            other => panic!("cancel answered {other:?}"),
        }
    })
    .await;
    chronos_testkit::eventually(Duration::from_secs(5), "handler cancelled", || async {
        cancelled.load(Ordering::SeqCst)
    })
    .await;
    chronos_testkit::eventually(Duration::from_secs(5), "dead-lettered", || async {
        let task = inner.task(&default, &info.id).await.expect("task");
        task.is_some_and(|t| t.state == TaskState::Archived)
    })
    .await;

    client
        .enqueue(
            &Job(1),
            EnqueueOptions::new().queue("limited").rate_key("k"),
        )
        .await
        .expect("enqueue limited");
    // A delayed task: the forwarder moves it when due.
    client
        .enqueue(
            &Job(2),
            EnqueueOptions::new().process_in(Duration::from_millis(300)),
        )
        .await
        .expect("enqueue delayed");
    chronos_testkit::eventually(Duration::from_secs(10), "both jobs done", || async {
        let l = inner.queue_stats(&limited).await.expect("stats").processed;
        let d = inner.queue_stats(&default).await.expect("stats").processed;
        l == 1 && d == 1
    })
    .await;
    server.shutdown().await;

    let counts = broker.counts();
    for method in [
        // Consume
        "watch",
        "interrupter",
        // Maintain
        "signals",
        "forward_due_next",
        "cancel_requested",
        "reclaimed_dead",
        // SampleQueues
        "sampler_lease",
        "sample_queue",
        "release_sampler_lease",
        // Throttle
        "acquire_permits",
        "return_permits",
        "keep_permits",
        "admit",
    ] {
        assert!(
            broker.calls(method) >= 1,
            "{method} was never called through the wrapper: {counts:?}"
        );
    }
}
