use std::time::Duration;

use crate::MisfirePolicy;

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

/// Options of one schedule. Unset fields take the defaults: an id derived from kind, spec, queue
/// and payload; queue `default`; 25 retries; the scheduler's default zone; the default misfire
/// policy (catch up on at most 10 triggers of the last hour); overlaps allowed.
#[derive(Debug, Clone, Default)]
pub struct ScheduleOptions {
    pub(crate) id: Option<String>,
    pub(crate) queue: Option<String>,
    pub(crate) max_retry: Option<u32>,
    pub(crate) retention: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) zone: Option<String>,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) overlap: OverlapPolicy,
}

impl ScheduleOptions {
    /// Same as `default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stable id of your own (it names the schedule's fire state and dedup keys, so keep it
    /// across deploys; changing it starts the schedule afresh).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Queue of the fired tasks.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Retries of each fired task.
    pub fn max_retry(mut self, n: u32) -> Self {
        self.max_retry = Some(n);
        self
    }

    /// Keep each completed task for inspection this long.
    pub fn retention(mut self, d: Duration) -> Self {
        self.retention = Some(d);
        self
    }

    /// Per-attempt timeout of each fired task.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// IANA time zone of a cron expression (`Europe/Berlin`); ignored by intervals.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// What a new leader does with triggers missed while no leader ran.
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
