//! Moving workflows on: a chain's next step, a group's members and callback.

use std::future::Future;
use std::time::Duration;

use crate::{
    BrokerError, ChainInfo, ChainStatus, GroupCreated, GroupRecord, GroupState, MemberOutcome,
    MemberPage, MemberReport, NewTask, QueueName,
};

/// What moves chains and groups on. Implemented for `RedisBroker`, and for `&T`,
/// `Arc<T>` and `Box<T>`. The worker calls the chain and member methods only for tasks that
/// carry a [`Flow`](crate::Flow), before it acknowledges or dead-letters them; every method is idempotent.
/// No method has a default body: a store without workflows answers
/// [`BrokerError::Unsupported`] in each, in so many words, and a wrapper forwards them
/// ([`crate::forward!`]).
pub trait Flows: Send + Sync {
    /// Enqueues a chain's next step (built by [`chain_successor`](crate::chain_successor)) unless it was enqueued
    /// before: true when written now, false when it had been (the step ran twice, or the call
    /// was re-sent), even if the successor already completed and was deleted.
    fn enqueue_successor(
        &self,
        task: NewTask,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Records that chain `chain_id` finished (its last step, in `queue`, succeeded) with
    /// `result`, kept for `keep`.
    fn finish_chain(
        &self,
        queue: &QueueName,
        chain_id: &str,
        result: Option<Vec<u8>>,
        keep: Duration,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Where a chain stands, from its steps' records.
    fn chain_state(
        &self,
        chain: &ChainInfo,
    ) -> impl Future<Output = Result<ChainStatus, BrokerError>> + Send;

    /// Creates a group's record. Re-creating the same group (same id, count and callback) is a
    /// no-op; another definition under a used id is [`BrokerError::TaskIdConflict`].
    fn open_group(
        &self,
        group: &GroupRecord,
    ) -> impl Future<Output = Result<GroupCreated, BrokerError>> + Send;

    /// Counts one member (once, however often it is reported) and, when it is the last, enqueues
    /// the callback into the callback's queue in the same atomic step (exactly once).
    fn report_member(
        &self,
        report: &MemberReport,
    ) -> impl Future<Output = Result<MemberOutcome, BrokerError>> + Send;

    /// A group's record, or None when it does not exist (or expired).
    fn group_state(
        &self,
        queue: &QueueName,
        group: &str,
    ) -> impl Future<Output = Result<Option<GroupState>, BrokerError>> + Send;

    /// One page of about `count` member results of a group, from `cursor` (0: the start).
    fn group_results(
        &self,
        queue: &QueueName,
        group: &str,
        cursor: u64,
        count: usize,
    ) -> impl Future<Output = Result<MemberPage, BrokerError>> + Send;
}
