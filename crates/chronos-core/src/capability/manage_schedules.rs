//! Schedules stored at run time.

use std::future::Future;

use crate::{BrokerError, FireOutcome, NewTask, PutOutcome, QueueName, ScheduleDef, StoredDef};

/// Schedules stored in the broker at run time (added, changed, paused, resumed, removed and
/// run at once through an API or the CLI), next to those registered in code. The scheduler
/// watches [`ManageSchedules::schedule_revision`] and reloads the set when it moved.
///
/// Every change is one compare-and-set that also bumps the revision, in one atomic step; it
/// refuses an id that a schedule registered in code uses, so the two sources never share one.
/// Validation (spec, zone, queue, options) is the scheduler's job: use its typed front
/// (`chronos_scheduler::RuntimeSchedules`), not these methods, unless you wrap a broker.
///
/// No method has a default body: a store without runtime schedules answers "none stored" to
/// the reads and [`BrokerError::Unsupported`] to the writes, and its schedulers fire the
/// schedules registered in code only; a wrapper forwards them ([`crate::forward!`]).
pub trait ManageSchedules: Send + Sync {
    /// The revision of the stored set: it grows with every change that wrote something (0
    /// before the first). One cheap read, for polling.
    fn schedule_revision(&self) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Every stored definition, by id. Entries that do not decode are skipped (and logged).
    fn schedule_defs(&self) -> impl Future<Output = Result<Vec<StoredDef>, BrokerError>> + Send;

    /// One stored definition.
    fn schedule_def(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<StoredDef>, BrokerError>> + Send;

    /// Compare-and-set of one definition: when the stored bytes of `id` are `expected` (None:
    /// absent), writes `new` (None: deletes) and bumps the revision. Idempotent: when the store
    /// already holds `new` (a re-sent call), nothing is written and [`PutOutcome::Unchanged`]
    /// is answered. An id used by a schedule registered in code is refused
    /// ([`PutOutcome::CodeOwned`]).
    fn put_schedule_def(
        &self,
        id: &str,
        expected: Option<&[u8]>,
        new: Option<&ScheduleDef>,
    ) -> impl Future<Output = Result<PutOutcome, BrokerError>> + Send;

    /// Enqueues `task` for schedule `schedule_id` now, once per `request`: a second call with
    /// the same request (a user retrying) within a day answers [`FireOutcome::Duplicate`] and
    /// enqueues nothing. A call the client re-sends after a lost reply answers its own first
    /// outcome ([`FireOutcome::Fired`] when it enqueued), never `Duplicate`. Counted as fired in the queue's
    /// scheduler counters; it leaves the schedule's last fired trigger alone, so no regular
    /// trigger is suppressed. [`FireOutcome::Unique`] when the task's unique lock is held.
    fn run_schedule(
        &self,
        queue: &QueueName,
        schedule_id: &str,
        request: &str,
        task: NewTask,
    ) -> impl Future<Output = Result<FireOutcome, BrokerError>> + Send;

    /// Forgets the fire state (last fired, last task, first registration) of removed
    /// schedules of `queue`, so an id added again starts afresh.
    fn forget_fire_state(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;
}
