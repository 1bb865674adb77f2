//! The edges of a delivery's life in a worker, against a real Redis: a delete or archive refused
//! while the task waits in the buffer, a start mark answered `Lost` or not answered at all, an ack
//! that fails for a while, a shared read over more queues than free slots, an entry that lost
//! its envelope, and a rate key that cannot name a key.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::fred::prelude::*;
use chronos_broker::{
    ActionOutcome, Chain, Client, Enqueue, EnqueueOptions, Inspect, NewTask, Operate, QueueName,
    RedisBroker, TaskAction, TaskArgs, TaskState,
};
use chronos_worker::{
    Context, Mux, QueueLimit, Server, ServerConfig, ServerHandle, Task, WorkerBroker,
};
use common::faulty::Faulty;
use common::{broker, eventually, fast_config, q, Job};

/// Handler of [`Job`]: job 1 blocks until `gate` opens; every job counts its runs in `runs[n]`
/// when it ends, unless it was cut off before.
fn gated_mux(gate: Arc<AtomicBool>, runs: Arc<[AtomicU32; 8]>) -> Mux {
    let mut mux = Mux::new();
    mux.handle(move |_: Context, t: Task<Job>| {
        let (gate, runs) = (gate.clone(), runs.clone());
        async move {
            if t.args.n == 1 {
                while !gate.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
            runs[t.args.n as usize].fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    mux
}

/// Builds and starts a server on `broker`.
async fn serve<B: WorkerBroker>(broker: B, mux: Mux, config: ServerConfig) -> ServerHandle {
    Server::new(broker, mux, config)
        .expect("server")
        .start()
        .await
        .expect("start")
}

/// Longer than the worker's confirm threshold (50 ms), with room for a loaded machine.
const BUFFERED: Duration = Duration::from_millis(300);

fn counters() -> Arc<[AtomicU32; 8]> {
    Arc::new(std::array::from_fn(|_| AtomicU32::new(0)))
}

/// Entries of `queue` in the group's pending list (fetched by a worker and not settled).
async fn pending(b: &RedisBroker, queue: &QueueName) -> i64 {
    let stream = b.keyspace().queue(queue).stream();
    let summary: Vec<Value> = b
        .client()
        .xpending(stream, "workers", ())
        .await
        .expect("xpending");
    summary.first().and_then(|v| v.as_i64()).unwrap_or(0)
}

async fn state(b: &RedisBroker, queue: &QueueName, id: &str) -> Option<TaskState> {
    b.task(queue, id).await.expect("task").map(|r| r.state)
}

/// Applies `action` to a task while it waits in a worker's buffer behind a busy slot, lets the
/// slot free up, and returns what the action answered, whether the task ran and the state it
/// was left in.
async fn act_on_a_buffered_task(action: TaskAction) -> (ActionOutcome, u32, Option<TaskState>) {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let (gate, runs) = (Arc::new(AtomicBool::new(false)), counters());
    let config = ServerConfig {
        concurrency: 1,
        ..fast_config()
    };
    // Both wait before the server starts: the fetcher takes the blocker for the one slot, then
    // the next one for its buffer, where it waits behind the busy slot.
    let blocker = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let victim = client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let server = serve(b.clone(), gated_mux(gate.clone(), runs.clone()), config).await;
    eventually(Duration::from_secs(5), "blocker active", || async {
        state(&b, &queue, &blocker.id).await == Some(TaskState::Active)
    })
    .await;
    eventually(Duration::from_secs(5), "victim fetched", || async {
        pending(&b, &queue).await == 2
    })
    .await;
    // The fetch's reply reaches the buffer a moment after Redis counts the delivery; from then
    // on the task waits there, behind the busy slot.
    tokio::time::sleep(BUFFERED).await;
    let answer = b.act(&queue, &victim.id, action).await.expect("action");
    gate.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(5), "blocker done", || async {
        runs[1].load(Ordering::SeqCst) == 1 && pending(&b, &queue).await == 0
    })
    .await;
    // Long enough for the victim to have started had it been run.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let left = state(&b, &queue, &victim.id).await;
    server.shutdown().await;
    (answer, runs[2].load(Ordering::SeqCst), left)
}

/// From Redis a buffered delivery looks exactly like one whose handler ran to the end within
/// the start mark's delay and whose ack is on its way (fetched, in the pending list, not
/// marked): it is active for the operator, so a delete or an archive is refused, and the task
/// runs once, as fetched.
#[tokio::test]
async fn a_task_buffered_by_a_worker_is_refused_by_delete_and_runs_once() {
    let (answer, ran, left) = act_on_a_buffered_task(TaskAction::Delete).await;
    assert_eq!(answer, ActionOutcome::Refused(Some(TaskState::Active)));
    assert_eq!(ran, 1);
    assert_eq!(left, None, "completed, without a retention");
}

#[tokio::test]
async fn a_task_buffered_by_a_worker_is_refused_by_archive_and_runs_once() {
    let (answer, ran, left) = act_on_a_buffered_task(TaskAction::Archive).await;
    assert_eq!(answer, ActionOutcome::Refused(Some(TaskState::Active)));
    assert_eq!(ran, 1);
    assert_eq!(left, None, "completed, not dead-lettered");
}

#[tokio::test]
async fn a_start_answered_lost_cancels_the_running_handler() {
    let b = broker().await;
    let faulty = Faulty::new(b.clone());
    // The mark reaches Redis long after the handler started: the queue is deleted (forced) in
    // between. An operator's delete of the task alone is refused: a worker holds it.
    faulty.switches.start_delay_ms.store(500, Ordering::SeqCst);
    let client = Client::new(b.clone());
    let queue = q("default");
    let (gate, runs) = (Arc::new(AtomicBool::new(true)), counters());
    let config = ServerConfig {
        // The heartbeat would also find the delivery gone, on its next beat: keep it out of
        // the way, so only the start's answer can stop the handler here.
        heartbeat_interval: Duration::from_secs(10),
        recover_min_idle: Duration::from_secs(30),
        ..fast_config()
    };
    let server = serve(faulty.clone(), gated_mux(gate, runs.clone()), config).await;
    let task = client
        .enqueue(
            &Job {
                n: 3,
                sleep_ms: 2_000,
            },
            EnqueueOptions::new(),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "fetched", || async {
        pending(&b, &queue).await == 1
    })
    .await;
    assert_eq!(state(&b, &queue, &task.id).await, Some(TaskState::Active));
    assert_eq!(
        b.act(&queue, &task.id, TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::Refused(Some(TaskState::Active))
    );
    b.delete_queue(&queue, true).await.expect("forced delete");
    // The handler would end 2 s after it began; the Lost answer (at ~0.5 s) must end it first.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        runs[3].load(Ordering::SeqCst),
        0,
        "the handler of a deleted task ran to its end"
    );
    assert_eq!(state(&b, &queue, &task.id).await, None);
    server.shutdown().await;
}

#[tokio::test]
async fn a_start_mark_that_failed_is_sent_again() {
    let b = broker().await;
    let faulty = Faulty::new(b.clone());
    faulty.switches.start_failures.store(2, Ordering::SeqCst);
    let client = Client::new(b.clone());
    let queue = q("default");
    let (gate, runs) = (Arc::new(AtomicBool::new(false)), counters());
    let server = serve(
        faulty.clone(),
        gated_mux(gate.clone(), runs.clone()),
        fast_config(),
    )
    .await;
    let task = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    // Two marks fail; the third lands while the handler still runs. (The task lists as active
    // from its fetch on: a worker holds it.)
    eventually(Duration::from_secs(5), "a re-sent mark landed", || async {
        faulty.switches.starts.load(Ordering::SeqCst) >= 1
    })
    .await;
    assert_eq!(state(&b, &queue, &task.id).await, Some(TaskState::Active));
    assert_eq!(faulty.switches.start_failures.load(Ordering::SeqCst), 0);
    gate.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(5), "ran once", || async {
        runs[1].load(Ordering::SeqCst) == 1 && pending(&b, &queue).await == 0
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_succeeded_task_whose_ack_fails_for_a_while_is_not_dead_lettered() {
    let b = broker().await;
    let faulty = Faulty::new(b.clone());
    let client = Client::new(b.clone());
    let queue = q("default");
    let runs = counters();
    let config = ServerConfig {
        // Acks fail for longer than this: without the lease held until the ack lands, the
        // recoverer takes the succeeded delivery for a lost worker.
        recover_min_idle: Duration::from_secs(1),
        ..fast_config()
    };
    let server = serve(
        faulty.clone(),
        gated_mux(Arc::new(AtomicBool::new(true)), runs.clone()),
        config,
    )
    .await;
    faulty.switches.fail_acks.store(true, Ordering::SeqCst);
    let task = client
        .enqueue(
            &Job { n: 4, sleep_ms: 50 },
            // Its last attempt: one charged attempt archives it.
            EnqueueOptions::new()
                .max_retry(0)
                .retention(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "ran", || async {
        runs[4].load(Ordering::SeqCst) == 1
    })
    .await;
    // A failover's worth of failed acks, several recovery passes past the idle time.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert!(
        faulty.switches.acks.load(Ordering::SeqCst) >= 2,
        "acks were tried"
    );
    faulty.switches.fail_acks.store(false, Ordering::SeqCst);
    eventually(Duration::from_secs(5), "completed", || async {
        state(&b, &queue, &task.id).await == Some(TaskState::Completed)
    })
    .await;
    assert_eq!(
        runs[4].load(Ordering::SeqCst),
        1,
        "ran again after recovery"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_shared_read_leases_no_more_than_the_free_slots() {
    let b = broker().await;
    let names: Vec<String> = (0..8).map(|i| format!("idle{i}")).collect();
    let (gate, runs) = (Arc::new(AtomicBool::new(false)), counters());
    let config = ServerConfig {
        concurrency: 1,
        queues: names.iter().map(|n| (n.clone(), 1)).collect(),
        ..fast_config()
    };
    let server = serve(b.clone(), gated_mux(gate.clone(), runs.clone()), config).await;
    // Every queue parks on the shared read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // One blocked task per queue, all arriving in one transaction, so the read in flight
    // finds every stream non-empty at once.
    let mut tasks = Vec::new();
    for n in &names {
        let mut t = NewTask::build(
            Job::KIND,
            rmp_serde::to_vec(&Job { n: 1, sleep_ms: 0 }).expect("encode"),
            EnqueueOptions::new().queue(n.as_str()),
            chronos_broker::now_ms(),
        )
        .expect("task");
        t.envelope.queue = n.clone();
        tasks.push(t);
    }
    let tx = b.client().multi();
    for t in &tasks {
        let stream = b.keyspace().queue(&q(&t.envelope.queue)).stream();
        let _: () = tx
            .xadd(
                stream,
                false,
                None,
                "*",
                vec![("e", t.envelope.encode().expect("encode"))],
            )
            .await
            .expect("queue xadd");
    }
    let _: Vec<Value> = tx.exec(true).await.expect("exec");
    eventually(Duration::from_secs(5), "one task running", || async {
        server.stats().running == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut leased = 0;
    for n in &names {
        leased += pending(&b, &q(n)).await;
    }
    // One running, and at most one more that its queue's fetcher read for its buffer; not one
    // per queue from the shared read.
    assert!(leased <= 2, "{leased} deliveries leased with 1 slot");
    gate.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(10), "all ran", || async {
        runs[1].load(Ordering::SeqCst) == names.len() as u32
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_entry_that_lost_its_envelope_is_dead_lettered_with_the_reason() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    // A task with a record, then its entry rewritten without the envelope (by hand, as a tool
    // that does not know the layout might).
    let task = client
        .enqueue(
            &Job { n: 5, sleep_ms: 0 },
            EnqueueOptions::new().task_id("lost-envelope"),
        )
        .await
        .expect("enqueue");
    let keys = b.keyspace().queue(&queue);
    let entries: Vec<(String, Vec<(String, Value)>)> = b
        .client()
        .xrange(keys.stream(), "-", "+", None)
        .await
        .expect("xrange");
    let (old, _) = entries.first().expect("entry").clone();
    let _: i64 = b.client().xdel(keys.stream(), &old).await.expect("xdel");
    let mid: String = b
        .client()
        .xadd(
            keys.stream(),
            false,
            None,
            "*",
            vec![("i", task.id.as_str())],
        )
        .await
        .expect("xadd");
    let _: () = b
        .client()
        .hset(keys.task(&task.id), ("m", mid.as_str()))
        .await
        .expect("hset");
    let runs = counters();
    let server = serve(
        b.clone(),
        gated_mux(Arc::new(AtomicBool::new(true)), runs.clone()),
        fast_config(),
    )
    .await;
    eventually(Duration::from_secs(5), "archived", || async {
        state(&b, &queue, &task.id).await == Some(TaskState::Archived)
    })
    .await;
    let error: Option<String> = b
        .client()
        .hget(keys.task(&task.id), "err")
        .await
        .expect("hget");
    let error = error.unwrap_or_default();
    assert!(error.contains("no task envelope"), "reason: {error:?}");
    assert_eq!(runs[5].load(Ordering::SeqCst), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_rate_key_runs_its_task_unkeyed_and_fails_no_other() {
    let b = broker().await;
    let queue = q("keyed");
    let runs = counters();
    let config = ServerConfig {
        queues: vec![("keyed".into(), 1)],
        ..fast_config()
    }
    .limit(
        "keyed",
        QueueLimit::new().per_key_rate(1_000, Duration::from_secs(1)),
    );
    // Written as an older producer or a hand-made entry could: the key bypassed enqueue's check.
    let mut tasks = Vec::new();
    for (n, key) in [(6, "bad key\n"), (7, "customer-7")] {
        let mut t = NewTask::build(
            Job::KIND,
            rmp_serde::to_vec(&Job { n, sleep_ms: 0 }).expect("encode"),
            EnqueueOptions::new().queue("keyed").rate_key("placeholder"),
            chronos_broker::now_ms(),
        )
        .expect("task");
        t.envelope.rate_key = Some(key.into());
        tasks.push(t);
    }
    for r in b.enqueue(tasks).await.expect("enqueue") {
        r.expect("enqueued");
    }
    let server = serve(
        b.clone(),
        gated_mux(Arc::new(AtomicBool::new(true)), runs.clone()),
        config,
    )
    .await;
    eventually(Duration::from_secs(5), "both ran", || async {
        runs[6].load(Ordering::SeqCst) == 1 && runs[7].load(Ordering::SeqCst) == 1
    })
    .await;
    eventually(Duration::from_secs(5), "settled", || async {
        pending(&b, &queue).await == 0
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_chain_step_with_a_bad_rate_key_is_refused_at_enqueue() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let chain = Chain::new()
        .then(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .then(
            &Job { n: 2, sleep_ms: 0 },
            EnqueueOptions::new().rate_key("bad key"),
        );
    let err = client
        .enqueue_chain(chain)
        .await
        .expect_err("a bad rate key is refused");
    assert!(err.to_string().contains("rate key"), "{err}");
    assert!(
        b.queues().await.expect("queues").is_empty(),
        "nothing written"
    );
}
