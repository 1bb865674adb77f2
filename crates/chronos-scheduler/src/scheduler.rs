use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{Broker, TaskArgs};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::schedule::Schedule;
use crate::{leader, registry, ScheduleOptions, SchedulerConfig, SchedulerError, Spec};

/// Registers schedules, then runs them: every instance of a service may run one; the instances
/// elect one leader that enqueues each trigger exactly once across the cluster.
pub struct Scheduler<B: Broker> {
    broker: B,
    config: SchedulerConfig,
    schedules: Vec<Schedule>,
}

impl<B: Broker> std::fmt::Debug for Scheduler<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.config)
            .field(
                "schedules",
                &self.schedules.iter().map(|s| &s.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Counters of one scheduler instance since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Whether this instance leads now.
    pub is_leader: bool,
    /// Its epoch while leading (0 when following).
    pub epoch: u64,
    /// Times it became leader.
    pub elections_won: u64,
    /// Triggers it enqueued.
    pub fired: u64,
    /// Triggers its catch-ups skipped by policy.
    pub missed: u64,
    /// Triggers it found already fired, or skipped by the overlap policy.
    pub suppressed: u64,
    /// Fire calls it made (one round trip each, for any number of triggers of one queue).
    pub fire_calls: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) is_leader: AtomicBool,
    pub(crate) epoch: AtomicU64,
    pub(crate) elections_won: AtomicU64,
    pub(crate) fired: AtomicU64,
    pub(crate) missed: AtomicU64,
    pub(crate) suppressed: AtomicU64,
    pub(crate) fire_calls: AtomicU64,
}

pub(crate) struct Shared<B> {
    pub(crate) broker: B,
    pub(crate) config: SchedulerConfig,
    pub(crate) schedules: Vec<Schedule>,
    pub(crate) instance: String,
    pub(crate) counters: Counters,
    /// Stops everything (shutdown).
    pub(crate) stop: CancellationToken,
    /// Asks the current leadership term to end (resign_leadership).
    pub(crate) resign: tokio::sync::Notify,
}

impl<B: Broker> Scheduler<B> {
    /// A scheduler with no schedules yet. Nothing touches Redis before [`Scheduler::start`].
    pub fn new(broker: B, config: SchedulerConfig) -> Self {
        Self {
            broker,
            config,
            schedules: Vec::new(),
        }
    }

    /// Enqueues `task` every `every` (at least 1 s), at instants aligned to the unix epoch, so
    /// every instance computes the same triggers. Returns the schedule id.
    pub fn register_interval<T: TaskArgs>(
        &mut self,
        every: Duration,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<String, SchedulerError> {
        self.add(Spec::interval(every)?, task, opts)
    }

    /// Enqueues `task` at the times of a cron expression: 5 fields, or 6 with seconds first,
    /// or `@hourly`/`@daily`/`@weekly`/`@monthly`/`@yearly`, evaluated in the option's IANA zone
    /// (default: the config's, `UTC`). An expression that never fires is refused. Returns the id.
    pub fn register_cron<T: TaskArgs>(
        &mut self,
        expr: &str,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<String, SchedulerError> {
        let zone = opts
            .zone
            .clone()
            .unwrap_or_else(|| self.config.default_zone.clone());
        self.add(Spec::cron(expr, &zone)?, task, opts)
    }

    fn add<T: TaskArgs>(
        &mut self,
        spec: Spec,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<String, SchedulerError> {
        let schedule = Schedule::new(spec, task, opts)?;
        if self.schedules.iter().any(|s| s.id == schedule.id) {
            return Err(SchedulerError::DuplicateSchedule(schedule.id));
        }
        let id = schedule.id.clone();
        self.schedules.push(schedule);
        Ok(id)
    }

    /// Starts the election, firing and registry loops and returns at once.
    pub async fn start(self) -> Result<SchedulerHandle, SchedulerError> {
        // Bounded above so every deadline derived from it (renewals, dedup TTL) stays finite.
        if self.config.leader_ttl < Duration::from_millis(100)
            || self.config.leader_ttl > Duration::from_secs(3600)
        {
            return Err(SchedulerError::InvalidOption(
                "leader_ttl must be between 100 ms and 1 h".into(),
            ));
        }
        if self.config.publish_interval.is_zero()
            || self.config.publish_interval > Duration::from_secs(86_400)
        {
            return Err(SchedulerError::InvalidOption(
                "publish_interval must be between 1 ms and 1 day".into(),
            ));
        }
        let mut queues = HashSet::new();
        for s in &self.schedules {
            queues.insert(s.queue.clone());
        }
        let instance = self.config.instance_id.clone().unwrap_or_else(|| {
            format!(
                "{}:{}:{:08x}",
                hostname::get()
                    .map(|h| h.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                std::process::id(),
                rand::random::<u32>()
            )
        });
        let shared = Arc::new(Shared {
            broker: self.broker,
            config: self.config,
            schedules: self.schedules,
            instance: instance.clone(),
            counters: Counters::default(),
            stop: CancellationToken::new(),
            resign: tokio::sync::Notify::new(),
        });
        // Publish before electing, so the registry lists schedules that never fired.
        registry::publish(&shared).await;
        let tasks = vec![
            tokio::spawn(leader::run(shared.clone())),
            tokio::spawn(registry::run(shared.clone())),
        ];
        info!(instance = %instance, schedules = shared.schedules.len(), "scheduler started");
        Ok(SchedulerHandle { shared, tasks })
    }
}

/// A running scheduler.
pub struct SchedulerHandle {
    shared: Arc<dyn HandleView>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerHandle")
            .field("instance", &self.shared.instance())
            .finish()
    }
}

/// The broker-independent view the handle needs.
trait HandleView: Send + Sync {
    fn instance(&self) -> &str;
    fn counters(&self) -> &Counters;
    fn stop(&self) -> &CancellationToken;
    fn resign(&self) -> &tokio::sync::Notify;
}

impl<B: Broker> HandleView for Shared<B> {
    fn instance(&self) -> &str {
        &self.instance
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn stop(&self) -> &CancellationToken {
        &self.stop
    }
    fn resign(&self) -> &tokio::sync::Notify {
        &self.resign
    }
}

impl SchedulerHandle {
    /// This instance's id.
    pub fn instance_id(&self) -> &str {
        self.shared.instance()
    }

    /// Counters since start.
    pub fn stats(&self) -> SchedulerStats {
        let c = self.shared.counters();
        SchedulerStats {
            is_leader: c.is_leader.load(Ordering::SeqCst),
            epoch: c.epoch.load(Ordering::SeqCst),
            elections_won: c.elections_won.load(Ordering::Relaxed),
            fired: c.fired.load(Ordering::Relaxed),
            missed: c.missed.load(Ordering::Relaxed),
            suppressed: c.suppressed.load(Ordering::Relaxed),
            fire_calls: c.fire_calls.load(Ordering::Relaxed),
        }
    }

    /// Whether this instance leads now.
    pub fn is_leader(&self) -> bool {
        self.shared.counters().is_leader.load(Ordering::SeqCst)
    }

    /// Hands the leadership over if this instance holds it: compare-and-delete of the lock plus
    /// a message that wakes the followers at once. This instance then stays a follower for one
    /// leader TTL, so another takes over. No-op for a follower.
    pub fn resign_leadership(&self) {
        // notify_one keeps a permit when nobody waits: only a leader may leave one, or the next
        // term would end right after it began.
        if self.is_leader() {
            self.shared.resign().notify_one();
        }
    }

    /// Stops the scheduler; a leader resigns first, so a follower takes over at once.
    pub async fn shutdown(self) {
        self.shared.stop().cancel();
        for t in self.tasks {
            if let Err(e) = t.await {
                warn!(error = %e, "scheduler task ended abnormally");
            }
        }
    }
}
