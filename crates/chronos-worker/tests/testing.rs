//! `chronos_worker::testing`: handlers and whole muxes run in process, without Redis, on a
//! context the test builds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chronos_broker::testing::Recorder;
use chronos_broker::{Client, EnqueueOptions, TaskArgs};
use chronos_worker::testing::{run_envelope, run_handler, run_mux, TestContext};
use chronos_worker::{async_trait, Context, FailureKind, Middleware, Mux, Next, Task, TaskError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Charge {
    cents: u64,
    #[serde(skip)]
    local_only: u32,
}
impl TaskArgs for Charge {
    const KIND: &'static str = "charge";
}

fn charge(cents: u64) -> Charge {
    Charge {
        cents,
        local_only: 7,
    }
}

/// What a handler saw of its attempt.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Seen {
    id: String,
    kind: String,
    queue: String,
    attempt: u32,
    max_retry: u32,
    header: Option<String>,
    schedule: Option<String>,
    trigger_ms: Option<u128>,
    has_deadline: bool,
    local_only: u32,
}

async fn observe(ctx: Context, task: Task<Charge>) -> Result<Seen, TaskError> {
    Ok(Seen {
        id: ctx.task_id().into(),
        kind: ctx.kind().into(),
        queue: ctx.queue().into(),
        attempt: ctx.attempt(),
        max_retry: ctx.max_retry(),
        header: task.headers.get("tenant").cloned(),
        schedule: ctx.schedule_id().map(str::to_string),
        trigger_ms: ctx
            .trigger_time()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_millis()),
        has_deadline: ctx.deadline().is_some(),
        local_only: task.args.local_only,
    })
}

#[tokio::test]
async fn the_handler_sees_the_attempt_the_test_built_and_its_result_comes_back() {
    let trigger = SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
    let ctx = TestContext::new()
        .task_id("t-1")
        .queue("payments")
        .attempt(3)
        .max_retry(5)
        .header("tenant", "acme")
        .schedule("nightly-billing", trigger)
        .timeout(Duration::from_secs(30));
    let seen = run_handler(&observe, ctx, charge(250)).await.expect("ran");
    assert_eq!(
        seen,
        Seen {
            id: "t-1".into(),
            kind: "charge".into(),
            queue: "payments".into(),
            attempt: 3,
            max_retry: 5,
            header: Some("acme".into()),
            schedule: Some("nightly-billing".into()),
            trigger_ms: Some(1_800_000_000_000),
            has_deadline: true,
            // The arguments went through their encoding, as on a worker.
            local_only: 0,
        }
    );
    // Defaults: the first attempt of a fresh task in `default`.
    let seen = run_handler(&observe, TestContext::new(), charge(1))
        .await
        .expect("ran");
    assert_eq!((seen.attempt, seen.max_retry), (1, 25));
    assert_eq!((seen.queue.as_str(), seen.schedule), ("default", None));
    assert!(!seen.has_deadline);
}

async fn picky(_ctx: Context, task: Task<Charge>) -> Result<(), TaskError> {
    match task.args.cents {
        0 => Err(TaskError::skip_retry("nothing to charge")),
        1 => Err(TaskError::retry_after(
            Duration::from_secs(9),
            "rate limited",
        )),
        2 => Err(std::io::Error::other("card network down"))?,
        3 => panic!("boom at {}", task.args.cents),
        _ => Ok(()),
    }
}

#[tokio::test]
async fn errors_keep_their_kind_and_a_panic_is_a_retryable_failure() {
    let run = |cents| run_handler(&picky, TestContext::new(), charge(cents));
    let e = run(0).await.expect_err("skip");
    assert_eq!(
        (e.kind(), e.message()),
        (FailureKind::SkipRetry, "nothing to charge")
    );
    let e = run(1).await.expect_err("retry after");
    assert_eq!(e.kind(), FailureKind::RetryAfter(Duration::from_secs(9)));
    let e = run(2).await.expect_err("retry");
    assert_eq!(
        (e.kind(), e.message()),
        (FailureKind::Retry, "card network down")
    );
    let e = run(3).await.expect_err("panic");
    assert_eq!(e.kind(), FailureKind::Retry);
    assert_eq!(e.message(), "handler panicked: boom at 3");
    run(4).await.expect("ok");
}

#[tokio::test]
async fn the_test_fires_the_cancellation_the_handler_watches() {
    let saw = Arc::new(AtomicBool::new(false));
    let handler = {
        let saw = saw.clone();
        move |ctx: Context, _task: Task<Charge>| {
            let saw = saw.clone();
            async move {
                ctx.cancelled().await;
                saw.store(true, Ordering::SeqCst);
                Err::<(), _>(TaskError::retry("stopped early"))
            }
        }
    };
    let ctx = TestContext::new();
    let cancel = ctx.cancellation();
    let run = tokio::spawn(async move { run_handler(&handler, ctx, charge(5)).await });
    cancel.cancel();
    let e = run.await.expect("joined").expect_err("stopped");
    assert_eq!(e.message(), "stopped early");
    assert!(saw.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_timeout_cuts_the_attempt_off_and_fires_its_cancellation() {
    async fn stuck(_ctx: Context, _task: Task<Charge>) -> Result<(), TaskError> {
        std::future::pending().await
    }
    let ctx = TestContext::new().timeout(Duration::from_millis(50));
    let cancel = ctx.cancellation();
    let e = run_handler(&stuck, ctx, charge(5))
        .await
        .expect_err("timed out");
    assert_eq!(e.kind(), FailureKind::Retry);
    assert_eq!(e.message(), "timed out after 50ms");
    assert!(cancel.is_cancelled());
}

#[tokio::test]
async fn a_task_past_its_deadline_is_not_run() {
    let ran = Arc::new(AtomicBool::new(false));
    let handler = {
        let ran = ran.clone();
        move |_ctx: Context, _task: Task<Charge>| {
            ran.store(true, Ordering::SeqCst);
            async { Ok::<(), TaskError>(()) }
        }
    };
    let past = SystemTime::now() - Duration::from_secs(1);
    let e = run_handler(&handler, TestContext::new().deadline(past), charge(5))
        .await
        .expect_err("dead");
    assert_eq!(e.kind(), FailureKind::SkipRetry);
    assert!(!ran.load(Ordering::SeqCst));
}

/// Logs its name around the rest of the chain; `deny` refuses tasks of that queue.
struct Log {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    deny: Option<&'static str>,
}

#[async_trait]
impl Middleware for Log {
    async fn call(&self, ctx: Context, next: Next<'_>) -> Result<(), TaskError> {
        self.log
            .lock()
            .expect("log")
            .push(format!("{} in", self.name));
        if self.deny == Some(ctx.queue()) {
            return Err(TaskError::skip_retry(format!("{} refused", self.name)));
        }
        let r = next.run(ctx).await;
        self.log
            .lock()
            .expect("log")
            .push(format!("{} out", self.name));
        r
    }
}

#[tokio::test]
async fn a_task_runs_through_the_whole_mux_with_its_middleware_in_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    mux.handle::<Charge, _>({
        let log = log.clone();
        move |ctx: Context, task: Task<Charge>| {
            let log = log.clone();
            async move {
                log.lock().expect("log").push("handler".into());
                Ok::<_, TaskError>((task.args.cents * 2, ctx.attempt()))
            }
        }
    })
    .expect("register");
    mux.middleware(Log {
        name: "outer",
        log: log.clone(),
        deny: None,
    })
    .middleware(Log {
        name: "inner",
        log: log.clone(),
        deny: Some("blocked"),
    });

    let done = run_mux(&mux, TestContext::new().attempt(2), charge(21))
        .await
        .expect("ran");
    assert_eq!(done.result::<(u64, u32)>().expect("decodes"), Some((42, 2)));
    assert!(done.result_bytes().is_some());
    assert_eq!(
        *log.lock().expect("log"),
        ["outer in", "inner in", "handler", "inner out", "outer out"]
    );

    log.lock().expect("log").clear();
    let e = run_mux(&mux, TestContext::new().queue("blocked"), charge(1))
        .await
        .expect_err("refused");
    assert_eq!(
        (e.kind(), e.message()),
        (FailureKind::SkipRetry, "inner refused")
    );
    assert_eq!(
        *log.lock().expect("log"),
        ["outer in", "inner in", "outer out"]
    );

    #[derive(Serialize, Deserialize)]
    struct Unknown {}
    impl TaskArgs for Unknown {
        const KIND: &'static str = "unknown";
    }
    let e = run_mux(&mux, TestContext::new(), Unknown {})
        .await
        .expect_err("no handler");
    assert_eq!(e.kind(), FailureKind::SkipRetry);
    assert!(
        e.message().contains("no handler for kind \"unknown\""),
        "{}",
        e.message()
    );
}

/// The producer's tasks, recorded without Redis, run through the worker's mux: the whole path
/// from enqueue to handler in one test.
#[tokio::test]
async fn recorded_tasks_run_through_the_mux() {
    let total = Arc::new(Mutex::new(0u64));
    let mut mux = Mux::new();
    mux.handle::<Charge, _>({
        let total = total.clone();
        move |_ctx: Context, task: Task<Charge>| {
            let total = total.clone();
            async move {
                *total.lock().expect("total") += task.args.cents;
                Ok::<(), TaskError>(())
            }
        }
    })
    .expect("register");

    let recorder = Recorder::new();
    let client = Client::new(recorder.clone());
    for cents in [100, 250] {
        client
            .enqueue(&charge(cents), EnqueueOptions::new().queue("payments"))
            .await
            .expect("enqueue");
    }
    for task in recorder.drain() {
        let done = run_envelope(&mux, &task.envelope).await.expect("ran");
        assert_eq!(done.result::<()>().expect("decodes"), None, "no result");
    }
    assert_eq!(*total.lock().expect("total"), 350);
    recorder.assert_nothing_enqueued();
}
