//! Reading and awaiting a task's result.

use std::future::Future;
use std::time::Duration;

use crate::{BrokerError, QueueName, TaskOutcome, TaskProgress};

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

    /// The last progress task `id` of `queue` reported (`Context::progress` in the worker),
    /// kept for [`crate::PROGRESS_TTL`] after it was reported, also once the task ended; None
    /// when it reported none (or that long ago).
    fn progress(
        &self,
        queue: &QueueName,
        id: &str,
    ) -> impl Future<Output = Result<Option<TaskProgress>, BrokerError>> + Send;
}
