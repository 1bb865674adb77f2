//! What the read side shows of a queue and of one task.

use crate::{DecodeError, TaskEnvelope, TaskState};

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
