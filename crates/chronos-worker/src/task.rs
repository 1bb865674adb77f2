use std::collections::BTreeMap;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// A decoded task as its handler receives it.
#[derive(Debug, Clone)]
pub struct Task<T> {
    /// The task arguments, already decoded.
    pub args: T,
    /// Headers given at enqueue.
    pub headers: BTreeMap<String, String>,
    /// When it was enqueued (unix ms).
    pub enqueued_at_ms: i64,
}

/// What a handler knows about the attempt it runs.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) task_id: String,
    pub(crate) kind: String,
    pub(crate) queue: String,
    pub(crate) attempt: u32,
    pub(crate) max_retry: u32,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: CancellationToken,
}

impl Context {
    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The queue it came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// 1 for the first attempt, 2 for the first retry, and so on.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Retries allowed after the first attempt.
    pub fn max_retry(&self) -> u32 {
        self.max_retry
    }

    /// When this attempt is cut off (the earlier of the task's timeout and deadline), if ever.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Fires when the attempt must stop: timeout, deadline, server shutdown past its grace
    /// period, or the lease was lost. Long handlers should watch it (`ctx.cancelled().await` in a
    /// `select!`); one that ignores it is dropped at its next await point anyway.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Waits until [`Context::cancellation`] fires.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}
