//! [`Operate`] over Redis: the operator's door. Each action is done in its own room: task
//! actions one by one and in chunks (`actions.rs`), listing by cursor (`scan.rs`), queue
//! deletion (`queue_delete.rs`), history (`history.rs`), edits and levels (`edit.rs`).

use super::RedisBroker;
use crate::{
    ActionOutcome, BrokerError, BulkReport, HistoryPoint, HistorySpan, Inspect, Operate, Priority,
    QueueName, QueueStats, TaskAction, TaskEdit, TaskFilter, TaskPage, TaskState,
};

impl Operate for RedisBroker {
    async fn act(
        &self,
        queue: &QueueName,
        id: &str,
        action: TaskAction,
    ) -> Result<ActionOutcome, BrokerError> {
        self.act_one(queue, id, action).await
    }

    /// The tasks' unique locks are read first (one pipelined read per task, for an archive or
    /// a delete, which release them), then the actions go in calls that adapt their size as
    /// [`Operate::act_all`]'s do: no call holds Redis much longer than 5 ms.
    async fn act_many(
        &self,
        queue: &QueueName,
        ids: &[String],
        action: TaskAction,
    ) -> Result<Vec<ActionOutcome>, BrokerError> {
        self.act_each(queue, ids, action).await
    }

    async fn act_all(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
        chunk: usize,
    ) -> Result<BulkReport, BrokerError> {
        if !action.sources().contains(&state) {
            return Err(BrokerError::InvalidOption(format!(
                "{action:?} does not take tasks in state {}",
                state.as_str()
            )));
        }
        self.bulk(queue, state, filter, action, chunk, false).await
    }

    async fn list_page(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, BrokerError> {
        self.task_page(queue, state, filter, cursor, limit).await
    }

    async fn delete_queue(&self, queue: &QueueName, force: bool) -> Result<u64, BrokerError> {
        self.remove_queue(queue, force).await
    }

    async fn history(
        &self,
        queue: &QueueName,
        span: HistorySpan,
    ) -> Result<Vec<HistoryPoint>, BrokerError> {
        match span {
            HistorySpan::Minutes => self.history_minutes(queue).await,
            HistorySpan::Days => self.history_days(queue).await,
        }
    }

    async fn all_queue_stats(&self) -> Result<Vec<(QueueName, QueueStats)>, BrokerError> {
        let queues = self.queues().await?;
        let stats = futures::future::join_all(
            queues
                .iter()
                .map(|q| async move { self.queue_stats(q).await }),
        )
        .await;
        queues
            .into_iter()
            .zip(stats)
            .map(|(q, s)| s.map(|s| (q, s)))
            .collect()
    }

    async fn prioritize(
        &self,
        queue: &QueueName,
        id: &str,
        priority: Priority,
    ) -> Result<ActionOutcome, BrokerError> {
        self.prioritize_task(queue, id, priority).await
    }

    async fn edit(
        &self,
        queue: &QueueName,
        id: &str,
        edit: &TaskEdit,
    ) -> Result<ActionOutcome, BrokerError> {
        self.edit_task(queue, id, edit).await
    }
}
