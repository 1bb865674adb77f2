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

/// The error a handler returns. `?` turns an error into a retryable one; [`TaskError::skip_retry`]
/// and [`TaskError::retry_after`] choose otherwise without downcasting.
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
