//! The worker's capability: fetching deliveries and settling them.

use std::future::Future;
use std::time::Duration;

use crate::{
    BackoffOutcome, BackoffScope, BrokerError, CancelOutcome, Completion, DeadOutcome, Fetched,
    Interrupt, LeaseId, QueueName, SnoozeOutcome, StartOutcome,
};

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

    /// Acknowledges succeeded tasks of `queue` and reads up to `count` new ones for `consumer`
    /// without waiting, in one round trip where the store can (a store without one makes two:
    /// [`Consume::complete`], then [`Consume::fetch`] with no block). Returns how many were
    /// settled and what was fetched, with both methods' guarantees: stale leases are skipped, a
    /// call re-sent after a lost reply settles nothing twice and returns the same deliveries.
    /// `count` 0 only settles. A store may let the queue's processed counters lag a busy
    /// consumer a little (see the store's docs); they are exact once a call takes nothing.
    fn complete_and_fetch(
        &self,
        reader: &mut Self::Reader,
        queue: &QueueName,
        consumer: &str,
        done: &[Completion],
        count: usize,
    ) -> impl Future<Output = Result<(u64, Fetched), BrokerError>> + Send;

    /// Records a failed attempt and schedules the next one `delay` from now (by the store's
    /// clock). False when the lease was stale; a re-sent call whose first run took effect answers
    /// true.
    fn retry(
        &self,
        lease: &LeaseId,
        delay: Duration,
        error: &str,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Puts a running task back for `delay` (by the store's clock) without spending an attempt
    /// or recording an error: its handler asked to be run later. The task waits as a scheduled
    /// one and keeps its level and tenant; its snooze count goes up by one, unless it has
    /// reached `max_snoozes` already ([`SnoozeOutcome::TooMany`]: nothing changed). A re-sent
    /// call whose first run took effect answers what that run did.
    fn snooze(
        &self,
        lease: &LeaseId,
        delay: Duration,
        max_snoozes: u32,
    ) -> impl Future<Output = Result<SnoozeOutcome, BrokerError>> + Send;

    /// Blocks `scope` (the task's rate key, or its whole queue) cluster-wide until `delay` from
    /// now (store clock; clamped to [`MIN_BACKOFF`](crate::MIN_BACKOFF)..=
    /// [`MAX_BACKOFF`](crate::MAX_BACKOFF)) and puts the running task back as scheduled, due
    /// at the block's end plus a jitter ([`backoff_jitter`](crate::backoff_jitter)), in one
    /// atomic step: no attempt spent, no error recorded, not counted as a snooze; a tenant
    /// task's slot is freed. A block only extends: one that already ends later is kept. A
    /// re-sent call whose first run took effect answers what that run did.
    fn back_off(
        &self,
        lease: &LeaseId,
        scope: &BackoffScope,
        delay: Duration,
    ) -> impl Future<Output = Result<BackoffOutcome, BrokerError>> + Send;

    /// Dead-letters the task (archive, or discard when it asked so) and releases its unique lock.
    /// `count_attempt` says whether this failure counts as an attempt. A re-sent call whose
    /// first run took effect answers what that run did (never `Stale`).
    fn dead_letter(
        &self,
        lease: &LeaseId,
        error: &str,
        count_attempt: bool,
    ) -> impl Future<Output = Result<DeadOutcome, BrokerError>> + Send;

    /// Ends the task as cancelled, because its handler said it should not run (any more):
    /// neither a failure nor a dead letter. It leaves the stream for the queue's cancelled set
    /// ([`TaskState::Cancelled`](crate::TaskState::Cancelled)) with `reason`, and its unique or
    /// deduplication lock is released, as when it finishes. No attempt is counted. A re-sent
    /// call whose first run took effect answers what that run did (never `Stale`).
    fn cancel(
        &self,
        lease: &LeaseId,
        reason: &str,
    ) -> impl Future<Output = Result<CancelOutcome, BrokerError>> + Send;

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
    ) -> impl Future<Output = Result<Option<Vec<(usize, Fetched)>>, BrokerError>> + Send;

    /// A handle that ends a blocking read in flight on `reader` early, as a timeout would (so
    /// nothing is taken or stranded); None when the store has none (the default), or when it
    /// refuses this connection the means (Redis: an ACL user without `CLIENT UNBLOCK`). The
    /// worker then reads no queues together ([`Consume::watch`]): each queue blocks on its own
    /// reader, so a task never waits for another queue's block to end.
    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send;
}
