//! The API outside code leans on: `?` on common error types, what middleware sees in the
//! context, config builders and errors, the async dead-letter hook, and the inspector's view of
//! tasks and the scheduler leader.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use chronos_broker::{
    fred::prelude::*, Client, Connect, EnqueueOptions, Inspect, Schedules, TaskState,
    SCHEDULE_HEADER, TRIGGER_HEADER,
};
use chronos_worker::{
    Context, DeadLetterEvent, Middleware, Mux, Next, Server, ServerConfig, Task, TaskError,
    UnrunnablePolicy, WorkerError,
};
use common::{broker, eventually, fast_config, q, Job};

// ---- `?` into TaskError -------------------------------------------------------------------

fn fails_with_anyhow() -> Result<(), TaskError> {
    let root = std::io::Error::other("disk full");
    Err(anyhow::Error::new(root).context("writing the report"))?;
    Ok(())
}

fn fails_with_box() -> Result<(), TaskError> {
    let e: Box<dyn std::error::Error + Send + Sync> = "upstream said no".into();
    Err(e)?;
    Ok(())
}

#[test]
fn question_mark_converts_anyhow_and_boxed_errors_keeping_the_chain() {
    let e = fails_with_anyhow().expect_err("fails");
    assert_eq!(e.message(), "writing the report: disk full");
    assert_eq!(e.kind(), chronos_worker::FailureKind::Retry);
    let e = fails_with_box().expect_err("fails");
    assert_eq!(e.message(), "upstream said no");
    // Plain std errors and string messages convert as well.
    let e: TaskError = std::io::Error::other("io").into();
    assert_eq!(e.message(), "io");
    let e: TaskError = String::from("just a message").into();
    assert_eq!(e.message(), "just a message");
}

#[tokio::test]
async fn handler_using_question_mark_on_anyhow_and_boxed_errors_records_their_messages() {
    let b = broker().await;
    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, task: Task<Job>| async move {
        if task.args.n == 1 {
            let parsed: Result<u32, anyhow::Error> =
                Err(anyhow::anyhow!("bad digit")).map_err(|e| e.context("parsing the amount"));
            parsed?;
        } else {
            let call: Result<(), Box<dyn std::error::Error + Send + Sync>> =
                Err("payment gateway refused".into());
            call?;
        }
        Ok(())
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let opts = || EnqueueOptions::new().max_retry(0);
    let a = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, opts())
        .await
        .expect("enqueue");
    let bx = client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, opts())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "both dead-lettered", || async {
        server.stats().dead == 2
    })
    .await;
    for (id, want) in [
        (&a.id, "parsing the amount: bad digit"),
        (&bx.id, "payment gateway refused"),
    ] {
        let rec = b
            .task(&q("default"), id)
            .await
            .expect("task")
            .expect("archived");
        assert_eq!(rec.state, TaskState::Archived);
        assert_eq!(
            rec.envelope.expect("decodes").last_error.as_deref(),
            Some(want)
        );
    }
    server.shutdown().await;
}

// ---- Context: headers, schedule id, trigger time ----------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    trace: Option<String>,
    schedule: Option<String>,
    trigger: Option<SystemTime>,
    headers: BTreeMap<String, String>,
}

/// Records what a middleware (which never sees the typed task) can read from the context.
struct Recorder(Arc<Mutex<Vec<Seen>>>);

#[async_trait]
impl Middleware for Recorder {
    async fn call(&self, ctx: Context, next: Next<'_>) -> Result<(), TaskError> {
        self.0.lock().expect("lock").push(Seen {
            trace: ctx.header("traceparent").map(str::to_string),
            schedule: ctx.schedule_id().map(str::to_string),
            trigger: ctx.trigger_time(),
            headers: ctx.headers().clone(),
        });
        next.run(ctx).await
    }
}

#[tokio::test]
async fn middleware_sees_headers_schedule_id_and_typed_trigger_time() {
    let b = broker().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    mux.middleware(Recorder(seen.clone()));
    mux.handle(|_c: Context, _t: Task<Job>| async { Ok(()) })
        .expect("register");
    let server = Server::new(b.clone(), mux, fast_config().concurrency(1))
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let scheduled = EnqueueOptions::new()
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .header(SCHEDULE_HEADER, "nightly-report")
        .header(TRIGGER_HEADER, "1700000000123");
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, scheduled)
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "first task", || async {
        server.stats().succeeded == 1
    })
    .await;
    // Malformed trigger headers give None, never a panic, and the task still runs.
    for bad in ["soon", "", "1.5", "99999999999999999999999", "0x10"] {
        client
            .enqueue(
                &Job { n: 2, sleep_ms: 0 },
                EnqueueOptions::new().header(TRIGGER_HEADER, bad),
            )
            .await
            .expect("enqueue");
    }
    client
        .enqueue(&Job { n: 3, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "all tasks", || async {
        server.stats().succeeded == 7
    })
    .await;
    server.shutdown().await;

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 7);
    let first = &seen[0];
    assert_eq!(
        first.trace.as_deref(),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    assert_eq!(first.schedule.as_deref(), Some("nightly-report"));
    assert_eq!(
        first.trigger,
        Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
    );
    assert_eq!(first.headers.len(), 3);
    for s in &seen[1..6] {
        assert_eq!(s.trigger, None, "malformed {:?}", s.headers);
        assert_eq!(s.schedule, None);
    }
    let plain = &seen[6];
    assert_eq!(
        (&plain.trace, &plain.schedule, plain.trigger),
        (&None, &None, None)
    );
    assert!(plain.headers.is_empty());
}

// ---- ServerConfig ----------------------------------------------------------------------------

#[tokio::test]
async fn bad_queue_name_in_config_is_invalid_config_naming_queue_and_reason() {
    let b = broker().await;
    let config = ServerConfig::default().queues([("ok", 1), ("has space", 1)]);
    match Server::new(b, Mux::new(), config) {
        Err(WorkerError::InvalidConfig(msg)) => {
            assert!(msg.contains("\"has space\""), "names the queue: {msg}");
            assert!(msg.contains("whitespace"), "gives the reason: {msg}");
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn config_has_a_builder_method_for_every_field() {
    let c = ServerConfig::default()
        .queues([("a", 2), ("b", 1)])
        .strict_priority(true)
        .concurrency(3)
        .shutdown_timeout(Duration::from_secs(1))
        .recover_min_idle(Duration::from_secs(9))
        .recover_interval(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_secs(3))
        .forward_interval(Duration::from_millis(40))
        .janitor_interval(Duration::from_secs(4))
        .archive_retention(Duration::from_secs(5))
        .archive_max(6)
        .retry_delay(|n, _| Duration::from_secs(u64::from(n)))
        .unrunnable(UnrunnablePolicy::Retry)
        .on_dead_letter(|_e: DeadLetterEvent| async {})
        .dead_letter_hook_timeout(Duration::from_millis(70))
        .on_error(|_f| {});
    assert_eq!(c.queues, vec![("a".to_string(), 2), ("b".to_string(), 1)]);
    assert!(c.strict_priority);
    assert_eq!(c.concurrency, 3);
    assert_eq!(c.shutdown_timeout, Duration::from_secs(1));
    assert_eq!(c.recover_min_idle, Duration::from_secs(9));
    assert_eq!(c.recover_interval, Duration::from_secs(2));
    assert_eq!(c.heartbeat_interval, Duration::from_secs(3));
    assert_eq!(c.forward_interval, Duration::from_millis(40));
    assert_eq!(c.janitor_interval, Duration::from_secs(4));
    assert_eq!(c.archive_retention, Duration::from_secs(5));
    assert_eq!(c.archive_max, 6);
    assert_eq!(
        (c.retry_delay)(7, &TaskError::retry("x")),
        Duration::from_secs(7)
    );
    assert_eq!(c.unrunnable, UnrunnablePolicy::Retry);
    assert!(c.on_dead_letter.is_some());
    assert_eq!(c.dead_letter_hook_timeout, Duration::from_millis(70));
    assert!(c.on_error.is_some());
    c.validate().expect("valid");
    assert!(matches!(
        ServerConfig::default()
            .dead_letter_hook_timeout(Duration::ZERO)
            .validate(),
        Err(WorkerError::InvalidConfig(_))
    ));
}

// ---- async dead-letter hook ------------------------------------------------------------------

#[tokio::test]
async fn dead_letter_hook_is_awaited() {
    let b = broker().await;
    let mut mux = Mux::new();
    mux.handle(|_c: Context, _t: Task<Job>| async { Err::<(), _>(TaskError::skip_retry("no")) })
        .expect("register");
    let done = Arc::new(Mutex::new(Vec::new()));
    let sink = done.clone();
    let config = fast_config().on_dead_letter(move |e: DeadLetterEvent| {
        let sink = sink.clone();
        async move {
            // Real async work before the hook records: only an awaited hook gets here.
            tokio::time::sleep(Duration::from_millis(50)).await;
            sink.lock().expect("lock").push(e.task_id);
        }
    });
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let info = Client::new(b.clone())
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "hook finished", || async {
        !done.lock().expect("lock").is_empty()
    })
    .await;
    assert_eq!(*done.lock().expect("lock"), vec![info.id]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_dead_letter_hook_that_never_finishes_is_cut_off_and_stalls_nothing() {
    let b = broker().await;
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    let mut mux = Mux::new();
    mux.handle(move |_c: Context, t: Task<Job>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            if t.args.n == 1 {
                Err(TaskError::skip_retry("dies"))
            } else {
                Ok(())
            }
        }
    })
    .expect("register");
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    // One slot: while the hook of task 1 holds it, task 2 cannot start. Only the hook's
    // timeout frees the slot.
    let config = fast_config()
        .concurrency(1)
        .dead_letter_hook_timeout(Duration::from_millis(300))
        .on_dead_letter(move |_e| {
            c.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>()
        });
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "hook called", || async {
        calls.load(Ordering::SeqCst) == 1
    })
    .await;
    client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "second task ran", || async {
        server.stats().succeeded == 1
    })
    .await;
    let started = std::time::Instant::now();
    server.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown prompt"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

// ---- Inspector --------------------------------------------------------------------------------

#[tokio::test]
async fn task_record_carries_the_id_even_when_the_envelope_does_not_decode() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        )
        .await
        .expect("enqueue");
    let good = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!(good.id, info.id);
    assert!(good.envelope.is_ok());
    // A scheduled task's envelope is the hash's `e`: corrupt it.
    let key = b.keyspace().queue(&q("default")).task(&info.id);
    let _: i64 = b
        .client()
        .hset(key, ("e", vec![0xffu8, 0x00, 0x13]))
        .await
        .expect("hset");
    let listed = b
        .list_tasks(&q("default"), TaskState::Scheduled, 0, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, info.id);
    assert!(listed[0].envelope.is_err());
}

#[tokio::test]
async fn pending_and_active_records_read_the_envelope_from_the_stream_entry() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(&Job { n: 4, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!(rec.state, TaskState::Pending);
    assert_eq!(rec.id, info.id);
    assert_eq!(rec.envelope.expect("decodes").id, info.id);
    let listed = b
        .list_tasks(&q("default"), TaskState::Pending, 0, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, info.id);
    assert!(listed[0].envelope.is_ok());
}

#[tokio::test]
async fn inspect_reports_the_scheduler_leader() {
    let b = broker().await;
    assert_eq!(b.scheduler_leader().await.expect("leader"), None);
    let epoch = b
        .acquire_leadership("token-1", "instance-a", Duration::from_secs(30), 0)
        .await
        .expect("acquire")
        .expect("free lock");
    let leader = b
        .scheduler_leader()
        .await
        .expect("leader")
        .expect("someone leads");
    assert_eq!(leader.id, "instance-a");
    assert_eq!(leader.epoch, epoch);
    assert_eq!(Some(leader), Schedules::leader(&b).await.expect("leader"));
}

// ---- Producer side ----------------------------------------------------------------------------

#[tokio::test]
async fn process_at_and_deadline_take_system_time_and_offset_date_time() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let at = SystemTime::now() + Duration::from_secs(600);
    let at_ms = i64::try_from(
        at.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits");
    let from_system = client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new()
                .process_at(at)
                .deadline(at + Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    assert_eq!(from_system.state, TaskState::Scheduled);
    assert_eq!(from_system.run_at_ms, at_ms);
    let odt = time::OffsetDateTime::from(at);
    let from_odt = client
        .enqueue(
            &Job { n: 2, sleep_ms: 0 },
            EnqueueOptions::new().process_at(odt).deadline(odt),
        )
        .await
        .expect("enqueue");
    assert_eq!(from_odt.run_at_ms, at_ms);
    let rec = b
        .task(&q("default"), &from_system.id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!(
        rec.envelope.expect("decodes").deadline_ms,
        Some(at_ms + 60_000)
    );
}

#[tokio::test]
async fn client_close_quits_the_connection() {
    let b = common::broker().await;
    let client = Client::new(b.clone());
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue before close");
    assert!(b.client().is_connected());
    client.close().await;
    assert!(!b.client().is_connected(), "the shared connection was quit");
}

// ---- Forwarding impls ---------------------------------------------------------------------------

/// Compiles only if every capability (all of `Broker`, which includes `Schedules` and
/// `Coordinate`) forwards through `&T`, `Arc<T>` and `Box<T>`, and a server takes each.
#[test]
fn every_capability_forwards_through_references_arcs_and_boxes() {
    fn broker<B: chronos_broker::Broker>() {}
    fn server_broker<B: chronos_worker::WorkerBroker>() {}
    broker::<&'static chronos_broker::RedisBroker>();
    broker::<Arc<chronos_broker::RedisBroker>>();
    broker::<Box<chronos_broker::RedisBroker>>();
    broker::<Arc<Box<chronos_broker::RedisBroker>>>();
    server_broker::<&'static chronos_broker::RedisBroker>();
    server_broker::<Arc<chronos_broker::RedisBroker>>();
    server_broker::<Box<chronos_broker::RedisBroker>>();
}

#[tokio::test]
async fn server_and_client_take_shared_and_borrowed_brokers() {
    let b = broker().await;
    let shared = Arc::new(b.clone());
    let mut mux = Mux::new();
    mux.handle(|_c: Context, _t: Task<Job>| async { Ok(()) })
        .expect("register");
    let server = Server::new(shared.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    // A client over a borrowed broker, and one over a boxed one.
    Client::new(&b)
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    Client::new(Box::new(b.clone()))
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    // Acks follow the handlers' ends (batched, or carried by the next read): wait for them.
    eventually(Duration::from_secs(5), "both acked", || async {
        server.stats().succeeded == 2
            && shared
                .queue_stats(&q("default"))
                .await
                .expect("stats")
                .processed
                == 2
    })
    .await;
    server.shutdown().await;
}
