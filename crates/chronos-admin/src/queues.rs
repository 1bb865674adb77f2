//! Queues as an operator lists and manages them: their counts by state and level, pausing,
//! deletion, how long the oldest waiting task has waited, and whether a name names a queue at
//! all (with what the operator probably meant, `lookup.rs`).

use std::any::Any;

use chronos_broker::{
    Inspect, ManageSchedules, Operate, QueueName, QueueStats, RedisBroker, Schedules,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;
use crate::lookup::{self, UnknownQueue};

/// A queue with its counts, as listed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct QueueRow {
    /// Queue name.
    pub name: String,
    /// Workers do not fetch from it.
    pub paused: bool,
    /// Waiting in the stream.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// Delayed.
    pub scheduled: u64,
    /// Waiting for a retry.
    pub retry: u64,
    /// Dead letters kept.
    pub archived: u64,
    /// Completed and kept.
    pub completed: u64,
    /// Tasks completed since the queue was created.
    pub processed: u64,
    /// Failed attempts since the queue was created.
    pub failed: u64,
    /// Per priority level, most urgent first, when the queue's tasks use levels other than the
    /// default (empty otherwise).
    pub levels: Vec<LevelRow>,
    /// Enqueues deduplicated since the queue was created, by mode.
    pub deduplicated: chronos_broker::DedupCounts,
    /// Cancelled by their handler and kept.
    pub cancelled: u64,
}

/// The tasks of one priority level of a queue.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct LevelRow {
    /// The level (0 runs first).
    pub level: u8,
    /// Waiting.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// How long the oldest waiting task has waited, in ms (None: none waits).
    pub oldest_pending_ms: Option<u64>,
}

impl QueueRow {
    pub(crate) fn new(name: &QueueName, s: QueueStats, paused: bool) -> Self {
        Self {
            name: name.to_string(),
            paused,
            pending: s.pending,
            active: s.active,
            scheduled: s.scheduled,
            retry: s.retry,
            archived: s.archived,
            completed: s.completed,
            processed: s.processed,
            failed: s.failed,
            deduplicated: s.deduplicated,
            cancelled: s.cancelled,
            levels: s
                .levels
                .iter()
                .map(|l| LevelRow {
                    level: l.priority.get(),
                    pending: l.pending,
                    active: l.active,
                    oldest_pending_ms: l.oldest_pending_ms,
                })
                .collect(),
        }
    }

    /// Tasks held in every state.
    pub fn size(&self) -> u64 {
        self.pending
            + self.active
            + self.scheduled
            + self.retry
            + self.archived
            + self.completed
            + self.cancelled
    }
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Every queue with its counts, sorted by name: one script call per queue, sent together.
    pub async fn queues(&self) -> Result<Vec<QueueRow>, AdminError> {
        let paused = self.broker.paused_queues().await?;
        Ok(self
            .broker
            .all_queue_stats()
            .await?
            .into_iter()
            .map(|(q, s)| {
                let p = paused.contains(&q);
                QueueRow::new(&q, s, p)
            })
            .collect())
    }

    /// One queue with its counts; [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn queue(&self, name: &str) -> Result<QueueRow, AdminError> {
        let q = self.require_queue(name).await?;
        let stats = self.broker.queue_stats(&q).await?;
        let paused = self.broker.paused_queues().await?.contains(&q);
        Ok(QueueRow::new(&q, stats, paused))
    }

    /// Pauses or resumes a queue; [`AdminError::QueueNotFound`] (and nothing changed) for a
    /// name that names no queue, so a typo never reports success.
    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<(), AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.set_paused(&q, paused).await?)
    }

    /// Deletes a queue (refused while it holds tasks unless `force`); returns the tasks deleted.
    /// [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn delete_queue(&self, name: &str, force: bool) -> Result<u64, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.delete_queue(&q, force).await?)
    }
}

impl Admin<RedisBroker> {
    /// When the oldest task waiting in `name` became ready (unix ms), or None when none waits:
    /// the queue's latency is now minus this. Two reads, however many tasks it holds.
    pub async fn oldest_pending_ms(&self, name: &str) -> Result<Option<i64>, AdminError> {
        Ok(self.broker.oldest_ready_ms(&QueueName::new(name)?).await?)
    }
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// Checks that `name` names a queue of the namespace (one `SMEMBERS` of the queue list).
    /// Answers the validated name, or [`AdminError::QueueNotFound`] with the known queues, the
    /// closest one when the name looks like a typo of it, and (over Redis) other namespaces
    /// holding queues, for an operator who forgot `--namespace`.
    pub async fn require_queue(&self, name: &str) -> Result<QueueName, AdminError> {
        let q = QueueName::new(name)?;
        let known = self.broker.queues().await?;
        if known.contains(&q) {
            return Ok(q);
        }
        let redis = (&self.broker as &dyn Any).downcast_ref::<RedisBroker>();
        let ns = redis.map_or(String::new(), |r| r.keyspace().namespace().to_string());
        let mut e = UnknownQueue::new(name, &ns, known.iter().map(|k| k.to_string()).collect());
        if let Some(r) = redis {
            e.other_namespaces = lookup::namespaces_with_queues(r, &ns).await;
        }
        Err(AdminError::QueueNotFound(Box::new(e)))
    }
}

impl Admin<RedisBroker> {
    /// The other namespaces of this Redis that hold queues (a bounded `SCAN` for their queue
    /// lists; empty on a cluster): the hint for an operator whose namespace shows no queue.
    pub async fn other_namespaces(&self) -> Vec<String> {
        let ns = self.broker.keyspace().namespace().to_string();
        lookup::namespaces_with_queues(&self.broker, &ns).await
    }
}
