//! The read side for dashboards and command lines.

use std::future::Future;

use crate::{
    BrokerError, LeaderInfo, QueueName, QueueStats, ServerRecord, TaskRecord, TaskState,
    TimingMinute,
};

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

    /// The ids of the servers alive now, without their records: what a worker checks every few
    /// seconds to notice a server that went away (a store without a cheaper way answers the
    /// ids of [`Inspect::servers`]).
    fn live_servers(&self) -> impl Future<Output = Result<Vec<String>, BrokerError>> + Send;

    /// The run times and queue waits of `queue` per kind for each minute from `from_ms` to
    /// `to_ms` (unix ms, both rounded down to their minute) that holds any, oldest first, in
    /// one round trip. At most [`crate::MAX_TIMING_MINUTES`] minutes
    /// ([`BrokerError::InvalidOption`] beyond). A field that does not parse is skipped.
    fn timings(
        &self,
        queue: &QueueName,
        from_ms: i64,
        to_ms: i64,
    ) -> impl Future<Output = Result<Vec<TimingMinute>, BrokerError>> + Send;

    /// The scheduler leader now, if any instance holds the leader lock: the same answer as
    /// [`Schedules::leader`](crate::Schedules::leader), offered here so that an inspector needs only this trait (named
    /// apart from it so that a type with both traits in scope has no ambiguous `leader`).
    fn scheduler_leader(
        &self,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, BrokerError>> + Send;
}
