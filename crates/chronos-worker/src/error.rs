use std::time::Duration;

/// Errors of the worker runtime's own API (registration, configuration, start-up). Permanent
/// unless the variant is [`WorkerError::Broker`] with a transient cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Two handlers were registered for one kind.
    #[error("a handler for kind {0:?} is already registered")]
    DuplicateHandler(String),
    /// The server configuration is inconsistent; the message says which setting.
    #[error("invalid server config: {0}")]
    InvalidConfig(String),
    /// The heartbeat would not keep leases fresh: it must be well under recover min idle.
    #[error(
        "heartbeat interval {heartbeat:?} must be at most a third of recover min idle {min_idle:?}"
    )]
    HeartbeatTooSlow {
        /// The configured heartbeat interval.
        heartbeat: Duration,
        /// The configured recover min idle.
        min_idle: Duration,
    },
    /// The metrics endpoint could not start (address in use, or another metrics recorder was
    /// installed first). Permanent for this configuration.
    #[error("metrics endpoint: {0}")]
    Metrics(String),
    /// The broker failed (see its own error for permanent or transient).
    #[error(transparent)]
    Broker(#[from] chronos_core::BrokerError),
}

/// Why [`crate::Context::progress`] reported nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgressError {
    /// The value does not serialize to JSON (a map with non-string keys, a failing
    /// `Serialize` impl); the message is serde_json's.
    #[error("progress does not serialize to JSON: {0}")]
    Encode(String),
    /// The value's JSON is over the limit ([`chronos_core::MAX_PROGRESS_BYTES`]).
    #[error("progress is {len} bytes of JSON, over the {max} byte limit")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
}
