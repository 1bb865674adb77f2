//! Background upkeep of queues: forwarding, recovery, leases, trimming and signals.

use std::future::Future;
use std::time::Duration;

use crate::{
    BrokerError, DeadTask, Forwarded, ProgressUpdate, QueueName, Reclaimed, ServerRecord, Signals,
    TimingDelta,
};

/// Background upkeep: forwarding, recovery, leases and trimming. No method has a default body:
/// a store states every answer, and a wrapper forwards each ([`crate::forward!`]).
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

    /// Keeps deliveries alive: refreshes the leases `consumer` holds of `msg_ids` and, in the
    /// same atomic step, stores each of `updates` as its task's last progress
    /// ([`crate::TaskProgress`], kept for [`crate::PROGRESS_TTL`]) when `consumer` still holds
    /// its delivery. Returns the entry ids it still holds: an id missing from the answer was
    /// reclaimed (its task must be cancelled), and its update, if any, was dropped. Every
    /// update's `msg_id` must be among `msg_ids`; `updates` may be empty (the heartbeat's
    /// refresh). Re-sending is harmless: the last value wins.
    fn keep_alive(
        &self,
        queue: &QueueName,
        consumer: &str,
        msg_ids: &[String],
        updates: &[ProgressUpdate],
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

    /// Adds a worker's run times and queue waits of `queue` to the store's per-minute counts
    /// (kept [`crate::TIMINGS_KEPT`]), in one round trip. Not idempotent: a call re-sent after a
    /// lost reply may count twice, which a chart of quantiles does not show.
    fn record_timings(
        &self,
        queue: &QueueName,
        deltas: &[TimingDelta],
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
    /// scheduled and retry sets is due, so a caller can sleep until then. A store that cannot
    /// tell answers `next: None`, unless its [`Maintain::signals`] pushes due times (a caller
    /// with signals trusts `None` to mean both sets are empty).
    fn forward_due_next(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Forwarded, BrokerError>> + Send;

    /// Subscribes to the namespace's pushed [`Signal`](crate::Signal)s: earlier due times in a scheduled or
    /// retry set, pause changes, settings changes, and a [`Signal::Resync`](crate::Signal::Resync) after each (re)subscription. None:
    /// the store pushes nothing, and a worker polls at its intervals.
    fn signals(&self) -> impl Future<Output = Result<Option<Signals>, BrokerError>> + Send;

    /// Which of `msg_ids` (stream entry ids of deliveries this worker runs) an operator asked
    /// to cancel ([`TaskAction::Cancel`](crate::TaskAction::Cancel)). A worker polls it for the tasks it runs, a few times
    /// a second. A store without operator cancellation answers none.
    fn cancel_requested(
        &self,
        queue: &QueueName,
        msg_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>, BrokerError>> + Send;

    /// Up to about `limit` tasks of `queue` that [`Maintain::reclaim_idle`] dead-lettered and
    /// whose entry was not yet acknowledged with [`Maintain::ack_reclaimed`]: the same step that
    /// dead-letters a task records it in an outbox, so a recoverer that died before reporting
    /// it to its group (or whose reply was lost) leaves it for the next pass of any recoverer.
    /// It includes the tasks of a reclaim that is still being reported elsewhere (reports must
    /// be idempotent). A store without an outbox answers none.
    fn reclaimed_dead(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadTask>, BrokerError>> + Send;

    /// Removes these task ids from the outbox of [`Maintain::reclaimed_dead`] once their
    /// reports are done; returns how many were there. Removing an id twice is harmless.
    fn ack_reclaimed(
        &self,
        queue: &QueueName,
        task_ids: &[String],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;
}
