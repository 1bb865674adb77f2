use std::time::Duration;

use chronos_core::EnqueueOptions;

use crate::misfire::MisfirePolicy;

/// What a trigger does while the schedule's previous run is still pending or running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OverlapPolicy {
    /// Enqueue anyway (the default): runs may overlap.
    #[default]
    Allow,
    /// Skip the trigger (counted as suppressed) while the previous task of this schedule is
    /// pending, scheduled, waiting for a retry or running.
    Forbid,
}

/// Options of one schedule. Unset fields take the defaults: an id derived from kind, spec, zone
/// and queue (not the payload, so a deploy that changes the payload keeps the schedule's
/// state); queue `default`; 25 retries; the scheduler's default zone; the default misfire
/// policy (catch up on at most 10 triggers of the last hour); overlaps allowed.
///
/// Every fired task gets the enqueue options of its kind
/// ([`chronos_broker::TaskArgs::default_options`]) with those given here laid over them, the
/// later call winning where two set one field. The scheduler sets
/// the task id (`<schedule>:<trigger unix seconds>`) and fires each task at its trigger time,
/// so a task id or process-at/process-in given in the enqueue options is ignored.
#[derive(Debug, Clone, Default)]
pub struct ScheduleOptions {
    pub(crate) id: Option<String>,
    pub(crate) enqueue: EnqueueOptions,
    pub(crate) deadline_after: Option<Duration>,
    pub(crate) zone: Option<String>,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) overlap: OverlapPolicy,
}

impl ScheduleOptions {
    /// Same as `default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stable id (name) of your own. It names the schedule's fire state and dedup keys, so
    /// keep it across deploys; changing it starts the schedule afresh (from its first
    /// registration, see the crate docs). Give one when two schedules share kind, spec, zone
    /// and queue (they differ only by payload), or their derived ids collide.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The enqueue options of every fired task (queue, retries, unique, dead-letter discard,
    /// timeout, deadline, retention, headers), laid over the kind's defaults and over what
    /// earlier calls set; setters called later override fields of these. Options asking for
    /// `durable` enqueues (here or in the kind's defaults) are refused at registration
    /// ([`crate::SchedulerError::DurableSchedule`]): the scheduler sends no `WAIT`.
    pub fn enqueue(mut self, opts: EnqueueOptions) -> Self {
        self.enqueue = self.enqueue.merge(opts);
        self
    }

    /// Queue of the fired tasks.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.enqueue = self.enqueue.queue(queue);
        self
    }

    /// Retries of each fired task.
    pub fn max_retry(mut self, n: u32) -> Self {
        self.enqueue = self.enqueue.max_retry(n);
        self
    }

    /// Keep each completed task for inspection this long.
    pub fn retention(mut self, d: Duration) -> Self {
        self.enqueue = self.enqueue.retention(d);
        self
    }

    /// Per-attempt timeout of each fired task.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.enqueue = self.enqueue.timeout(d);
        self
    }

    /// Each fired task takes the unique lock of its kind and payload in its queue for `ttl`
    /// (released when it succeeds or dies): a trigger that finds the lock held by another task
    /// (an earlier run still unfinished, or the same task enqueued by hand) is skipped and
    /// counted as suppressed.
    pub fn unique(mut self, ttl: Duration) -> Self {
        self.enqueue = self.enqueue.unique(ttl);
        self
    }

    /// Each fired task deduplicates by `dedup` ([`EnqueueOptions::dedup`]): a trigger whose key
    /// is held is skipped ([`chronos_core::FireOutcome::Unique`]). A schedule takes
    /// [`DedupMode::Reject`](chronos_core::DedupMode::Reject) and
    /// [`DedupMode::Throttle`](chronos_core::DedupMode::Throttle) with any release point; a
    /// replace or a debounce is refused at registration with an `InvalidOption` error, since a
    /// fired trigger is enqueued once or skipped, never merged into a waiting task.
    pub fn dedup(mut self, dedup: chronos_core::Dedup) -> Self {
        self.enqueue = self.enqueue.dedup(dedup);
        self
    }

    /// Drop each fired task instead of archiving it when its retries are exhausted.
    pub fn discard_on_dead_letter(mut self) -> Self {
        self.enqueue = self.enqueue.discard_on_dead_letter();
        self
    }

    /// Each fired task must not run later than `d` after its trigger time: the worker cancels
    /// it then, and a trigger fired after that instant (a late catch-up) is skipped and counted
    /// as missed. Overrides an absolute deadline of the enqueue options.
    pub fn deadline_after(mut self, d: Duration) -> Self {
        self.deadline_after = Some(d);
        self
    }

    /// A header on every fired task. `chronos-schedule` and `chronos-trigger-ms` are set by the
    /// scheduler and win over headers of those names.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.enqueue = self.enqueue.header(key, value);
        self
    }

    /// IANA time zone of a cron expression (`Europe/Berlin`); ignored by intervals.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// What a leader does with triggers that fell due while no leader ran, or that piled up
    /// while the leader's clock jumped or its host was suspended.
    pub fn misfire(mut self, policy: MisfirePolicy) -> Self {
        self.misfire = policy;
        self
    }

    /// What a trigger does while the previous run is unfinished.
    pub fn overlap(mut self, policy: OverlapPolicy) -> Self {
        self.overlap = policy;
        self
    }
}
