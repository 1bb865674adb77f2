use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{QueueName, TaskEnvelope};

use crate::{TaskError, WorkerError};

/// Computes the delay before retry number `retried` (1 for the first retry) after `error`.
pub type RetryDelayFn = Arc<dyn Fn(u32, &TaskError) -> Duration + Send + Sync>;

/// Sees every task that is archived or discarded, with the reason.
pub type DeadLetterHook = Arc<dyn Fn(&DeadLetterEvent) + Send + Sync>;

/// Sees every failed attempt (before the retry or dead-letter decision is carried out).
pub type ErrorHook = Arc<dyn Fn(&TaskFailure) + Send + Sync>;

/// A task that left the system through the dead-letter path.
#[derive(Debug, Clone)]
pub struct DeadLetterEvent {
    /// Task id.
    pub task_id: String,
    /// Queue.
    pub queue: String,
    /// Kind, when the envelope could be read.
    pub kind: Option<String>,
    /// The envelope, when it could be read.
    pub envelope: Option<TaskEnvelope>,
    /// Why the task died.
    pub reason: String,
    /// Dropped rather than archived.
    pub discarded: bool,
}

/// One failed attempt.
#[derive(Debug, Clone)]
pub struct TaskFailure {
    /// Task id.
    pub task_id: String,
    /// Queue.
    pub queue: String,
    /// Kind.
    pub kind: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The error message.
    pub message: String,
}

/// What to do with a task whose kind has no handler here, or whose payload does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnrunnablePolicy {
    /// Dead-letter it at once with the reason (the default: it can never succeed here).
    #[default]
    DeadLetter,
    /// Retry with backoff until max retry, for rolling deploys where another server may know
    /// the kind; it still ends in the dead letters, so it never loops forever.
    Retry,
}

/// Configuration of a [`crate::Server`]. Every field has a default; [`ServerConfig::validate`]
/// runs at [`crate::Server::new`].
#[derive(Clone)]
pub struct ServerConfig {
    /// Queues with their weights (default: `default` with weight 1).
    pub queues: Vec<(String, u32)>,
    /// Serve queues strictly in the order of their weights (highest first): a lower queue runs
    /// only while every higher one is empty.
    pub strict_priority: bool,
    /// Most tasks running at once (default 16).
    pub concurrency: usize,
    /// How long shutdown waits for running handlers before cancelling them (default 8 s).
    pub shutdown_timeout: Duration,
    /// A delivery idle this long is taken from its (presumed dead) worker (default 30 s).
    pub recover_min_idle: Duration,
    /// How often the recoverer looks (default 5 s).
    pub recover_interval: Duration,
    /// How often leases of held tasks are refreshed (default 5 s; at most a third of
    /// `recover_min_idle`).
    pub heartbeat_interval: Duration,
    /// How often due delayed and retry tasks are forwarded (default 500 ms).
    pub forward_interval: Duration,
    /// How often the janitor runs (default 60 s).
    pub janitor_interval: Duration,
    /// Archived tasks older than this are removed (default 7 days).
    pub archive_retention: Duration,
    /// At most this many archived tasks are kept per queue (default 10 000).
    pub archive_max: u64,
    /// Retry delay (default [`default_retry_delay`]).
    pub retry_delay: RetryDelayFn,
    /// What to do with tasks no handler here can run.
    pub unrunnable: UnrunnablePolicy,
    /// Called for every dead-lettered task.
    pub on_dead_letter: Option<DeadLetterHook>,
    /// Called for every failed attempt.
    pub on_error: Option<ErrorHook>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            queues: vec![("default".into(), 1)],
            strict_priority: false,
            concurrency: 16,
            shutdown_timeout: Duration::from_secs(8),
            recover_min_idle: Duration::from_secs(30),
            recover_interval: Duration::from_secs(5),
            heartbeat_interval: Duration::from_secs(5),
            forward_interval: Duration::from_millis(500),
            janitor_interval: Duration::from_secs(60),
            archive_retention: Duration::from_secs(7 * 24 * 3600),
            archive_max: 10_000,
            retry_delay: Arc::new(default_retry_delay),
            unrunnable: UnrunnablePolicy::default(),
            on_dead_letter: None,
            on_error: None,
        }
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("queues", &self.queues)
            .field("strict_priority", &self.strict_priority)
            .field("concurrency", &self.concurrency)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("recover_min_idle", &self.recover_min_idle)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("forward_interval", &self.forward_interval)
            .field("janitor_interval", &self.janitor_interval)
            .field("unrunnable", &self.unrunnable)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// Serve these queues with these weights.
    pub fn queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = (S, u32)>) -> Self {
        self.queues = queues.into_iter().map(|(q, w)| (q.into(), w)).collect();
        self
    }

    /// Set the concurrency.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Checks every setting; the error names the one that is wrong.
    pub fn validate(&self) -> Result<Vec<(QueueName, u32)>, WorkerError> {
        if self.queues.is_empty() {
            return Err(WorkerError::InvalidConfig(
                "at least one queue is needed".into(),
            ));
        }
        let mut queues = Vec::new();
        for (name, weight) in &self.queues {
            if *weight == 0 {
                return Err(WorkerError::InvalidConfig(format!(
                    "queue {name:?} has weight 0"
                )));
            }
            let q = QueueName::new(name.clone())?;
            if queues.iter().any(|(other, _)| *other == q) {
                return Err(WorkerError::InvalidConfig(format!(
                    "queue {name:?} listed twice"
                )));
            }
            queues.push((q, *weight));
        }
        if self.concurrency == 0 {
            return Err(WorkerError::InvalidConfig(
                "concurrency must be at least 1".into(),
            ));
        }
        for (name, d) in [
            ("recover_interval", self.recover_interval),
            ("heartbeat_interval", self.heartbeat_interval),
            ("forward_interval", self.forward_interval),
            ("janitor_interval", self.janitor_interval),
        ] {
            if d.is_zero() {
                return Err(WorkerError::InvalidConfig(format!(
                    "{name} must be positive"
                )));
            }
        }
        // Three heartbeats fit in one min-idle window, so one late heartbeat never loses a lease.
        if self.heartbeat_interval.saturating_mul(3) > self.recover_min_idle {
            return Err(WorkerError::HeartbeatTooSlow {
                heartbeat: self.heartbeat_interval,
                min_idle: self.recover_min_idle,
            });
        }
        Ok(queues)
    }
}

/// The default retry delay: `retried⁴ + 15` seconds plus up to 30 % jitter, capped at 1 day
/// (about 16 s, 31 s, 96 s, 4.5 min, ... as Sidekiq and asynq space them). The jitter spreads a
/// burst of failures so their retries do not all land at once.
pub fn default_retry_delay(retried: u32, _error: &TaskError) -> Duration {
    let n = u64::from(retried.min(400));
    let base = n.pow(4).saturating_add(15).min(86_400);
    let jitter = rand::random::<f64>() * 0.3 * base as f64;
    Duration::from_secs_f64(base as f64 + jitter).min(Duration::from_secs(86_400))
}
