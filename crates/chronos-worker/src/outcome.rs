use std::fmt;
use std::time::Duration;

/// How a handler failed, which decides what happens to the task next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// Retry with the server's backoff until max retry, then dead-letter.
    Retry,
    /// Retry after this delay instead of the server's backoff.
    RetryAfter(Duration),
    /// Dead-letter at once; retrying cannot help.
    SkipRetry,
    /// Not a failure: run the task again after this delay, with no attempt spent and no error
    /// recorded ([`TaskError::snooze`]).
    Snooze(Duration),
    /// Not a failure: the handler was rate limited. Block the task's rate key (or, with
    /// `queue_wide` or when the task has no key, its whole queue) cluster-wide for `delay`,
    /// and run the task again after it, with no attempt spent ([`TaskError::rate_limited`]).
    RateLimited {
        /// How long to block (clamped by the broker to
        /// [`MIN_BACKOFF`](chronos_core::MIN_BACKOFF)..=[`MAX_BACKOFF`](chronos_core::MAX_BACKOFF)).
        delay: Duration,
        /// Block the whole queue even when the task has a rate key.
        queue_wide: bool,
    },
    /// Not a failure: the task should not run (any more). It ends as cancelled, with the
    /// message as its reason ([`TaskError::cancel`]).
    Cancel,
}

/// The error a handler returns. `?` turns an error into a retryable one; [`TaskError::skip_retry`]
/// and [`TaskError::retry_after`] choose otherwise without downcasting, and
/// [`TaskError::snooze`], [`TaskError::rate_limited`] and [`TaskError::cancel`] are no failures
/// at all: run me later, the API said "not now", and do not run me.
///
/// What `?` accepts: every type that converts into `Box<dyn std::error::Error + Send + Sync>`,
/// that is any `std::error::Error + Send + Sync + 'static`, `anyhow::Error` (anyhow provides the
/// conversion), a `Box<dyn Error + Send + Sync>` itself, and `String` or `&str` messages. The
/// recorded message is the error followed by its whole source chain (`outer: inner: root`),
/// since the message is all an operator sees later.
///
/// It deliberately does not implement `std::error::Error` itself, so that this blanket
/// conversion can exist.
pub struct TaskError {
    kind: FailureKind,
    message: String,
}

impl TaskError {
    /// A retryable failure.
    pub fn retry(message: impl fmt::Display) -> Self {
        Self {
            kind: FailureKind::Retry,
            message: message.to_string(),
        }
    }

    /// A failure to retry after `delay` (rate limits and the like).
    pub fn retry_after(delay: Duration, message: impl fmt::Display) -> Self {
        Self {
            kind: FailureKind::RetryAfter(delay),
            message: message.to_string(),
        }
    }

    /// A permanent failure: the task is dead-lettered at once.
    pub fn skip_retry(message: impl fmt::Display) -> Self {
        Self {
            kind: FailureKind::SkipRetry,
            message: message.to_string(),
        }
    }

    /// Not a failure: the task is not ready to run yet ("check again in five minutes"). It goes
    /// back to its queue as a scheduled task due after `delay`: no attempt is spent, no error is
    /// recorded, and it keeps its level, tenant and unique lock. The task's snooze count (shown by
    /// the inspector) goes up by one; a task that has snoozed
    /// [`ServerConfig::max_snoozes`](crate::ServerConfig::max_snoozes) times is dead-lettered
    /// instead, with a reason that says so, so a handler that always snoozes cannot keep a
    /// task alive for ever.
    pub fn snooze(delay: Duration) -> Self {
        Self {
            kind: FailureKind::Snooze(delay),
            message: format!("snoozed for {delay:?}"),
        }
    }

    /// Not a failure: the API this task calls said "too many requests". Blocks the task's rate
    /// key ([`EnqueueOptions::rate_key`](chronos_core::EnqueueOptions::rate_key)), or its whole
    /// queue when it has none, on every server until `delay` from now (by Redis' clock), and
    /// puts the task back to run after the block, at the block's end plus a jitter:
    ///
    /// * no attempt is spent, no error is recorded, and it is not counted as a snooze;
    /// * other tasks of a blocked key are held back without running (each moved once to the
    ///   scheduled set, due at the block's end plus a jitter, so they come back spread out);
    ///   a blocked queue is not fetched at all until its end (plus a jitter per worker);
    /// * a block only extends: a shorter one signalled meanwhile keeps the later end;
    /// * `delay` is clamped to [`MIN_BACKOFF`](chronos_core::MIN_BACKOFF) (100 ms; a zero delay
    ///   means that) ..= [`MAX_BACKOFF`](chronos_core::MAX_BACKOFF) (an hour).
    ///
    /// Chain [`TaskError::queue_wide`] to block the whole queue even when the task has a key.
    pub fn rate_limited(delay: Duration) -> Self {
        Self {
            kind: FailureKind::RateLimited {
                delay,
                queue_wide: false,
            },
            message: format!("rate limited for {delay:?}"),
        }
    }

    /// [`TaskError::rate_limited`] for as long as an HTTP `Retry-After` header asks
    /// ([`crate::retry_after_header`], from the local clock), or `fallback` when the header is
    /// missing or unreadable.
    pub fn rate_limited_for_header(value: Option<&str>, fallback: Duration) -> Self {
        let delay = value
            .and_then(|v| crate::retry_after_header(v, std::time::SystemTime::now()).ok())
            .unwrap_or(fallback);
        Self::rate_limited(delay)
    }

    /// Makes a [`TaskError::rate_limited`] block the task's whole queue, even when the task
    /// has a rate key (the API limits the account, not one key). No effect on other errors.
    pub fn queue_wide(mut self) -> Self {
        if let FailureKind::RateLimited { delay, .. } = self.kind {
            self.kind = FailureKind::RateLimited {
                delay,
                queue_wide: true,
            };
            self.message = format!("rate limited (whole queue) for {delay:?}");
        }
        self
    }

    /// Not a failure: the task should not run (any more): the order it was for was withdrawn,
    /// the user it was for is gone, an operator's cancel reached the handler
    /// ([`Context::cancelled`](crate::Context::cancelled)). The task ends as cancelled
    /// ([`TaskState::Cancelled`](chronos_core::TaskState::Cancelled)), with `reason`:
    ///
    /// * no attempt is spent, no error is recorded, it is not retried and not dead-lettered, and
    ///   neither the error hook nor the dead-letter hook runs;
    /// * it is kept in the queue's cancelled set, listed and shown by the inspector, the CLI and
    ///   the console with its reason, for as long as the archive keeps dead letters
    ///   ([`ServerConfig::archive_retention`](crate::ServerConfig::archive_retention) and
    ///   [`ServerConfig::archive_max`](crate::ServerConfig::archive_max), counted on their own),
    ///   and an operator can run it again or delete it;
    /// * its unique or deduplication lock is released as when it finishes;
    /// * a producer waiting for its result gets
    ///   [`BrokerError::TaskCancelled`](chronos_core::BrokerError::TaskCancelled); a group
    ///   counts it as not succeeded, and a chain stops at it;
    /// * it counts under `outcome="cancelled"` and in [`ServerStats::cancelled`](crate::ServerStats::cancelled).
    pub fn cancel(reason: impl fmt::Display) -> Self {
        Self {
            kind: FailureKind::Cancel,
            message: reason.to_string(),
        }
    }

    /// What happens next.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The message recorded as the task's last error.
    pub fn message(&self) -> &str {
        &self.message
    }
}

// Bounded by `Into<Box<dyn Error + Send + Sync>>` rather than by `Error`: a second impl for
// `anyhow::Error` or `Box<dyn Error>` next to an `E: Error` blanket impl is refused by coherence
// (std or anyhow could add `Error` impls for those types later), while this one bound covers
// them all, and needs no dependency on anyhow.
impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for TaskError {
    fn from(e: E) -> Self {
        let e: Box<dyn std::error::Error + Send + Sync + 'static> = e.into();
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Self {
            kind: FailureKind::Retry,
            message,
        }
    }
}

impl fmt::Debug for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
