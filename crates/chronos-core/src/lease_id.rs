//! The identity of one delivery ([`LeaseId`]): what every call about a running task names. A
//! leaf, so that what a fetch returns and how a delivery ends both name it without naming each
//! other.

use crate::QueueName;
#[cfg(doc)]
use crate::TaskEnvelope;

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
