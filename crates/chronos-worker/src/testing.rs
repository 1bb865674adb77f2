//! Testing handlers without Redis: build the [`Context`] of an attempt with [`TestContext`],
//! then run a typed handler on a typed task ([`run_handler`]), a task through a whole [`Mux`]
//! with its middleware ([`run_mux`]), or a stored envelope, such as one a
//! `chronos_core::testing::Recorder` recorded ([`run_envelope`]).
//!
//! Each runner does what the server's executor does around one attempt, in process:
//! * the arguments go through their MessagePack encoding and back, so the handler sees what a
//!   worker would decode (a `#[serde(skip)]` field arrives as its default);
//! * a task past its deadline is not run, and one whose kind has no handler or whose payload does
//!   not decode is refused: each a [`crate::FailureKind::SkipRetry`] error, as the server dead-letters
//!   them (its default [`crate::UnrunnablePolicy`]);
//! * the attempt is cut off at the earlier of its timeout and deadline, which fires the
//!   context's cancellation and gives a retryable `timed out after ...` error;
//! * **a panic is caught**, as the server catches it, and becomes a retryable
//!   `handler panicked: <message>` error (the panic message is still printed by the panic hook,
//!   so the test's output shows where it happened). A test can thus assert that a handler's
//!   panic retries the task;
//! * a result that does not encode fails with [`crate::FailureKind::SkipRetry`], as on the server.
//!
//! Firing the cancellation token of a [`TestContext`] ([`TestContext::cancellation`]) does not
//! stop the run: the handler sees [`Context::cancelled`] resolve and returns what it returns, as
//! under an operator's cancel. A time limit runs on tokio's clock, so with tokio's `test-util`
//! feature a test under `#[tokio::test(start_paused = true)]` reaches it without waiting.
//!
//! ```
//! use chronos_worker::testing::{run_handler, TestContext};
//! use chronos_worker::{Context, FailureKind, Task, TaskError};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Resize { width: u32 }
//! impl chronos_core::TaskArgs for Resize { const KIND: &'static str = "image:resize"; }
//!
//! async fn resize(ctx: Context, task: Task<Resize>) -> Result<u32, TaskError> {
//!     if task.args.width == 0 {
//!         return Err(TaskError::skip_retry("width 0"));
//!     }
//!     Ok(task.args.width * ctx.attempt())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let out = run_handler(&resize, TestContext::new().attempt(2), Resize { width: 10 }).await;
//! assert_eq!(out.unwrap(), 20);
//! let err = run_handler(&resize, TestContext::new(), Resize { width: 0 }).await.unwrap_err();
//! assert_eq!(err.kind(), FailureKind::SkipRetry);
//! # }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use chronos_core::{
    encode_args, new_task_id, now_ms, DecodeError, EnqueueOptions, NewTask, TaskArgs, TaskEnvelope,
    Timestamp, DEFAULT_MAX_RETRY, SCHEDULE_HEADER, TRIGGER_HEADER,
};
use futures::FutureExt;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::executor::{panic_message, time_limit};
use crate::mux::{encode_output, Unrunnable};
use crate::{Context, Handler, Mux, Task, TaskError};

/// Builds the [`Context`] of one attempt for a test: task id, kind, queue, attempt, max retry,
/// headers (including a schedule's id and trigger time), timeout or deadline, and a cancellation
/// token the test can fire. Unset, it is the first attempt of a fresh task in queue `default`
/// with 25 retries, no headers and no time limit.
#[derive(Debug, Clone)]
pub struct TestContext {
    task_id: String,
    kind: Option<String>,
    queue: String,
    attempt: u32,
    max_retry: u32,
    headers: BTreeMap<String, String>,
    timeout: Option<Duration>,
    deadline_ms: Option<i64>,
    enqueued_at_ms: Option<i64>,
    cancel: CancellationToken,
    flow: Option<chronos_core::Flow>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self {
            task_id: new_task_id(),
            kind: None,
            queue: "default".into(),
            attempt: 1,
            max_retry: DEFAULT_MAX_RETRY,
            headers: BTreeMap::new(),
            timeout: None,
            deadline_ms: None,
            enqueued_at_ms: None,
            cancel: CancellationToken::new(),
            flow: None,
        }
    }
}

impl TestContext {
    /// The first attempt of a fresh task (see the type's docs for every default).
    pub fn new() -> Self {
        Self::default()
    }

    /// The task id (default: a random one, as the client makes).
    pub fn task_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = id.into();
        self
    }

    /// The kind the context reports, and the one [`run_mux`] routes by (default: the kind of
    /// the task run, or `test` for [`TestContext::build`]).
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// The queue (default `default`).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Which attempt this is: 1 for the first (the default), 2 for the first retry; 0 counts
    /// as 1.
    pub fn attempt(mut self, n: u32) -> Self {
        self.attempt = n.max(1);
        self
    }

    /// Retries allowed after the first attempt (default 25).
    pub fn max_retry(mut self, n: u32) -> Self {
        self.max_retry = n;
        self
    }

    /// Adds a header, seen by [`Context::header`] and as [`Task::headers`].
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Marks the task as fired by schedule `id` for the trigger at `trigger` (a
    /// `time::OffsetDateTime`, a `SystemTime` or a [`Timestamp`]), the headers the scheduler
    /// writes: [`Context::schedule_id`] and [`Context::trigger_time`] report them.
    pub fn schedule(mut self, id: impl Into<String>, trigger: impl Into<Timestamp>) -> Self {
        self.headers.insert(SCHEDULE_HEADER.into(), id.into());
        let ms = trigger.into().unix_ms();
        self.headers.insert(TRIGGER_HEADER.into(), ms.to_string());
        self
    }

    /// Cuts the attempt off after `d`, as the enqueue option of that name does.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Cuts the attempt off at the wall-clock time `at`, and does not run it when `at` has
    /// passed, as the enqueue option of that name does.
    pub fn deadline(mut self, at: impl Into<Timestamp>) -> Self {
        self.deadline_ms = Some(at.into().unix_ms());
        self
    }

    /// When the task was enqueued, as unix ms ([`Task::enqueued_at_ms`]; default: now).
    pub fn enqueued_at_ms(mut self, ms: i64) -> Self {
        self.enqueued_at_ms = Some(ms);
        self
    }

    /// Makes this an attempt of step `step` of a `total`-step chain `id` whose previous step
    /// returned `parent` (encoded as the server encodes a handler's result; `()` for none):
    /// [`Context::chain`] and [`Context::parent_result`] report them.
    pub fn chain_step<R: serde::Serialize>(
        mut self,
        id: impl Into<String>,
        step: u32,
        total: u32,
        parent: &R,
    ) -> Self {
        let flow = self.flow.get_or_insert_with(Default::default);
        flow.chain = Some(chronos_core::ChainLink {
            id: id.into(),
            step,
            total,
            rest: Vec::new(),
        });
        // A result that does not encode is no parent, as the server would pass none.
        flow.parent = encode_output(parent).ok().flatten().unwrap_or_default();
        self
    }

    /// Makes this an attempt of the callback of group `id` whose members finished with
    /// `succeeded` and `failed` counts: [`Context::group`] reports them.
    pub fn group_callback(mut self, id: impl Into<String>, succeeded: u64, failed: u64) -> Self {
        let flow = self.flow.get_or_insert_with(Default::default);
        flow.callback = Some(chronos_core::GroupCallback {
            id: id.into(),
            total: succeeded.saturating_add(failed),
            collect: false,
            counts: format!("{succeeded:010}:{failed:010}"),
        });
        self
    }

    /// Uses `token` as the attempt's cancellation signal (default: a fresh one).
    pub fn cancellation_token(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The attempt's cancellation signal: fire it (`.cancel()`) to make [`Context::cancelled`]
    /// resolve in the handler, as a shutdown or an operator's cancel would.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The context alone, for calling a handler or a middleware directly. Its deadline is the
    /// earlier of the timeout and the deadline, counted from now; nothing enforces it here (the
    /// runners of this module do).
    pub fn build(&self) -> Context {
        let env = self.envelope(self.kind.as_deref().unwrap_or("test"), Vec::new());
        let limit = time_limit(&env, now_ms());
        Context::for_attempt(&env, limit.map(|d| Instant::now() + d), self.cancel.clone())
    }

    /// The envelope of the task this context is an attempt of, as the worker would read it.
    fn envelope(&self, kind: &str, payload: Vec<u8>) -> TaskEnvelope {
        let now = now_ms();
        // Built as the client builds it, so fields appended to the envelope later get their
        // defaults here too. Default options leave nothing to validate (no id, unique TTL or
        // durability), so the build cannot fail; the fields are set below, which also lets a
        // test use an id the broker would refuse.
        let mut env = match NewTask::build(kind, Vec::new(), EnqueueOptions::new(), now) {
            Ok(t) => t.envelope,
            Err(_) => unreachable!("default enqueue options always build"),
        };
        env.id = self.task_id.clone();
        env.kind = self.kind.clone().unwrap_or_else(|| kind.to_string());
        env.queue = self.queue.clone();
        env.payload = payload;
        env.retried = self.attempt.saturating_sub(1);
        env.max_retry = self.max_retry;
        env.timeout_ms = self
            .timeout
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        env.deadline_ms = self.deadline_ms;
        env.enqueued_at_ms = self.enqueued_at_ms.unwrap_or(now);
        env.headers = self.headers.clone();
        env.flow = self.flow.clone().map(Box::new);
        env
    }
}

/// A run that succeeded, with the handler's result as the server would store it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    result: Option<Vec<u8>>,
    kind: String,
}

impl Completed {
    /// The handler's result, MessagePack-encoded; None when it returned `()` or `None`.
    /// (The server keeps it only for a task enqueued with retention; here it is always kept.)
    pub fn result_bytes(&self) -> Option<&[u8]> {
        self.result.as_deref()
    }

    /// The handler's result decoded as `R`; `Ok(None)` when it returned none.
    pub fn result<R: DeserializeOwned>(&self) -> Result<Option<R>, DecodeError> {
        self.result
            .as_deref()
            .map(rmp_serde::from_slice)
            .transpose()
            .map_err(|e| DecodeError::Payload {
                kind: self.kind.clone(),
                reason: format!("the handler's result does not decode: {e}"),
            })
    }
}

/// Runs `handler` on `args` once, in process, as the server would run that attempt (see the
/// [module docs](self)): the typed result, or the error that would retry or dead-letter it.
pub async fn run_handler<T: TaskArgs, H: Handler<T>>(
    handler: &H,
    ctx: TestContext,
    args: T,
) -> Result<H::Output, TaskError> {
    let payload = encode_args(&args).map_err(unrunnable)?;
    let env = ctx.envelope(T::KIND, payload);
    let now = now_ms();
    refuse_past_deadline(&env, now)?;
    let args: T = chronos_core::decode_payload(&env).map_err(unrunnable)?;
    let task = Task {
        args,
        headers: env.headers.clone(),
        enqueued_at_ms: env.enqueued_at_ms,
    };
    let limit = time_limit(&env, now);
    let context = Context::for_attempt(&env, limit.map(|d| Instant::now() + d), ctx.cancel.clone());
    let output = guarded(handler.handle(context, task), limit, &ctx.cancel)
        .instrument(span(&env))
        .await?;
    encode_output(&output)?;
    Ok(output)
}

/// Runs `args` through `mux` once, in process: its middleware, in order, then the handler of
/// `T::KIND`, as the server would run that attempt (see the [module docs](self)).
pub async fn run_mux<T: TaskArgs>(
    mux: &Mux,
    ctx: TestContext,
    args: T,
) -> Result<Completed, TaskError> {
    let payload = encode_args(&args).map_err(unrunnable)?;
    let env = ctx.envelope(T::KIND, payload);
    attempt(mux, &env, ctx.cancel).await
}

/// Runs a stored task through `mux` once, in process, as the attempt its `retried` count says
/// (see the [module docs](self)). With a recorder's tasks this runs what the code under test
/// enqueued: `for t in recorder.drain() { run_envelope(&mux, &t.envelope).await }`.
pub async fn run_envelope(mux: &Mux, envelope: &TaskEnvelope) -> Result<Completed, TaskError> {
    attempt(mux, envelope, CancellationToken::new()).await
}

async fn attempt(
    mux: &Mux,
    env: &TaskEnvelope,
    cancel: CancellationToken,
) -> Result<Completed, TaskError> {
    let now = now_ms();
    refuse_past_deadline(env, now)?;
    let start = match mux.prepare(env) {
        Ok(start) => start,
        Err(Unrunnable::NoHandler(kind)) => {
            return Err(unrunnable(format!("no handler for kind {kind:?}")))
        }
        Err(Unrunnable::Decode(e)) => return Err(unrunnable(e)),
    };
    let limit = time_limit(env, now);
    let ctx = Context::for_attempt(env, limit.map(|d| Instant::now() + d), cancel.clone());
    let slot = ctx.output_slot();
    guarded(start(ctx), limit, &cancel)
        .instrument(span(env))
        .await?;
    Ok(Completed {
        result: slot.take(),
        kind: env.kind.clone(),
    })
}

/// The span the attempt runs in, named and filled as the server's, so a test's log reads alike.
fn span(env: &TaskEnvelope) -> tracing::Span {
    tracing::info_span!(
        "task",
        task_id = %env.id,
        queue = %env.queue,
        kind = %env.kind,
        attempt = i64::from(env.retried) + 1,
    )
}

fn refuse_past_deadline(env: &TaskEnvelope, now: i64) -> Result<(), TaskError> {
    match env.deadline_ms {
        Some(d) if d <= now => Err(TaskError::skip_retry(
            "deadline exceeded before the task could run",
        )),
        _ => Ok(()),
    }
}

/// A task the server would not run: dead-lettered at once under its default policy.
fn unrunnable(reason: impl std::fmt::Display) -> TaskError {
    TaskError::skip_retry(reason)
}

/// One attempt with the executor's guards: a panic becomes a retryable failure, and the time
/// limit cancels the attempt.
async fn guarded<R>(
    run: impl Future<Output = Result<R, TaskError>>,
    limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<R, TaskError> {
    let run = AssertUnwindSafe(run).catch_unwind();
    let timer = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = run => match r {
            Ok(r) => r,
            Err(panic) => Err(TaskError::retry(format!("handler panicked: {}", panic_message(&panic)))),
        },
        _ = timer => {
            cancel.cancel();
            Err(TaskError::retry(format!("timed out after {:?}", limit.unwrap_or_default())))
        }
    }
}
