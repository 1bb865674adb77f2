//! Handler outcomes against a real Redis: success, retry, skip-retry, panic, timeout, deadline,
//! poison payloads and unknown kinds.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, Inspect, TaskState};
use chronos_worker::{
    dead_letter_hook, Context, DeadLetterEvent, Mux, Server, ServerConfig, Task, TaskError,
    UnrunnablePolicy, WorkerError,
};
use common::{broker, eventually, fast_config, q, Job};

/// A mux whose `Job` handler counts its calls and succeeds.
fn counting_mux() -> (Mux, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let mut mux = Mux::new();
    mux.handle(move |_c: Context, _t: Task<Job>| {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    (mux, calls)
}

fn dead_sink(cfg: &mut ServerConfig) -> Arc<Mutex<Vec<DeadLetterEvent>>> {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let sink = dead.clone();
    cfg.on_dead_letter = Some(dead_letter_hook(move |e: DeadLetterEvent| {
        sink.lock().expect("lock").push(e);
        async {}
    }));
    dead
}

#[tokio::test]
async fn success_acks_and_handler_gets_typed_args_and_context() {
    let b = broker().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    let s = seen.clone();
    mux.handle(move |ctx: Context, task: Task<Job>| {
        let s = s.clone();
        async move {
            s.lock().expect("lock").push((
                ctx.task_id().to_string(),
                ctx.queue().to_string(),
                ctx.attempt(),
                task.args.n,
            ));
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let info = client
        .enqueue(&Job { n: 7, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "task processed", || async {
        server.stats().succeeded == 1
    })
    .await;
    assert_eq!(
        seen.lock().expect("lock").clone(),
        vec![(info.id.clone(), "default".to_string(), 1, 7)]
    );
    eventually(Duration::from_secs(5), "ack written", || async {
        b.queue_stats(&q("default")).await.expect("stats").processed == 1
    })
    .await;
    assert!(b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn error_retries_until_max_retry_then_dead_letters_once() {
    let b = broker().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let a = attempts.clone();
    mux.handle(move |_ctx: Context, _t: Task<Job>| {
        let a = a.clone();
        async move {
            a.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(std::io::Error::other("smtp down").into())
        }
    })
    .expect("register");
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    let info = Client::new(b.clone())
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().max_retry(2),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "dead letter", || async {
        dead.lock().expect("lock").len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        3,
        "first attempt plus two retries"
    );
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("archived");
    assert_eq!(rec.state, TaskState::Archived);
    let env = rec.envelope.expect("decodes");
    assert_eq!(env.retried, 3);
    assert_eq!(env.last_error.as_deref(), Some("smtp down"));
    assert_eq!(dead.lock().expect("lock")[0].reason, "smtp down");
    server.shutdown().await;
}

#[tokio::test]
async fn skip_retry_dead_letters_at_once_and_discard_drops_the_task() {
    let b = broker().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let a = attempts.clone();
    mux.handle(move |_ctx: Context, _t: Task<Job>| {
        let a = a.clone();
        async move {
            a.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(TaskError::skip_retry("invalid address"))
        }
    })
    .expect("register");
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let kept = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let dropped = client
        .enqueue(
            &Job { n: 2, sleep_ms: 0 },
            EnqueueOptions::new().discard_on_dead_letter(),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "two dead letters", || async {
        dead.lock().expect("lock").len() == 2
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        b.task(&q("default"), &kept.id)
            .await
            .expect("task")
            .expect("kept")
            .state,
        TaskState::Archived
    );
    assert!(b
        .task(&q("default"), &dropped.id)
        .await
        .expect("task")
        .is_none());
    let events = dead.lock().expect("lock").clone();
    assert!(events
        .iter()
        .any(|e| e.task_id == dropped.id && e.discarded));
    assert!(events
        .iter()
        .any(|e| e.task_id == kept.id && !e.discarded && e.kind.as_deref() == Some("job")));
    server.shutdown().await;
}

#[tokio::test]
async fn panic_is_caught_and_retried() {
    let b = broker().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let a = attempts.clone();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let a = a.clone();
        async move {
            a.fetch_add(1, Ordering::SeqCst);
            if ctx.attempt() == 1 {
                panic!("boom");
            }
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    Client::new(b.clone())
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "retried after panic", || async {
        server.stats().succeeded == 1
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(server.stats().failed, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn timeout_cancels_the_attempt_and_counts_it() {
    let b = broker().await;
    let cancelled = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let c = cancelled.clone();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let c = c.clone();
        async move {
            assert!(ctx.deadline().is_some());
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)) => {}
                _ = ctx.cancelled() => { c.fetch_add(1, Ordering::SeqCst); }
            }
            Ok(())
        }
    })
    .expect("register");
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    let opts = EnqueueOptions::new()
        .timeout(Duration::from_millis(100))
        .max_retry(1);
    let info = Client::new(b.clone())
        .enqueue(
            &Job {
                n: 1,
                sleep_ms: 5_000,
            },
            opts,
        )
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(5),
        "dead after two timeouts",
        || async { dead.lock().expect("lock").len() == 1 },
    )
    .await;
    let env = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("archived")
        .envelope
        .expect("decodes");
    assert_eq!(env.retried, 2);
    assert!(env.last_error.expect("error").contains("timed out"));
    server.shutdown().await;
}

#[tokio::test]
async fn passed_deadline_dead_letters_without_running() {
    let b = broker().await;
    let (mux, ran) = counting_mux();
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let client = Client::new(b.clone());
    let past = time::OffsetDateTime::now_utc() - time::Duration::seconds(1);
    client
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().deadline(past),
        )
        .await
        .expect("enqueue");
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "dead letter", || async {
        dead.lock().expect("lock").len() == 1
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(dead.lock().expect("lock")[0].reason.contains("deadline"));
    server.shutdown().await;
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Unknown {
    x: u8,
}
impl chronos_broker::TaskArgs for Unknown {
    const KIND: &'static str = "nobody-handles-this";
}

#[derive(serde::Serialize, serde::Deserialize)]
struct WrongShape {
    n: String,
}
impl chronos_broker::TaskArgs for WrongShape {
    const KIND: &'static str = "job";
}

#[tokio::test]
async fn poison_payload_and_unknown_kind_are_dead_lettered_exactly_once() {
    let b = broker().await;
    let (mux, ok) = counting_mux();
    let mut cfg = fast_config();
    let dead = dead_sink(&mut cfg);
    let client = Client::new(b.clone());
    let poison = client
        .enqueue(
            &WrongShape {
                n: "not a number".into(),
            },
            EnqueueOptions::new(),
        )
        .await
        .expect("enqueue");
    let unknown = client
        .enqueue(&Unknown { x: 1 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "two dead letters", || async {
        dead.lock().expect("lock").len() == 2
    })
    .await;
    eventually(Duration::from_secs(5), "good task done", || async {
        ok.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = dead.lock().expect("lock").clone();
    assert_eq!(
        events.len(),
        2,
        "each poison task dead-lettered exactly once: {events:?}"
    );
    let reason = |id: &str| {
        events
            .iter()
            .find(|e| e.task_id == id)
            .expect("event")
            .reason
            .clone()
    };
    assert!(
        reason(&poison.id).contains("does not decode"),
        "{}",
        reason(&poison.id)
    );
    assert!(
        reason(&unknown.id).contains("no handler"),
        "{}",
        reason(&unknown.id)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_kind_under_retry_policy_retries_then_dies() {
    let b = broker().await;
    let mut cfg = fast_config();
    cfg.unrunnable = UnrunnablePolicy::Retry;
    let dead = dead_sink(&mut cfg);
    let info = Client::new(b.clone())
        .enqueue(&Unknown { x: 1 }, EnqueueOptions::new().max_retry(2))
        .await
        .expect("enqueue");
    let server = Server::new(b.clone(), Mux::new(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "dead letter", || async {
        dead.lock().expect("lock").len() == 1
    })
    .await;
    let env = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("archived")
        .envelope
        .expect("decodes");
    assert_eq!(env.retried, 3);
    assert_eq!(server.stats().failed, 3);
    server.shutdown().await;
}

#[tokio::test]
async fn registration_and_config_errors_are_typed() {
    let mut mux = Mux::new();
    mux.handle(|_c: Context, _t: Task<Job>| async { Ok(()) })
        .expect("first");
    let err = mux
        .handle(|_c: Context, _t: Task<Job>| async { Ok(()) })
        .expect_err("second");
    assert!(matches!(err, WorkerError::DuplicateHandler(ref k) if k == "job"));
    let b = broker().await;
    let bad = [
        ServerConfig::default().queues([("a b", 1)]),
        ServerConfig::default().queues([("a", 0)]),
        ServerConfig::default().queues(Vec::<(String, u32)>::new()),
        ServerConfig::default().concurrency(0),
        ServerConfig {
            heartbeat_interval: Duration::from_secs(20),
            ..ServerConfig::default()
        },
    ];
    for cfg in bad {
        assert!(
            Server::new(b.clone(), Mux::new(), cfg.clone()).is_err(),
            "{cfg:?}"
        );
    }
}
