//! Testing an application of chronos without Redis, as Sidekiq's and Oban's testing modes do:
//!
//! * **Producers**: [`Recorder`] is a broker that records instead of writing. Code written
//!   against `Client<B>` with `B: Enqueue` (or taking `&impl Enqueue`) runs unchanged on
//!   `Client::new(recorder.clone())`; the test then asks [`Recorder::enqueued`] for the typed
//!   tasks (arguments, queue, run-at, headers, options) or asserts with
//!   [`Recorder::assert_enqueued`], [`Recorder::refute_enqueued`],
//!   [`Recorder::assert_enqueued_count`] and [`Recorder::assert_nothing_enqueued`]. Its answers
//!   and refusals (unique lock held, id taken, bad queue, payload too large) are the Redis
//!   broker's.
//! * **Handlers**: [`run_handler`] runs one attempt of a typed handler on a typed task,
//!   [`run_mux`] runs a task through a whole [`crate::Mux`] with its middleware, and
//!   [`run_envelope`] runs a recorded task; each guards the attempt as the server does (a panic
//!   is a retryable failure, the timeout cancels). [`TestContext`] builds what the handler
//!   sees: attempt, max retry, headers, the schedule that fired it, a time limit, and a
//!   cancellation token the test fires.
//! * **Schedules**: [`crate::Spec::upcoming`] lists a schedule's next triggers from any instant,
//!   DST included, exactly as the scheduler fires them.
//!
//! The `assert_*` methods panic with a message that lists what was enqueued; that is their job.
//!
//! ```rust
//! use chronos::prelude::*;
//! use chronos::testing::{run_handler, Recorder, TestContext};
//! use chronos::{BrokerError, Enqueue, FailureKind, Spec};
//! use serde::{Deserialize, Serialize};
//! use std::time::SystemTime;
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Receipt { order: u64, email: String }
//! impl TaskArgs for Receipt { const KIND: &'static str = "receipt"; }
//!
//! // Producer code, generic over the broker.
//! async fn place_order<B: Enqueue>(client: &Client<B>, order: u64) -> Result<(), BrokerError> {
//!     let receipt = Receipt { order, email: "buyer@example.com".into() };
//!     client.enqueue(&receipt, EnqueueOptions::new().queue("mail")).await?;
//!     Ok(())
//! }
//!
//! // The handler: a permanent failure for a bad address, the message id otherwise.
//! async fn send_receipt(ctx: Context, task: Task<Receipt>) -> Result<String, TaskError> {
//!     if !task.args.email.contains('@') {
//!         return Err(TaskError::skip_retry("bad address"));
//!     }
//!     Ok(format!("{}-{}", task.args.order, ctx.attempt()))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // What did the producer enqueue?
//! let recorder = Recorder::new();
//! place_order(&Client::new(recorder.clone()), 42).await.unwrap();
//! let sent = recorder.assert_enqueued::<Receipt>(|t| t.args.order == 42);
//! assert_eq!(sent.queue, "mail");
//!
//! // What does the handler do with it, on its second attempt?
//! let ctx = TestContext::new().attempt(2);
//! assert_eq!(run_handler(&send_receipt, ctx, sent.args).await.unwrap(), "42-2");
//! let bad = Receipt { order: 1, email: "nobody".into() };
//! let err = run_handler(&send_receipt, TestContext::new(), bad).await.unwrap_err();
//! assert_eq!(err.kind(), FailureKind::SkipRetry);
//!
//! // When does the nightly schedule fire next? At 03:00 Berlin time, whatever the season.
//! let nightly = Spec::cron("0 3 * * *", "Europe/Berlin").unwrap();
//! let next = nightly.upcoming(SystemTime::now(), 3);
//! assert!(next.iter().all(|t| (t.hour(), t.minute()) == (3, 0)));
//! # }
//! ```

#[doc(inline)]
pub use chronos_broker::testing::{Enqueued, RecordedTask, Recorder};
#[doc(inline)]
pub use chronos_worker::testing::{run_envelope, run_handler, run_mux, Completed, TestContext};
