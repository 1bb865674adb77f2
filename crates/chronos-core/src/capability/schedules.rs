//! What the scheduler needs: leadership, firing and the schedule registry.

use std::future::Future;
use std::time::Duration;

use crate::{
    BrokerError, FireOutcome, FireRecord, FireState, LeaderInfo, QueueName, ScheduleDef,
    ScheduleEntry, SchedulerMetrics, Trigger,
};

/// What the cluster-wide scheduler needs: a leader lock with a fencing epoch, fenced and
/// deduplicated firing, the fire state, and the schedule registry.
pub trait Schedules: Send + Sync {
    /// Takes the leadership for `token` if nobody holds it; returns the new fencing epoch (which
    /// only ever grows), or None when another instance leads.
    ///
    /// The epoch is above `min_epoch`: a candidate that saw a higher fence (the epoch counter was
    /// lost, say with a Redis shard restarted empty) passes it, so fences stay meaningful.
    fn acquire_leadership(
        &self,
        token: &str,
        instance: &str,
        ttl: Duration,
        min_epoch: u64,
    ) -> impl Future<Output = Result<Option<u64>, BrokerError>> + Send;

    /// Extends the leadership if `token` still holds it.
    fn renew_leadership(
        &self,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Gives the leadership up if `token` holds it and wakes the followers at once.
    fn resign_leadership(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// The current leader, if any holds the lock: its instance id, fencing epoch and since when
    /// it leads.
    fn leader(&self) -> impl Future<Output = Result<Option<LeaderInfo>, BrokerError>> + Send;

    /// A channel that receives a message whenever a leader resigns. Messages can be missed (pub/sub
    /// is a hint), so followers still poll the lock.
    fn resignations(
        &self,
    ) -> impl Future<Output = Result<tokio::sync::mpsc::Receiver<()>, BrokerError>> + Send;

    /// Raises `queue`'s fence to `epoch`, so lower epochs can no longer fire into it; returns the
    /// fence afterwards (higher than `epoch` means a newer leader exists, or the counter reset).
    fn fence(
        &self,
        queue: &QueueName,
        epoch: u64,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Records the first registration of each schedule id of `queue` that has none yet (at
    /// Redis' clock; never moved later), and returns every id's mark, in order. Every instance
    /// calls it at start, so catch-up is fenced by when the id first existed in the cluster.
    fn register_schedules(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> impl Future<Output = Result<Vec<i64>, BrokerError>> + Send;

    /// Fires triggers of one queue in one atomic script, fenced by `epoch`; one outcome per
    /// trigger. The cluster-wide counters (fired, suppressed, missed, plus `missed` triggers the
    /// caller's misfire policy skipped, plus triggers answered [`FireOutcome::Invalid`]) are
    /// updated in the same step. A call re-sent after a
    /// lost reply writes and counts nothing again and answers the first run's outcomes.
    fn fire(
        &self,
        queue: &QueueName,
        epoch: u64,
        triggers: Vec<Trigger>,
        dedup_ttl: Duration,
        missed: u64,
    ) -> impl Future<Output = Result<Vec<FireOutcome>, BrokerError>> + Send;

    /// Last fired trigger, last task id and first registration of each schedule of `queue`, in
    /// order.
    fn fire_state(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> impl Future<Output = Result<Vec<FireState>, BrokerError>> + Send;

    /// The fire history of schedule `schedule_id` of `queue`, newest first: its last
    /// [`crate::FIRES_KEPT`] triggers fired or skipped and run-nows, each with its task id.
    /// Empty for a schedule that never fired; forgotten with the fire state. An entry that does
    /// not decode is left out (and logged), never an error.
    fn fire_history(
        &self,
        queue: &QueueName,
        schedule_id: &str,
    ) -> impl Future<Output = Result<Vec<FireRecord>, BrokerError>> + Send;

    /// Writes registry entries for `instance` (which then counts as registering them) and marks
    /// the instance alive. With no entries it only marks the instance alive, in one small
    /// command, and returns false when the registry no longer knows the instance (its record
    /// was pruned, or Redis lost its data): the caller must then write all its entries again.
    fn publish_schedules(
        &self,
        instance: &str,
        entries: &[ScheduleEntry],
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Stores the definitions (task, options, spec) of schedules registered in code, by id, so
    /// that a leader which does not register them itself can fire them
    /// ([`Schedules::registered_defs`]). A definition is forgotten with its registry entry
    /// ([`Schedules::prune_schedules`]). Idempotent.
    fn publish_schedule_defs(
        &self,
        defs: &[ScheduleDef],
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// The stored definitions of the schedules that instances seen alive within `live_within`
    /// register in code and `instance` (the caller) does not, except the ids in `known` (those
    /// the caller fires already). Ids without a stored definition (registered by instances of
    /// older versions) are left out. Costs one small command per live instance; only the ids
    /// the caller lacks travel.
    fn registered_defs(
        &self,
        instance: &str,
        live_within: Duration,
        known: &[String],
    ) -> impl Future<Output = Result<Vec<ScheduleDef>, BrokerError>> + Send;

    /// Every registry entry registered by an instance seen alive within `remove_after`, with
    /// its fire state and next run; entries whose instances were all last seen more than
    /// `stale_after` ago are marked stale. Reads only: pruning is
    /// [`Schedules::prune_schedules`].
    fn schedules(
        &self,
        stale_after: Duration,
        remove_after: Duration,
    ) -> impl Future<Output = Result<Vec<ScheduleEntry>, BrokerError>> + Send;

    /// Forgets instances not seen alive for `remove_after`, then every schedule id that no
    /// remaining instance registers: its registry entry and its fire state (last fired, last
    /// task, first registration). `full` also checks entries that no instance record names
    /// (left by older versions); otherwise that O(entries) pass runs only when an instance was
    /// forgotten. Returns the ids removed.
    fn prune_schedules(
        &self,
        remove_after: Duration,
        full: bool,
    ) -> impl Future<Output = Result<Vec<String>, BrokerError>> + Send;

    /// The cluster-wide scheduler counters.
    fn scheduler_metrics(
        &self,
    ) -> impl Future<Output = Result<SchedulerMetrics, BrokerError>> + Send;
}
