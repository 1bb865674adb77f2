//! The deduplication locks of a queue, as an operator lists and releases them.

use chronos_broker::{QueueName, RedisBroker};

use crate::admin::Admin;
use crate::error::AdminError;

impl Admin<RedisBroker> {
    /// The deduplication locks held in queue `name` (`EnqueueOptions::dedup`, `unique`), sorted
    /// by key, at most `limit`: key, holder, the holder's state and the time left. A bounded
    /// SCAN in the queue's slot.
    pub async fn dedup_locks(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<Vec<chronos_broker::DedupLock>, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.dedup_locks(&q, limit).await?)
    }

    /// Releases deduplication lock `key` of queue `name` (as [`Admin::dedup_locks`] shows it),
    /// only while `holder` holds it when given: the next enqueue with the key creates a task.
    /// True when a lock was released.
    pub async fn release_dedup_lock(
        &self,
        name: &str,
        key: &str,
        holder: Option<&str>,
    ) -> Result<bool, AdminError> {
        Ok(self
            .broker
            .release_dedup_lock(&QueueName::new(name)?, key, holder)
            .await?)
    }
}
