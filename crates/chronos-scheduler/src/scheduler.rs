//! The scheduler's front: registration before start, then the handle of a running instance.
//! `start` builds the shared state and spawns the loops (`leader`, `registry`, `watcher`,
//! `adopter`); none of them reaches back here.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{ManageSchedules, QueueName, Schedules, TaskArgs};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::SchedulerConfig;
use crate::error::SchedulerError;
use crate::options::ScheduleOptions;
use crate::schedule::Schedule;
use crate::shared::{ResignRequest, Shared};
use crate::spec::Spec;
use crate::stats::{Counters, SchedulerStats};
use crate::{adopter, leader, registry, watcher};

/// Registers schedules, then runs them: every instance of a service may run one; the instances
/// elect one leader that enqueues each trigger exactly once across the cluster.
///
/// `B` needs only the [`Schedules`] capability (leader lock, fenced firing, fire state,
/// registry) and [`ManageSchedules`] (the runtime schedules it watches and fires), so a
/// producer-only service, or a wrapper adding metrics or faults, fits.
pub struct Scheduler<B: Schedules + ManageSchedules + Clone + 'static> {
    broker: B,
    config: SchedulerConfig,
    schedules: Vec<Schedule>,
}

impl<B: Schedules + ManageSchedules + Clone + 'static> std::fmt::Debug for Scheduler<B> {
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

impl<B: Schedules + ManageSchedules + Clone + 'static> Scheduler<B> {
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
        if self
            .config
            .runtime_poll
            .is_some_and(|p| p < Duration::from_millis(10) || p > Duration::from_secs(3600))
        {
            return Err(SchedulerError::InvalidOption(
                "runtime_poll must be between 10 ms and 1 h".into(),
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
        let (resign, resign_rx) = mpsc::channel(4);
        let shared = Arc::new(Shared {
            broker: self.broker,
            config: self.config,
            schedules: self.schedules,
            runtime: watch::Sender::new(Arc::new(Vec::new())),
            adopted: watch::Sender::new(Arc::new(Vec::new())),
            instance: instance.clone(),
            counters: Counters::default(),
            stop: CancellationToken::new(),
            resign,
        });
        // Publish before electing, so the registry lists schedules that never fired; then mark
        // each id's first registration, which fences its catch-up.
        let mut publisher = registry::Publisher::default();
        publisher.tick(&shared).await;
        let mut queues: Vec<&QueueName> = queues.iter().collect();
        queues.sort();
        for q in queues {
            let ids: Vec<String> = shared
                .schedules
                .iter()
                .filter(|s| s.queue == *q)
                .map(|s| s.id.clone())
                .collect();
            if let Err(e) = shared.broker.register_schedules(q, &ids).await {
                warn!(queue = %q, error = %e, "could not mark first registrations; the leader retries");
            }
        }
        // Load the runtime schedules before electing, so a first term already fires them.
        let mut revision = None;
        if shared.config.runtime_poll.is_some() {
            watcher::refresh(&shared, &mut revision).await;
        }
        let tasks = vec![
            tokio::spawn(leader::run(shared.clone(), resign_rx)),
            tokio::spawn(registry::run(shared.clone(), publisher)),
            tokio::spawn(watcher::run(shared.clone(), revision)),
            tokio::spawn(adopter::run(shared.clone())),
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
    /// This instance's id.
    fn instance(&self) -> &str;
    /// Its counters.
    fn counters(&self) -> &Counters;
    /// Stops every loop.
    fn stop(&self) -> &CancellationToken;
    /// Reaches the leader loop.
    fn resign(&self) -> &mpsc::Sender<ResignRequest>;
}

impl<B: Schedules + ManageSchedules + Clone + 'static> HandleView for Shared<B> {
    fn instance(&self) -> &str {
        &self.instance
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn stop(&self) -> &CancellationToken {
        &self.stop
    }
    fn resign(&self) -> &mpsc::Sender<ResignRequest> {
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
        self.shared.counters().snapshot()
    }

    /// Whether this instance leads now.
    pub fn is_leader(&self) -> bool {
        self.shared.counters().is_leader.load(Ordering::SeqCst)
    }

    /// Hands the leadership over if this instance holds it, and returns once it is given up:
    /// the instance has stopped firing and released the lock (compare-and-delete plus a message
    /// that wakes the followers at once). It then stays a follower for one leader TTL, so
    /// another instance takes over.
    ///
    /// `Ok(true)`: this instance led and released the lock. `Ok(false)`: it did not lead (or
    /// the scheduler is shut down). `Err`: it led and stopped firing, but releasing the lock
    /// failed; the lock then expires by itself within one leader TTL.
    pub async fn resign_leadership(&self) -> Result<bool, SchedulerError> {
        let (tx, rx) = oneshot::channel();
        if self.shared.resign().send(tx).await.is_err() {
            return Ok(false);
        }
        match rx.await {
            Ok(result) => Ok(result?),
            Err(_) => Ok(false),
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
