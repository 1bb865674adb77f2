use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{BrokerError, QueueName, TaskEnvelope};
use futures::future::BoxFuture;

use crate::{QueueLimit, TaskError, TaskLogs, WorkerError};

/// Computes the delay before retry number `retried` (1 for the first retry) after `error`.
pub type RetryDelayFn = Arc<dyn Fn(u32, &TaskError) -> Duration + Send + Sync>;

/// Sees every task that is archived or discarded, with the reason, and may do async work with it
/// (notify a channel, write an audit row). Build one from an async closure with
/// [`dead_letter_hook`] or [`ServerConfig::on_dead_letter`].
///
/// The server awaits the returned future before it moves on, for at most
/// [`ServerConfig::dead_letter_hook_timeout`]; then the future is dropped and a warning logged.
/// A worker slot (or the recoverer, for tasks it dead-letters) waits meanwhile, so a slow hook
/// slows this server down rather than piling up unbounded work, and can delay shutdown by at most
/// that timeout. The task is already dead-lettered when the hook runs: what the hook does cannot
/// change its fate, and a hook that times out or panics loses nothing but its own work.
pub type DeadLetterHook = Arc<dyn Fn(DeadLetterEvent) -> BoxFuture<'static, ()> + Send + Sync>;

/// Builds a [`DeadLetterHook`] from an async closure:
/// `dead_letter_hook(|event| async move { alert(&event).await })`.
pub fn dead_letter_hook<F, Fut>(hook: F) -> DeadLetterHook
where
    F: Fn(DeadLetterEvent) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(move |event| Box::pin(hook(event)))
}

/// Default of [`ServerConfig::dead_letter_hook_timeout`].
pub const DEFAULT_DEAD_LETTER_HOOK_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// How often due delayed and retry tasks are forwarded when the broker pushes no signals
    /// (default 500 ms). With a broker that does (Redis), the forwarder instead sleeps until the
    /// earliest due time of its queues, woken early by a push when a task gets an earlier one
    /// (see `safety_interval`), and this is the least time between two passes over one queue
    /// that no push asked for: tasks due soon after a pass may wait up to this long, as when
    /// polling.
    pub forward_interval: Duration,
    /// With a broker that pushes signals ([`chronos_core::Maintain::signals`]): the longest a
    /// lost push can delay what it announced. Each queue is forwarded at least this often, and
    /// the paused set read at least this often (besides at start and after each reconnect of
    /// the subscriber, which re-reads everything). Default 10 s. It bounds the cost of an idle
    /// queue: one forward call per queue per interval.
    pub safety_interval: Duration,
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
    /// Most times one task may be snoozed ([`crate::TaskError::snooze`]); a handler that snoozes
    /// it once more dead-letters it instead, with a reason that says so (default
    /// [`DEFAULT_MAX_SNOOZES`]). Counted per task, across every server.
    pub max_snoozes: u32,
    /// Called for every dead-lettered task, and awaited (see [`DeadLetterHook`]).
    pub on_dead_letter: Option<DeadLetterHook>,
    /// Longest wait for one call of `on_dead_letter` (default 5 s).
    pub dead_letter_hook_timeout: Duration,
    /// Called for every failed attempt, synchronously on the worker: keep it quick.
    pub on_error: Option<ErrorHook>,
    /// Sample the cluster-wide queue gauges (`chronos_queue_*`, see [`crate::metrics`]) this
    /// often, in whichever server holds the sampler lease (default None: off, and no Redis call
    /// is spent on it; `ServerConfig::metrics_addr` (feature
    /// `prometheus`) turns it on at
    /// [`DEFAULT_QUEUE_SAMPLE_INTERVAL`]).
    pub sample_queues: Option<Duration>,
    /// Serve this process's metrics as a Prometheus page on this address (default None).
    #[cfg(feature = "prometheus")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Cluster-wide limits per queue (default none; see [`QueueLimit`]). Each names a queue of
    /// `queues`. These are defaults: the queue's settings stored in Redis override them field by
    /// field, so the cluster shares one truth.
    pub limits: Vec<(String, QueueLimit)>,
    /// What is kept of each attempt's own log lines ([`crate::Context::log`] and, with
    /// [`crate::LogCapture`] installed, its handler's `tracing` events): per-attempt caps and
    /// a redaction applied before they are written with the attempt's history row.
    pub task_logs: TaskLogs,
}

/// The default of [`ServerConfig::max_snoozes`]: a task polled every five minutes may snooze
/// for three days and a half.
pub const DEFAULT_MAX_SNOOZES: u32 = 1_000;

/// The period of the queue gauges' sampler when `ServerConfig::metrics_addr` turns it on.
pub const DEFAULT_QUEUE_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

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
            safety_interval: Duration::from_secs(10),
            janitor_interval: Duration::from_secs(60),
            archive_retention: Duration::from_secs(7 * 24 * 3600),
            archive_max: chronos_core::DEFAULT_ARCHIVE_MAX,
            retry_delay: Arc::new(default_retry_delay),
            unrunnable: UnrunnablePolicy::default(),
            max_snoozes: DEFAULT_MAX_SNOOZES,
            on_dead_letter: None,
            dead_letter_hook_timeout: DEFAULT_DEAD_LETTER_HOOK_TIMEOUT,
            on_error: None,
            sample_queues: None,
            #[cfg(feature = "prometheus")]
            metrics_addr: None,
            limits: Vec::new(),
            task_logs: TaskLogs::default(),
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
            .field("safety_interval", &self.safety_interval)
            .field("recover_interval", &self.recover_interval)
            .field("janitor_interval", &self.janitor_interval)
            .field("archive_retention", &self.archive_retention)
            .field("archive_max", &self.archive_max)
            .field("unrunnable", &self.unrunnable)
            .field("max_snoozes", &self.max_snoozes)
            .field("on_dead_letter", &self.on_dead_letter.is_some())
            .field("dead_letter_hook_timeout", &self.dead_letter_hook_timeout)
            .field("on_error", &self.on_error.is_some())
            .field("sample_queues", &self.sample_queues)
            .field("limits", &self.limits)
            .field("task_logs", &self.task_logs)
            .finish_non_exhaustive()
    }
}

/// Builder methods, one per field, each documented at its field; [`ServerConfig::validate`]
/// (run by [`crate::Server::new`]) checks the result.
impl ServerConfig {
    /// Serve these queues with these weights.
    pub fn queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = (S, u32)>) -> Self {
        self.queues = queues.into_iter().map(|(q, w)| (q.into(), w)).collect();
        self
    }

    /// Per-attempt caps and redaction of tasks' own log lines.
    pub fn task_logs(mut self, logs: TaskLogs) -> Self {
        self.task_logs = logs;
        self
    }

    /// Serve queues in strict priority order instead of by weight.
    pub fn strict_priority(mut self, strict: bool) -> Self {
        self.strict_priority = strict;
        self
    }

    /// Most tasks running at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Grace period of running handlers at shutdown.
    pub fn shutdown_timeout(mut self, d: Duration) -> Self {
        self.shutdown_timeout = d;
        self
    }

    /// Idle time after which a delivery is taken from its worker.
    pub fn recover_min_idle(mut self, d: Duration) -> Self {
        self.recover_min_idle = d;
        self
    }

    /// Period of the recoverer.
    pub fn recover_interval(mut self, d: Duration) -> Self {
        self.recover_interval = d;
        self
    }

    /// Period of the lease heartbeat.
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }

    /// Period of the forwarder of due delayed and retry tasks.
    pub fn forward_interval(mut self, d: Duration) -> Self {
        self.forward_interval = d;
        self
    }

    /// The longest a lost push may delay a due task or a pause (see
    /// [`ServerConfig::safety_interval`]).
    pub fn safety_interval(mut self, d: Duration) -> Self {
        self.safety_interval = d;
        self
    }

    /// Period of the janitor.
    pub fn janitor_interval(mut self, d: Duration) -> Self {
        self.janitor_interval = d;
        self
    }

    /// Age after which archived tasks are removed.
    pub fn archive_retention(mut self, d: Duration) -> Self {
        self.archive_retention = d;
        self
    }

    /// Most archived tasks kept per queue.
    pub fn archive_max(mut self, n: u64) -> Self {
        self.archive_max = n;
        self
    }

    /// Replaces the retry delay: `f(retried, error)`, with `retried` 1 for the first retry.
    pub fn retry_delay(
        mut self,
        f: impl Fn(u32, &crate::TaskError) -> Duration + Send + Sync + 'static,
    ) -> Self {
        self.retry_delay = Arc::new(f);
        self
    }

    /// What to do with tasks no handler here can run.
    pub fn unrunnable(mut self, policy: UnrunnablePolicy) -> Self {
        self.unrunnable = policy;
        self
    }

    /// Most snoozes of one task before it is dead-lettered.
    pub fn max_snoozes(mut self, n: u32) -> Self {
        self.max_snoozes = n;
        self
    }

    /// Calls (and awaits, see [`DeadLetterHook`]) `hook` for every dead-lettered task.
    pub fn on_dead_letter<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(DeadLetterEvent) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_dead_letter = Some(dead_letter_hook(hook));
        self
    }

    /// Longest wait for one call of the dead-letter hook.
    pub fn dead_letter_hook_timeout(mut self, d: Duration) -> Self {
        self.dead_letter_hook_timeout = d;
        self
    }

    /// Calls `hook` for every failed attempt (synchronously: keep it quick).
    pub fn on_error(mut self, hook: impl Fn(&TaskFailure) + Send + Sync + 'static) -> Self {
        self.on_error = Some(Arc::new(hook));
        self
    }

    /// Samples the cluster-wide queue gauges every `every` (see [`ServerConfig::sample_queues`]);
    /// for an application that installed its own `metrics` recorder.
    pub fn sample_queues(mut self, every: Duration) -> Self {
        self.sample_queues = Some(every);
        self
    }

    /// Serves this process's metrics as a Prometheus page (`http://<addr>/metrics`, with
    /// `/healthz` for a liveness probe and 404 elsewhere) while the server runs, and samples the queue gauges (every [`DEFAULT_QUEUE_SAMPLE_INTERVAL`] unless
    /// [`ServerConfig::sample_queues`] says otherwise). The recorder is installed at
    /// [`crate::Server::start`], which fails if the address cannot be bound or another
    /// `metrics` recorder is already installed. Port 0 picks a free port:
    /// [`crate::ServerHandle::metrics_addr`] tells which.
    #[cfg(feature = "prometheus")]
    pub fn metrics_addr(mut self, addr: std::net::SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        if self.sample_queues.is_none() {
            self.sample_queues = Some(DEFAULT_QUEUE_SAMPLE_INTERVAL);
        }
        self
    }

    /// Limits `queue` (one of [`ServerConfig::queues`]) cluster-wide: a rate, a concurrency,
    /// a rate per rate key (see [`QueueLimit`]). Replaces an earlier limit of that queue.
    pub fn limit(mut self, queue: impl Into<String>, limit: QueueLimit) -> Self {
        let queue = queue.into();
        self.limits.retain(|(q, _)| *q != queue);
        self.limits.push((queue, limit));
        self
    }

    /// The limit of queue `name`, if any.
    pub(crate) fn limit_of(&self, name: &str) -> Option<QueueLimit> {
        self.limits.iter().find(|(q, _)| q == name).map(|(_, l)| *l)
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
            let q = QueueName::new(name.clone()).map_err(|e| match e {
                BrokerError::InvalidQueue { reason, .. } => WorkerError::InvalidConfig(format!(
                    "queue {name:?} is not a valid queue name: {reason}"
                )),
                other => WorkerError::InvalidConfig(format!("queue {name:?}: {other}")),
            })?;
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
            ("safety_interval", self.safety_interval),
            ("janitor_interval", self.janitor_interval),
            ("dead_letter_hook_timeout", self.dead_letter_hook_timeout),
            ("sample_queues", self.sample_queues.unwrap_or(Duration::MAX)),
        ] {
            if d.is_zero() {
                return Err(WorkerError::InvalidConfig(format!(
                    "{name} must be positive"
                )));
            }
        }
        for (i, (name, limit)) in self.limits.iter().enumerate() {
            if !self.queues.iter().any(|(q, _)| q == name) {
                return Err(WorkerError::InvalidConfig(format!(
                    "limit of queue {name:?}, which this server does not serve"
                )));
            }
            if self.limits[..i].iter().any(|(q, _)| q == name) {
                return Err(WorkerError::InvalidConfig(format!(
                    "queue {name:?} limited twice"
                )));
            }
            limit.validate(name)?;
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
