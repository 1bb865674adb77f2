//! The producer's capability: writing new tasks.

use std::future::Future;

use crate::{BrokerError, NewTask, TaskInfo};

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
