//! A guide by example: testing an application's tasks with `chronos::testing`, without Redis.
//!
//! The application below has a producer (`checkout`, which enqueues a receipt and a delayed
//! review request), a handler (`send_receipt`), a middleware (`TenantGuard`) and a nightly
//! schedule. Each test shows one question a test suite asks of them.

use std::time::{Duration, SystemTime};

use chronos::prelude::*;
use chronos::testing::{run_envelope, run_handler, run_mux, Recorder, TestContext};
use chronos::{async_trait, BrokerError, Enqueue, FailureKind, Middleware, Next, Spec, TaskState};
use serde::{Deserialize, Serialize};

// ---- The application -------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    order: u64,
    email: String,
}
impl TaskArgs for Receipt {
    const KIND: &'static str = "receipt";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AskForReview {
    order: u64,
}
impl TaskArgs for AskForReview {
    const KIND: &'static str = "review:ask";
}

/// The producer. Generic over the broker: production passes the Redis client, tests a
/// `Client<Recorder>`.
async fn checkout<B: Enqueue>(
    client: &Client<B>,
    order: u64,
    email: &str,
) -> Result<(), BrokerError> {
    let receipt = Receipt {
        order,
        email: email.into(),
    };
    // One receipt per order, however often the checkout is retried.
    let once = EnqueueOptions::new()
        .queue("mail")
        .unique(Duration::from_secs(3600))
        .header("tenant", "shop-1");
    match client.enqueue(&receipt, once).await {
        Ok(_) | Err(BrokerError::DuplicateTask { .. }) => {}
        Err(e) => return Err(e),
    }
    let in_a_week = EnqueueOptions::new().process_in(Duration::from_secs(7 * 24 * 3600));
    client.enqueue(&AskForReview { order }, in_a_week).await?;
    Ok(())
}

/// The handler: a bad address is permanent, a flaky mail service is retried, and the message
/// id is the task's result.
async fn send_receipt(ctx: Context, task: Task<Receipt>) -> Result<String, TaskError> {
    if !task.args.email.contains('@') {
        return Err(TaskError::skip_retry(format!(
            "bad address {:?}",
            task.args.email
        )));
    }
    if ctx.cancellation().is_cancelled() {
        return Err(TaskError::retry("shutting down"));
    }
    Ok(format!("msg-{}-{}", task.args.order, ctx.attempt()))
}

/// A middleware: refuses tasks that carry no tenant header.
struct TenantGuard;

#[async_trait]
impl Middleware for TenantGuard {
    async fn call(&self, ctx: Context, next: Next<'_>) -> Result<(), TaskError> {
        if ctx.header("tenant").is_none() {
            return Err(TaskError::skip_retry("no tenant"));
        }
        next.run(ctx).await
    }
}

fn app_mux() -> Mux {
    let mut mux = Mux::new();
    mux.handle(send_receipt).expect("register");
    mux.middleware(TenantGuard);
    mux
}

// ---- The tests -----------------------------------------------------------------------------

/// What did the producer enqueue? A receipt now and a review request in a week; checking out
/// twice sends one receipt.
#[tokio::test]
async fn checkout_enqueues_one_receipt_and_a_review_request_for_next_week() {
    let recorder = Recorder::new();
    let client = Client::new(recorder.clone());
    checkout(&client, 42, "buyer@example.com")
        .await
        .expect("checkout");
    checkout(&client, 42, "buyer@example.com")
        .await
        .expect("retried checkout");

    let receipt = recorder.assert_enqueued::<Receipt>(|t| t.args.order == 42);
    assert_eq!(receipt.queue, "mail");
    assert_eq!(receipt.header("tenant"), Some("shop-1"));
    assert_eq!(receipt.unique_ttl, Some(Duration::from_secs(3600)));
    recorder.assert_enqueued_count::<Receipt>(1);

    let review = recorder.assert_enqueued::<AskForReview>(|t| t.args.order == 42);
    assert_eq!(review.state, TaskState::Scheduled);
    let week_ms = 7 * 24 * 3600 * 1000;
    assert!(review.run_at_ms - review.envelope.enqueued_at_ms >= week_ms);
}

/// What does the handler do? Its result on success, and a failure kind the server acts on.
#[tokio::test]
async fn the_receipt_handler_returns_the_message_id_and_refuses_bad_addresses() {
    let ok = Receipt {
        order: 7,
        email: "a@example.com".into(),
    };
    let id = run_handler(&send_receipt, TestContext::new().attempt(2), ok)
        .await
        .expect("sent");
    assert_eq!(id, "msg-7-2");

    let bad = Receipt {
        order: 8,
        email: "nobody".into(),
    };
    let err = run_handler(&send_receipt, TestContext::new(), bad)
        .await
        .expect_err("refused");
    assert_eq!(
        err.kind(),
        FailureKind::SkipRetry,
        "dead-lettered, not retried"
    );
}

/// The handler under a shutdown: the test fires the cancellation the server would.
#[tokio::test]
async fn a_cancelled_attempt_is_retried_later() {
    let ctx = TestContext::new();
    ctx.cancellation().cancel();
    let args = Receipt {
        order: 9,
        email: "a@example.com".into(),
    };
    let err = run_handler(&send_receipt, ctx, args)
        .await
        .expect_err("stopped");
    assert_eq!(err.kind(), FailureKind::Retry);
}

/// The whole worker path: middleware, handler and the encoded result, as the server runs it.
#[tokio::test]
async fn the_mux_runs_the_guard_and_the_handler() {
    let mux = app_mux();
    let args = Receipt {
        order: 5,
        email: "a@example.com".into(),
    };
    let done = run_mux(
        &mux,
        TestContext::new().header("tenant", "shop-1"),
        args.clone(),
    )
    .await
    .expect("ran");
    assert_eq!(
        done.result::<String>().expect("decodes").as_deref(),
        Some("msg-5-1")
    );

    let err = run_mux(&mux, TestContext::new(), args)
        .await
        .expect_err("guarded");
    assert_eq!(err.message(), "no tenant");
}

/// Producer and worker together: what checkout enqueued, run through the mux.
#[tokio::test]
async fn what_checkout_enqueues_the_worker_can_run() {
    let recorder = Recorder::new();
    checkout(&Client::new(recorder.clone()), 11, "c@example.com")
        .await
        .expect("checkout");
    let mux = app_mux();
    let mut sent = Vec::new();
    for task in recorder.drain() {
        if task.envelope.kind == Receipt::KIND {
            let done = run_envelope(&mux, &task.envelope).await.expect("ran");
            let id: Option<String> = done.result().expect("decodes");
            sent.extend(id);
        }
    }
    assert_eq!(sent, ["msg-11-1"]);
}

/// When does the nightly job run? At 02:30 Berlin time, except on the day the clocks spring
/// forward past it: then at 03:00, right after the gap.
#[test]
fn the_nightly_schedule_moves_to_three_on_the_spring_forward_night() {
    let nightly = Spec::cron("30 2 * * *", "Europe/Berlin").expect("valid");
    // 2027-03-27T00:00:00Z, a day before the change.
    let from = SystemTime::UNIX_EPOCH + Duration::from_secs(1_806_105_600);
    let wall: Vec<(u8, u8, u8, i8)> = nightly
        .upcoming(from, 3)
        .iter()
        .map(|t| (t.day(), t.hour(), t.minute(), t.offset().whole_hours()))
        .collect();
    assert_eq!(wall, [(27, 2, 30, 1), (28, 3, 0, 2), (29, 2, 30, 2)]);
}
