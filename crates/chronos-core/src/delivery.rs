//! What a worker holds while it runs a task: a delivery ([`Lease`], [`LeaseId`]), what a fetch
//! returns, how its start is reported, and what recovery finds. How it ends is
//! [`Settlement`](crate::Settlement)'s.

use std::time::Duration;

use crate::{DecodeError, LeaseId, TaskEnvelope};

/// What the task record says about a delivery at its start, merged into the envelope the worker
/// read with the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Failed attempts so far.
    pub retried: u32,
    /// Retries allowed after the first attempt (from the record, so it is known even when the
    /// envelope does not decode).
    pub max_retry: u32,
    /// Message of the last failure.
    pub last_error: Option<String>,
    /// When the last failure happened (unix ms).
    pub last_failed_at_ms: Option<i64>,
    /// The task's unique key (content hash), if it holds a lock.
    pub unique_key: Option<String>,
}

/// What [`Consume::start`](crate::Consume::start) found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// Marked active: the handler may run. From now on a lost worker costs an attempt.
    Started(Attempt),
    /// The delivery is no longer current (the task was deleted, settled or reclaimed): do not
    /// run it. Its stream entry was removed.
    Lost,
    /// The task record is corrupt (the reason says how); nothing was written. Dead-letter it
    /// without counting an attempt.
    Corrupt(String),
}

/// A task handed to a worker. The envelope is a `Result` so that a task whose bytes do not decode
/// still comes with a lease and can be dead-lettered instead of blocking the queue.
#[derive(Debug, Clone)]
pub struct Lease {
    /// What settles this delivery.
    pub id: LeaseId,
    /// The decoded envelope (with the current attempt count and last error), or why it failed.
    pub envelope: Result<TaskEnvelope, DecodeError>,
}

/// A batch of deliveries read from one queue, with the answers to the settlements the read
/// carried ([`Consume::fetch`](crate::Consume::fetch)).
#[derive(Debug, Default)]
pub struct Fetched {
    /// Tasks to run.
    pub leases: Vec<Lease>,
    /// Stream entries that carried no live task (deleted task, foreign entry); they were acked
    /// and removed so they never block the queue.
    pub dropped: usize,
    /// The queue is blocked by a handler-signalled backoff until this time (unix ms, store
    /// clock): nothing was read; do not fetch it again before then.
    pub blocked_until_ms: Option<i64>,
    /// Some rate keys of the queue are blocked: check keyed deliveries with
    /// [`Throttle::admit`](crate::Throttle::admit) before starting them, even where the queue
    /// has no per-key rate.
    pub key_blocks: bool,
    /// One answer per settlement the fetch carried, in order (empty when it carried none).
    pub settled: Vec<crate::Settled>,
}

/// Handler-signalled backoff limits: the shortest and longest block
/// ([`End::BackedOff`](crate::End::BackedOff) clamps its delay to these).
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest block one call sets (an hour): a bad `Retry-After` (a date years ahead) must
/// not stop a queue for ever. A handler that needs longer signals again when it runs.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// The width of the jitter added to a block's end when tasks come back, for a block with
/// `remaining` left: a fifth of it, at least 20 ms and at most 5 s, so the tasks held back and
/// the workers waiting do not all come back at one instant.
pub fn backoff_jitter(remaining: Duration) -> Duration {
    (remaining / 5).clamp(Duration::from_millis(20), Duration::from_secs(5))
}

/// The handler-signalled blocks of one queue in force now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueBlocks {
    /// The whole queue is blocked until this time (unix ms), if it is.
    pub queue_until_ms: Option<i64>,
    /// Blocked rate keys with the end of each block (unix ms), soonest end first.
    pub keys: Vec<(String, i64)>,
    /// How many times handlers blocked the queue or one of its keys today (UTC).
    pub throttled_today: u64,
}

/// A task the recoverer dead-lettered.
#[derive(Debug, Clone)]
pub struct DeadTask {
    /// Task id.
    pub task_id: String,
    /// The envelope, or why it did not decode.
    pub envelope: Result<TaskEnvelope, DecodeError>,
    /// Dropped rather than archived.
    pub discarded: bool,
}

/// What one reclaim pass did.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Tasks put back in the stream for another attempt.
    pub requeued: u64,
    /// Tasks that had no attempt left.
    pub dead: Vec<DeadTask>,
}
