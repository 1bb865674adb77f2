//! Capability traits of a broker. The worker and the scheduler ask only for the capabilities they
//! use, so a store that cannot do everything (or a wrapper that adds metrics or faults) still fits.

use std::future::Future;
use std::time::Duration;

use crate::{
    BrokerError, DecodeError, FireOutcome, FireState, Forwarded, Interrupt, LeaderInfo, NewTask,
    PutOutcome, QueueName, ScheduleDef, ScheduleEntry, SchedulerMetrics, ServerRecord, Signals,
    StoredDef, TaskEnvelope, TaskInfo, TaskOutcome, TaskState, Trigger,
};

/// Identifies one delivery of a task: what a worker needs to settle it. Settling with a stale
/// lease (the task was reclaimed and delivered again) is a no-op, never a double transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseId {
    /// Queue of the task.
    pub queue: QueueName,
    /// Task id.
    pub task_id: String,
    /// Stream entry id of this delivery.
    pub msg_id: String,
    /// The task's unique key (the content hash of [`TaskEnvelope::unique_key`]; None for a task
    /// that is not unique, or whose envelope did not decode and was not started yet). Settling
    /// releases the lock only when it is named here: a script touches only the keys its caller
    /// declared.
    pub unique_key: Option<String>,
}

impl LeaseId {
    /// The lease of delivery `msg_id` of task `task_id` in `queue`, with no unique key known.
    pub fn new(queue: QueueName, task_id: impl Into<String>, msg_id: impl Into<String>) -> Self {
        Self {
            queue,
            task_id: task_id.into(),
            msg_id: msg_id.into(),
            unique_key: None,
        }
    }

    /// True for the delivery of a plain task: one stored as its stream entry alone, with no
    /// task record (no explicit id, no unique key, no retention, no rate key, no delay at
    /// enqueue, and not failed yet), whose task id is that entry's id. Settling it costs an
    /// ack and nothing more; a retry, dead letter or reclaim first gives it a record, and its
    /// later deliveries are not plain.
    pub fn is_plain(&self) -> bool {
        self.task_id == self.msg_id
    }
}

/// What the task record says about a delivery at its start, merged into the envelope the worker
/// read with the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Failed attempts so far.
    pub retried: u32,
    /// Retries allowed after the first attempt (from the record, so it is known even when the
    /// envelope does not decode).
    pub max_retry: u32,
    /// Message of the last failure.
    pub last_error: Option<String>,
    /// When the last failure happened (unix ms).
    pub last_failed_at_ms: Option<i64>,
    /// The task's unique key (content hash), if it holds a lock.
    pub unique_key: Option<String>,
}

/// What [`Consume::start`] found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// Marked active: the handler may run. From now on a lost worker costs an attempt.
    Started(Attempt),
    /// The delivery is no longer current (the task was deleted, settled or reclaimed): do not
    /// run it. Its stream entry was removed.
    Lost,
    /// The task record is corrupt (the reason says how); nothing was written. Dead-letter it
    /// without counting an attempt.
    Corrupt(String),
}

/// A task handed to a worker. The envelope is a `Result` so that a task whose bytes do not decode
/// still comes with a lease and can be dead-lettered instead of blocking the queue.
#[derive(Debug, Clone)]
pub struct Lease {
    /// What settles this delivery.
    pub id: LeaseId,
    /// The decoded envelope (with the current attempt count and last error), or why it failed.
    pub envelope: Result<TaskEnvelope, DecodeError>,
}

/// A batch of deliveries read from one queue.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Tasks to run.
    pub leases: Vec<Lease>,
    /// Stream entries that carried no live task (deleted task, foreign entry); they were acked
    /// and removed so they never block the queue.
    pub dropped: usize,
}

/// A succeeded task to acknowledge.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The delivery.
    pub lease: LeaseId,
    /// Keep the task as completed for this long (None: delete at once).
    pub retention: Option<Duration>,
    /// The handler's result (MessagePack), kept in the task's record while it is retained, so
    /// that [`crate::Client::result`] can read it. Ignored without a retention.
    pub result: Option<Vec<u8>>,
}

/// What a dead-letter call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadOutcome {
    /// Moved to the archive.
    Archived,
    /// Dropped, as the task asked.
    Discarded,
    /// The lease was stale: nothing changed.
    Stale,
}

/// A task the recoverer dead-lettered.
#[derive(Debug, Clone)]
pub struct DeadTask {
    /// Task id.
    pub task_id: String,
    /// The envelope, or why it did not decode.
    pub envelope: Result<TaskEnvelope, DecodeError>,
    /// Dropped rather than archived.
    pub discarded: bool,
}

/// What one reclaim pass did.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Tasks put back in the stream for another attempt.
    pub requeued: u64,
    /// Tasks that had no attempt left.
    pub dead: Vec<DeadTask>,
}

/// Counts of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Waiting in the stream.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// Delayed.
    pub scheduled: u64,
    /// Waiting for a retry.
    pub retry: u64,
    /// Dead-lettered and kept.
    pub archived: u64,
    /// Completed and kept for retention.
    pub completed: u64,
    /// Tasks completed since the queue was created.
    pub processed: u64,
    /// Failed attempts since the queue was created.
    pub failed: u64,
}

/// A task as the inspector sees it.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    /// Task id: names the task even when its envelope does not decode (to delete or requeue it).
    pub id: String,
    /// Current state.
    pub state: TaskState,
    /// The envelope, or why it did not decode.
    pub envelope: Result<TaskEnvelope, DecodeError>,
}

/// Writes new tasks.
pub trait Enqueue: Send + Sync {
    /// Writes `tasks` (any mix of queues). The outer error means nothing may have been written
    /// (Redis unreachable); the inner results say, per task and in order, whether it was
    /// enqueued or refused (duplicate unique task, id conflict). Re-sending the same batch is
    /// safe: a task already stored with the same bytes reports success.
    fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> impl Future<Output = Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError>> + Send;
}

/// Reads what became of a task and waits for it: the producer's side of results.
pub trait Results: Send + Sync {
    /// Where task `id` of `queue` stands now. A succeeded task is known (with its result) only
    /// while it is retained ([`crate::EnqueueOptions::retention`]); after that, or without a
    /// retention, it is [`TaskOutcome::NotFound`].
    fn outcome(
        &self,
        queue: &QueueName,
        id: &str,
    ) -> impl Future<Output = Result<TaskOutcome, BrokerError>> + Send;

    /// Waits until task `id` of `queue` has a final outcome, or `timeout` passed (then answers
    /// its [`TaskOutcome::Unfinished`] state). Woken by the store when the task succeeds or is
    /// dead-lettered, not by polling; a wake-up lost on a reconnect costs at most a second.
    fn wait_outcome(
        &self,
        queue: &QueueName,
        id: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<TaskOutcome, BrokerError>> + Send;
}

/// Delivers tasks to workers and settles them.
pub trait Consume: Send + Sync {
    /// A connection reserved for blocking reads (a blocking read stalls every other command on
    /// its connection, so it never shares one).
    type Reader: Send + 'static;

    /// Opens a reader.
    fn open_reader(&self) -> impl Future<Output = Result<Self::Reader, BrokerError>> + Send;

    /// Closes a reader (waits at most for its current block to end).
    fn close_reader(&self, reader: Self::Reader) -> impl Future<Output = ()> + Send;

    /// Makes sure the queue can be consumed (creates its stream and group when missing).
    fn ensure_queue(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Reads up to `count` new tasks of `queue` for `consumer`, waiting up to `block` when none
    /// is ready (`Duration::ZERO`: return at once). Each returned lease is held by `consumer` until
    /// it is settled or reclaimed, but it is not an attempt yet: call [`Consume::start`] right
    /// before running it. A delivery fetched and never started (a crash, a lost reply) is
    /// re-delivered later without spending an attempt. A fetch that finds work at once and is
    /// re-sent by the client after a lost reply returns the same deliveries again; the reply of
    /// a blocking wait lost on a reconnect leaves its deliveries to the recoverer (no attempt
    /// spent, re-delivered after `recover_min_idle`).
    fn fetch(
        &self,
        reader: &mut Self::Reader,
        queue: &QueueName,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Fetched, BrokerError>> + Send;

    /// Marks fetched deliveries of one queue as started, in one round trip; one outcome per
    /// lease, in order. Re-sending is harmless (a started delivery stays started).
    fn start(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> impl Future<Output = Result<Vec<StartOutcome>, BrokerError>> + Send;

    /// Acknowledges succeeded tasks of one queue in one round trip; returns how many were
    /// settled (stale leases are skipped).
    fn complete(
        &self,
        queue: &QueueName,
        done: &[Completion],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Records a failed attempt and schedules the next one `delay` from now (by the store's
    /// clock). False when the lease was stale; a re-sent call whose first run took effect answers
    /// true.
    fn retry(
        &self,
        lease: &LeaseId,
        delay: Duration,
        error: &str,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Dead-letters the task (archive, or discard when it asked so) and releases its unique lock.
    /// `count_attempt` says whether this failure counts as an attempt. A re-sent call whose
    /// first run took effect answers what that run did (never `Stale`).
    fn dead_letter(
        &self,
        lease: &LeaseId,
        error: &str,
        count_attempt: bool,
    ) -> impl Future<Output = Result<DeadOutcome, BrokerError>> + Send;

    /// Puts fetched but unstarted tasks back at the end of their queue without counting an
    /// attempt. Returns how many were re-queued.
    fn requeue(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Waits up to `block` for new tasks of any of `queues` with one blocking read on `reader`,
    /// taking up to `count` per queue, with the guarantees of a blocking [`Consume::fetch`]
    /// (each lease held by `consumer`, not an attempt yet; a reply lost on a reconnect leaves
    /// its deliveries to the recoverer, unspent). Returns `(index into queues, fetched)` for
    /// each queue that had something. An empty `queues` returns at once, so a caller can probe
    /// support. None: this store cannot read these queues together (the default, and Redis
    /// Cluster, where streams of different slots cannot share a read): block per queue with
    /// [`Consume::fetch`] instead.
    fn watch(
        &self,
        reader: &mut Self::Reader,
        queues: &[QueueName],
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Option<Vec<(usize, Fetched)>>, BrokerError>> + Send {
        let _ = (reader, queues, consumer, count, block);
        async { Ok(None) }
    }

    /// A handle that ends a blocking read in flight on `reader` early, as a timeout would (so
    /// nothing is taken or stranded); None when the store has none (the default), or when it
    /// refuses this connection the means (Redis: an ACL user without `CLIENT UNBLOCK`). The
    /// worker then reads no queues together ([`Consume::watch`]): each queue blocks on its own
    /// reader, so a task never waits for another queue's block to end.
    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send {
        let _ = reader;
        async { None }
    }
}

/// Background upkeep: forwarding, recovery, leases and trimming.
pub trait Maintain: Send + Sync {
    /// Moves up to `limit` due delayed and retry tasks of `queue` (each set) into its stream.
    /// "Due" is decided by the store's clock, not the caller's.
    fn forward_due(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Reclaims up to `limit` deliveries idle longer than `min_idle`, wherever they are in the
    /// queue's pending list: each started one counts as a failed attempt and is re-queued or
    /// dead-lettered; one never started is re-queued without an attempt, three times per
    /// attempt, after which an unstarted loss counts as that attempt. Every task it
    /// dead-letters is also kept for [`Maintain::reclaimed_dead`] until acknowledged, so its
    /// group hears of it even when this answer is lost.
    fn reclaim_idle(
        &self,
        queue: &QueueName,
        min_idle: Duration,
        limit: usize,
    ) -> impl Future<Output = Result<Reclaimed, BrokerError>> + Send;

    /// Refreshes the leases `consumer` holds; returns the entry ids it still owns (an id missing
    /// from the answer was reclaimed, and its task must be cancelled).
    fn extend_leases(
        &self,
        queue: &QueueName,
        consumer: &str,
        msg_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>, BrokerError>> + Send;

    /// Removes expired retained tasks and archive entries older than `archive_max_age` or beyond
    /// `archive_max_len`, at most `limit` per kind of removal (one bounded chunk: call again
    /// while it returns more than zero to trim everything due). Returns how many tasks were
    /// removed from the completed and archived sets.
    fn trim(
        &self,
        queue: &QueueName,
        archive_max_age: Duration,
        archive_max_len: u64,
        limit: usize,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Consumers of the queue's group with their pending count and idle time (ms).
    fn consumers(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<Vec<(String, u64, u64)>, BrokerError>> + Send;

    /// Publishes (or refreshes) a server record that expires after `ttl` unless refreshed.
    fn publish_server(
        &self,
        record: &ServerRecord,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Withdraws a server record at once (clean shutdown).
    fn remove_server(&self, id: &str) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Deletes `consumer` from the queue's group, but only when it holds nothing (deleting a
    /// consumer drops its pending entries). True when it was deleted.
    fn remove_consumer(
        &self,
        queue: &QueueName,
        consumer: &str,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// [`Maintain::forward_due`], also telling when the earliest task left in the queue's
    /// scheduled and retry sets is due, so a caller can sleep until then. The default forwards
    /// and answers `next: None`; a store whose [`Maintain::signals`] pushes due times must
    /// implement it (a caller with signals trusts `None` to mean both sets are empty).
    fn forward_due_next(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Forwarded, BrokerError>> + Send {
        async move {
            let moved = self.forward_due(queue, limit).await?;
            Ok(Forwarded { moved, next: None })
        }
    }

    /// Subscribes to the namespace's pushed [`Signal`](crate::Signal)s: earlier due times in a scheduled or
    /// retry set, pause changes, and a [`Signal::Resync`](crate::Signal::Resync) after each (re)subscription. None
    /// (the default): the store pushes nothing, and a worker polls at its intervals.
    fn signals(&self) -> impl Future<Output = Result<Option<Signals>, BrokerError>> + Send {
        async { Ok(None) }
    }

    /// Which of `msg_ids` (stream entry ids of deliveries this worker runs) an operator asked
    /// to cancel ([`TaskAction::Cancel`]). A worker polls it for the tasks it runs, a few times
    /// a second. The default answers none: a store without operator cancellation, or a
    /// wrapper written before it existed (a wrapper should forward it).
    fn cancel_requested(
        &self,
        queue: &QueueName,
        msg_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>, BrokerError>> + Send {
        let _ = (queue, msg_ids);
        async { Ok(Vec::new()) }
    }

    /// Up to about `limit` tasks of `queue` that [`Maintain::reclaim_idle`] dead-lettered and
    /// whose entry was not yet acknowledged with [`Maintain::ack_reclaimed`]: the same step that
    /// dead-letters a task records it in an outbox, so a recoverer that died before reporting
    /// it to its group (or whose reply was lost) leaves it for the next pass of any recoverer.
    /// It includes the tasks of a reclaim that is still being reported elsewhere (reports must
    /// be idempotent). The default answers none: a store without an outbox, or a wrapper
    /// written before it existed (a wrapper should forward it).
    fn reclaimed_dead(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadTask>, BrokerError>> + Send {
        let _ = (queue, limit);
        async { Ok(Vec::new()) }
    }

    /// Removes these task ids from the outbox of [`Maintain::reclaimed_dead`] once their
    /// reports are done; returns how many were there. Removing an id twice is harmless.
    fn ack_reclaimed(
        &self,
        queue: &QueueName,
        task_ids: &[String],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        let _ = (queue, task_ids);
        async { Ok(0) }
    }
}

/// Cluster coordination: locks and announcements.
pub trait Coordinate: Send + Sync {
    /// Takes `key` for `token` for `ttl` if nobody holds it. True when taken.
    fn try_lock(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Extends the lock if `token` still holds it. False when it does not.
    fn renew_lock(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Releases the lock if `token` holds it and publishes `token` on `channel` (when given).
    fn release_lock(
        &self,
        key: &str,
        token: &str,
        channel: Option<&str>,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;
}

/// Read access for the inspector, CLI and console, plus queue pausing.
pub trait Inspect: Send + Sync {
    /// Every queue ever enqueued to, sorted.
    fn queues(&self) -> impl Future<Output = Result<Vec<QueueName>, BrokerError>> + Send;

    /// Counts of one queue.
    fn queue_stats(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueStats, BrokerError>> + Send;

    /// One task by id, or None.
    fn task(
        &self,
        queue: &QueueName,
        id: &str,
    ) -> impl Future<Output = Result<Option<TaskRecord>, BrokerError>> + Send;

    /// Up to `limit` tasks of one state, oldest first, after skipping `offset`.
    fn list_tasks(
        &self,
        queue: &QueueName,
        state: TaskState,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskRecord>, BrokerError>> + Send;

    /// Pauses (true) or resumes (false) a queue: workers stop fetching from a paused queue.
    fn set_paused(
        &self,
        queue: &QueueName,
        paused: bool,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// The paused queues.
    fn paused_queues(&self) -> impl Future<Output = Result<Vec<QueueName>, BrokerError>> + Send;

    /// Records of the servers alive now (whose record has not expired), by id.
    fn servers(&self) -> impl Future<Output = Result<Vec<ServerRecord>, BrokerError>> + Send;

    /// The scheduler leader now, if any instance holds the leader lock: the same answer as
    /// [`Schedules::leader`], offered here so that an inspector needs only this trait (named
    /// apart from it so that a type with both traits in scope has no ambiguous `leader`).
    fn scheduler_leader(
        &self,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, BrokerError>> + Send;
}

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

/// Schedules stored in the broker at run time (added, changed, paused, resumed, removed and
/// run at once through an API or the CLI), next to those registered in code. The scheduler
/// watches [`ManageSchedules::schedule_revision`] and reloads the set when it moved.
///
/// Every change is one compare-and-set that also bumps the revision, in one atomic step; it
/// refuses an id that a schedule registered in code uses, so the two sources never share one.
/// Validation (spec, zone, queue, options) is the scheduler's job: use its typed front
/// (`chronos_scheduler::RuntimeSchedules`), not these methods, unless you wrap a broker.
///
/// The reads default to "none stored" and the writes to [`BrokerError::Unsupported`], so a
/// wrapper or store without runtime schedules is `impl ManageSchedules for W {}`, and its
/// schedulers fire the schedules registered in code only.
pub trait ManageSchedules: Send + Sync {
    /// The revision of the stored set: it grows with every change that wrote something (0
    /// before the first). One cheap read, for polling.
    fn schedule_revision(&self) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        async { Ok(0) }
    }

    /// Every stored definition, by id. Entries that do not decode are skipped (and logged).
    fn schedule_defs(&self) -> impl Future<Output = Result<Vec<StoredDef>, BrokerError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// One stored definition.
    fn schedule_def(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<StoredDef>, BrokerError>> + Send {
        let _ = id;
        async { Ok(None) }
    }

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
    ) -> impl Future<Output = Result<PutOutcome, BrokerError>> + Send {
        let _ = (id, expected, new);
        async { Err(BrokerError::Unsupported("runtime schedules")) }
    }

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
    ) -> impl Future<Output = Result<FireOutcome, BrokerError>> + Send {
        let _ = (queue, schedule_id, request, task);
        async { Err(BrokerError::Unsupported("runtime schedules")) }
    }

    /// Forgets the fire state (last fired, last task, first registration) of removed
    /// schedules of `queue`, so an id added again starts afresh.
    fn forget_fire_state(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> impl Future<Output = Result<(), BrokerError>> + Send {
        let _ = (queue, schedule_ids);
        async { Err(BrokerError::Unsupported("runtime schedules")) }
    }
}

/// Everything the worker runtime and the scheduler need; implemented for every type that has
/// all the capabilities.
pub trait Broker:
    Enqueue + Consume + Maintain + Coordinate + Inspect + Schedules + ManageSchedules + Clone + 'static
{
}

impl<T> Broker for T where
    T: Enqueue
        + Consume
        + Maintain
        + Coordinate
        + Inspect
        + Schedules
        + ManageSchedules
        + Clone
        + 'static
{
}

/// An inspector action on tasks (see [`Operate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskAction {
    /// Scheduled, retry or archived -> pending, at the end of the stream. A dead letter run
    /// again gets its attempts back.
    RunNow,
    /// Removes a task in any state but active, releasing its unique lock.
    Delete,
    /// Pending, scheduled or retry -> archived, releasing its unique lock.
    Archive,
    /// Asks the worker running an active task to cancel it: the handler's `Context` sees the
    /// cancellation within a second (a handler that ignores it keeps running, and its outcome
    /// settles the task as usual).
    Cancel,
}

impl TaskAction {
    /// The states this action takes a task from.
    pub fn sources(self) -> &'static [TaskState] {
        match self {
            TaskAction::RunNow => &[TaskState::Scheduled, TaskState::Retry, TaskState::Archived],
            TaskAction::Delete => &[
                TaskState::Pending,
                TaskState::Scheduled,
                TaskState::Retry,
                TaskState::Archived,
                TaskState::Completed,
            ],
            TaskAction::Archive => &[TaskState::Pending, TaskState::Scheduled, TaskState::Retry],
            TaskAction::Cancel => &[TaskState::Active],
        }
    }
}

/// What an action did to one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionOutcome {
    /// Done now.
    Done,
    /// The task already was where the action takes it (pending for run-now, archived for
    /// archive, a cancel already requested): nothing changed. A call re-sent by the client
    /// after a lost reply answers this.
    Already,
    /// No such task (for delete: possibly deleted by a first run of this same call).
    NotFound,
    /// The task's state does not allow the action (for example deleting an active task);
    /// nothing changed. Holds the state, when it is one this version knows.
    Refused(Option<TaskState>),
    /// The task record is corrupt; nothing changed.
    Corrupt,
}

/// Which tasks a listing or bulk action takes, besides their state. Empty matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks of this kind.
    pub kind: Option<String>,
    /// Only tasks whose payload, decoded for display (MessagePack as JSON, see
    /// [`crate::payload_json`]), contains this text.
    pub grep: Option<String>,
}

impl TaskFilter {
    /// True when no condition is set.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.grep.is_none()
    }

    /// True when `envelope` passes (an envelope that does not decode passes only an empty
    /// filter).
    pub fn matches(&self, envelope: &Result<TaskEnvelope, DecodeError>) -> bool {
        if self.is_empty() {
            return true;
        }
        let Ok(env) = envelope else { return false };
        if self.kind.as_deref().is_some_and(|k| k != env.kind) {
            return false;
        }
        match &self.grep {
            Some(text) => crate::payload_json(&env.payload).contains(text.as_str()),
            None => true,
        }
    }
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Tasks read in the state (each once).
    pub scanned: u64,
    /// Tasks that passed the filter.
    pub matched: u64,
    /// Tasks the action changed.
    pub done: u64,
    /// Matched tasks left alone: gone meanwhile, or moved to a state the action does not take.
    pub skipped: u64,
    /// Script calls made, each on at most one chunk of tasks.
    pub calls: u64,
}

/// One page of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskPage {
    /// The tasks, in the state's order (stream order, or by score: run-at, retry-at, died-at,
    /// expiry).
    pub tasks: Vec<TaskRecord>,
    /// Where the next page starts (pass it back as the cursor), or None at the end.
    pub next: Option<String>,
    /// Tasks read for this page (more than returned when a filter skipped some).
    pub scanned: u64,
}

/// One bucket of a queue's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryPoint {
    /// Start of the bucket (unix ms, UTC).
    pub start_ms: i64,
    /// Tasks completed in it.
    pub processed: u64,
    /// Failed attempts in it.
    pub failed: u64,
}

/// Which history of a queue to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistorySpan {
    /// Per minute, the last 24 hours (1,440 points).
    Minutes,
    /// Per UTC day, the last 90 days (90 points).
    Days,
}

/// Operator actions for the inspector, CLI and console: task actions (one task or all tasks of
/// a state matching a filter, in bounded chunks), paged listing by cursor, queue deletion and
/// history. (The worker's side of cancellation is [`Maintain::cancel_requested`].)
pub trait Operate: Send + Sync {
    /// Applies `action` to task `id` in one atomic script. Re-sending is harmless (answers
    /// [`ActionOutcome::Already`] or [`ActionOutcome::NotFound`] after a first run did it).
    fn act(
        &self,
        queue: &QueueName,
        id: &str,
        action: TaskAction,
    ) -> impl Future<Output = Result<ActionOutcome, BrokerError>> + Send;

    /// Applies `action` to every task of `queue` in `state` that passes `filter`, reading and
    /// acting on at most `chunk` tasks per script call (clamped to 1..=5,000), so no call holds
    /// Redis long: chunks also shrink below `chunk` while calls take longer than about 5 ms. Tasks that reach the state while it runs may or may not be included.
    /// Fails with [`BrokerError::InvalidOption`] when `state` is not one of
    /// [`TaskAction::sources`].
    fn act_all(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
        chunk: usize,
    ) -> impl Future<Output = Result<BulkReport, BrokerError>> + Send;

    /// Up to `limit` tasks of `queue` in `state` passing `filter`, from `cursor` (None: the
    /// start). Reads at most a bounded number of tasks per call (about 10 times `limit`, at
    /// least 1,000), never the whole queue: with a selective filter a page may come back short
    /// with a `next` cursor to go on from.
    fn list_page(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        cursor: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<TaskPage, BrokerError>> + Send;

    /// Deletes a queue: its tasks (only with `force`; otherwise a queue holding any task is
    /// refused with [`BrokerError::QueueNotEmpty`]), its keys, its pause flag and its entry in
    /// the queue list. Returns how many tasks were deleted. Workers still consuming the queue
    /// re-create it.
    fn delete_queue(
        &self,
        queue: &QueueName,
        force: bool,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// The queue's processed and failed counts per minute or per day, oldest first, ending
    /// with the current bucket.
    fn history(
        &self,
        queue: &QueueName,
        span: HistorySpan,
    ) -> impl Future<Output = Result<Vec<HistoryPoint>, BrokerError>> + Send;

    /// Counts of every queue, one script call per queue (all sent at once).
    fn all_queue_stats(
        &self,
    ) -> impl Future<Output = Result<Vec<(QueueName, QueueStats)>, BrokerError>> + Send;
}
