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
}

/// The error a handler returns. Any `std::error::Error` converts into a retryable one with `?`;
/// [`TaskError::skip_retry`] and [`TaskError::retry_after`] choose otherwise without downcasting.
///
/// It deliberately does not implement `std::error::Error` itself, so that the blanket `From`
/// conversion from every error type can exist.
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

    /// What happens next.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The message recorded as the task's last error.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for TaskError {
    fn from(e: E) -> Self {
        // Keep the source chain in the recorded message: it is all an operator sees later.
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
