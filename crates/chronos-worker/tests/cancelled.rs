//! `TaskError::cancel` against a real Redis: the task ends as cancelled with its reason, not
//! as a failure (no attempt, no error hook, no dead-letter hook), a producer waiting for it
//! hears why, a chain stops at it and a group counts it as not succeeded.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{
    BrokerError, Chain, ChainStatus, Client, EnqueueOptions, Group, Inspect, TaskArgs, TaskState,
};
use chronos_worker::{dead_letter_hook, Context, DeadLetterEvent, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Done;

impl TaskArgs for Done {
    const KIND: &'static str = "done";
}

fn job(n: u32) -> Job {
    Job { n, sleep_ms: 0 }
}

#[tokio::test]
async fn a_cancelling_handler_ends_its_task_as_cancelled_not_failed() {
    let b = broker().await;
    let mut mux = Mux::new();
    mux.handle(|_c: Context, t: Task<Job>| async move {
        Err::<(), _>(TaskError::cancel(format!("order {} withdrawn", t.args.n)))
    })
    .expect("register");
    let errors = Arc::new(AtomicU32::new(0));
    let dead = Arc::new(Mutex::new(Vec::<DeadLetterEvent>::new()));
    let (e, d) = (errors.clone(), dead.clone());
    let mut cfg = fast_config().on_error(move |_| {
        e.fetch_add(1, Ordering::SeqCst);
    });
    cfg.on_dead_letter = Some(dead_letter_hook(move |ev: DeadLetterEvent| {
        d.lock().expect("lock").push(ev);
        async {}
    }));
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    // max_retry 0: a cancel taken for a failure would dead-letter the task at once.
    let info = client
        .enqueue(&job(7), EnqueueOptions::new().max_retry(0))
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "cancelled", || async {
        server.stats().cancelled == 1
    })
    .await;
    let stats = server.stats();
    assert_eq!((stats.failed, stats.dead, stats.succeeded), (0, 0, 0));
    assert_eq!(errors.load(Ordering::SeqCst), 0, "no error hook");
    assert!(dead.lock().expect("lock").is_empty(), "no dead-letter hook");
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("kept");
    assert_eq!(rec.state, TaskState::Cancelled);
    assert_eq!(
        rec.cancelled.expect("reason").reason,
        "order 7 withdrawn".to_string()
    );
    let env = rec.envelope.expect("envelope");
    assert_eq!((env.retried, env.last_error), (0, None));
    let q_stats = b.queue_stats(&q("default")).await.expect("stats");
    assert_eq!((q_stats.cancelled, q_stats.archived), (1, 0));
    match client
        .wait::<()>("default", &info.id, Duration::from_secs(1))
        .await
        .expect_err("no result")
    {
        BrokerError::TaskCancelled { id, reason } => {
            assert_eq!(
                (id.as_str(), reason.as_str()),
                (info.id.as_str(), "order 7 withdrawn")
            );
        }
        other => panic!("expected TaskCancelled, got {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_chain_stops_at_a_cancelled_step_and_a_group_counts_it_as_not_succeeded() {
    let b = broker().await;
    let runs = Arc::new(AtomicU32::new(0));
    let callbacks = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    let r = runs.clone();
    mux.handle(move |_ctx: Context, task: Task<Job>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            if task.args.n == 2 {
                return Err(TaskError::cancel("nothing left to do"));
            }
            Ok(())
        }
    })
    .expect("register");
    let c = callbacks.clone();
    mux.handle(move |ctx: Context, _task: Task<Done>| {
        let c = c.clone();
        async move {
            c.lock()
                .expect("lock")
                .push(ctx.group().expect("a group callback"));
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(
        b.clone(),
        mux,
        fast_config().queues([("default", 1), ("members", 1), ("cb", 1)]),
    )
    .expect("server")
    .start()
    .await
    .expect("start");
    let client = Client::new(b.clone());
    let chain = client
        .enqueue_chain(
            Chain::new()
                .then(&job(1), EnqueueOptions::new())
                .then(&job(2), EnqueueOptions::new())
                .then(&job(3), EnqueueOptions::new()),
        )
        .await
        .expect("chain");
    eventually(Duration::from_secs(10), "the chain stops", || async {
        matches!(
            client.chain_status(&chain).await.expect("status"),
            ChainStatus::Failed { .. }
        )
    })
    .await;
    assert_eq!(
        client.chain_status(&chain).await.expect("status"),
        ChainStatus::Failed {
            step: 1,
            error: "cancelled: nothing left to do".into()
        }
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the third step never ran");

    let group = Group::new(&Done, EnqueueOptions::new().queue("cb"))
        .members((1..=3).map(|n| (job(n), EnqueueOptions::new().queue("members"))));
    client.enqueue_group(group).await.expect("group");
    eventually(Duration::from_secs(15), "the callback runs", || async {
        !callbacks.lock().expect("lock").is_empty()
    })
    .await;
    server.shutdown().await;
    let callbacks = callbacks.lock().expect("lock").clone();
    assert_eq!(callbacks.len(), 1, "the callback ran exactly once");
    let g = &callbacks[0];
    assert_eq!((g.total, g.succeeded, g.failed), (3, 2, 1));
}
