//! Operator actions on tasks and queues.

use std::future::Future;

use crate::{
    ActionOutcome, BrokerError, BulkReport, HistoryPoint, HistorySpan, Priority, QueueName,
    QueueStats, TaskAction, TaskEdit, TaskFilter, TaskPage, TaskState,
};

/// Operator actions for the inspector, CLI and console: task actions (one task or all tasks of
/// a state matching a filter, in bounded chunks), paged listing by cursor, queue deletion and
/// history. (The worker's side of cancellation is [`Maintain::cancel_requested`](crate::Maintain::cancel_requested).)
pub trait Operate: Send + Sync {
    /// Applies `action` to task `id` in one atomic script. Re-sending is harmless (answers
    /// [`ActionOutcome::Already`] or [`ActionOutcome::NotFound`] after a first run did it).
    fn act(
        &self,
        queue: &QueueName,
        id: &str,
        action: TaskAction,
    ) -> impl Future<Output = Result<ActionOutcome, BrokerError>> + Send;

    /// Applies `action` to each task of `ids`, in as few atomic script calls as keep each call
    /// short (the store's choice; a store without batches makes one [`Operate::act`] call per task). One
    /// outcome per id, in order, each as [`Operate::act`] answers it. An error stops at the
    /// call that failed: the calls before it took effect, and acting again is harmless (they
    /// answer [`ActionOutcome::Already`] or [`ActionOutcome::NotFound`]).
    fn act_many(
        &self,
        queue: &QueueName,
        ids: &[String],
        action: TaskAction,
    ) -> impl Future<Output = Result<Vec<ActionOutcome>, BrokerError>> + Send;

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

    /// Gives task `id` priority level `priority`, atomically. A waiting (pending) task moves to
    /// the end of its new level's waiting tasks; a scheduled, retrying or archived task keeps
    /// the level for when it runs. An active or completed task, and one a worker has fetched
    /// (started or not: a new delivery could run it twice), is [`ActionOutcome::Refused`] as
    /// active and nothing changes.
    /// [`ActionOutcome::Already`] when the task already has that level (also for a call re-sent
    /// after a lost reply).
    fn prioritize(
        &self,
        queue: &QueueName,
        id: &str,
        priority: Priority,
    ) -> impl Future<Output = Result<ActionOutcome, BrokerError>> + Send;

    /// Edits waiting task `id` (pending, scheduled or retry) as `edit` says, in one atomic
    /// script: its payload (the kind and every other envelope field kept), its run time (a
    /// pending task with a time in the future becomes scheduled; a scheduled or retry task is
    /// re-scored in its set; a time now or past makes it due now) and its level (as
    /// [`Operate::prioritize`]). A pending task whose payload or level changes gets a new
    /// delivery: at the end of its level, or at its own place inside its tenant. A task a
    /// worker has fetched, started or not, is refused as active: its handler may have run
    /// already (the start mark is skipped for a handler done within the mark window). The
    /// unique lock, if any, is left as it is.
    ///
    /// Answers [`ActionOutcome::Done`], [`ActionOutcome::Already`] when the task already is as
    /// asked (also for a call re-sent after a lost reply: the re-send leaves the same state),
    /// [`ActionOutcome::NotFound`], or [`ActionOutcome::Refused`] with the state of a task that
    /// already started (active), finished (completed) or died (archived: run it first), and
    /// nothing changes. Errors: [`BrokerError::PayloadTooLarge`] over the payload limit,
    /// [`BrokerError::InvalidOption`] for an empty edit or a typed payload
    /// ([`TaskEdit::args`]) of another kind than the task's, [`BrokerError::InvalidTaskId`].
    fn edit(
        &self,
        queue: &QueueName,
        id: &str,
        edit: &TaskEdit,
    ) -> impl Future<Output = Result<ActionOutcome, BrokerError>> + Send;
}
