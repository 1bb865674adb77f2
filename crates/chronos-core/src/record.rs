//! What the read side shows of a queue and of one task.

use crate::{DecodeError, TaskEnvelope, TaskState};

/// Counts of one queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// Per priority level, most urgent first, for a queue whose tasks use levels other than
    /// the default (empty otherwise): `pending` and `active` above are their sums.
    pub levels: Vec<LevelStats>,
    /// Enqueues deduplicated since the queue was created ([`crate::EnqueueOptions::dedup`]).
    pub deduplicated: DedupCounts,
    /// Ended by their handler as cancelled and kept ([`TaskState::Cancelled`]).
    pub cancelled: u64,
}

/// Enqueues that created no task because a task held their key, by mode
/// ([`QueueStats::deduplicated`]). A replace or debounce counts when it reached its waiting
/// holder (a call re-sent after a lost reply may count twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DedupCounts {
    /// Answered `Duplicate` by [`crate::DedupMode::Reject`].
    pub reject: u64,
    /// Answered `Duplicate` by [`crate::DedupMode::Throttle`].
    pub throttle: u64,
    /// Answered `Replaced` ([`crate::DedupMode::Replace`]).
    pub replace: u64,
    /// Answered `Extended` ([`crate::DedupMode::Debounce`]).
    pub debounce: u64,
}

impl DedupCounts {
    /// The counts with their mode names (`reject`, `throttle`, `replace`, `debounce`), as
    /// metrics label them.
    pub fn by_mode(&self) -> [(&'static str, u64); 4] {
        [
            ("reject", self.reject),
            ("throttle", self.throttle),
            ("replace", self.replace),
            ("debounce", self.debounce),
        ]
    }
}

/// The tasks of one priority level of a queue ([`QueueStats::levels`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// The level.
    pub priority: crate::Priority,
    /// Waiting in the level's stream.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// How long the oldest waiting task of the level has waited (ms, by the store's clock);
    /// None when none waits.
    pub oldest_pending_ms: Option<u64>,
}

/// A task as the inspector sees it.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    /// Task id: names the task even when its envelope does not decode (to delete or requeue it).
    pub id: String,
    /// Current state.
    pub state: TaskState,
    /// Its priority level inside the queue (as changed by an operator, if one did).
    pub priority: crate::Priority,
    /// Times its handler snoozed it (no attempt spent each time; 0 for most tasks).
    pub snoozes: u32,
    /// The envelope, or why it did not decode.
    pub envelope: Result<TaskEnvelope, DecodeError>,
    /// Why and when its handler cancelled it (a [`TaskState::Cancelled`] task only).
    pub cancelled: Option<Cancellation>,
    /// The last progress its handler reported ([`crate::Client::progress`]); read by
    /// [`crate::Inspect::task`] only (a listing leaves it None).
    pub progress: Option<crate::TaskProgress>,
    /// Its attempt history, oldest first (the last 25 attempts that ended: how, when, on which
    /// worker, for how long, with what error); read by [`crate::Inspect::task`] only (a listing
    /// leaves it empty). A task with no record (a plain task that has not failed) has none.
    pub attempts: Vec<crate::AttemptRow>,
    /// The time that matters in its state, its score in the state's sorted set (unix ms): when
    /// a scheduled task runs or a retrying one tries again, when an archived or cancelled task
    /// ended there, until when a completed one is kept. Filled by the listings that read the
    /// set with its scores (the inspector's paged listing); None for pending and active tasks
    /// and wherever it was not read.
    pub state_time_ms: Option<i64>,
}

/// Why and when a task was cancelled by its handler ([`TaskRecord::cancelled`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cancellation {
    /// The handler's reason.
    pub reason: String,
    /// When (unix ms, by the store's clock).
    pub at_ms: i64,
}
