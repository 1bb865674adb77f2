//! The blocks handlers signalled on a queue or its rate keys (`TaskError::rate_limited`), as an
//! operator reads and lifts them.

use chronos_broker::{QueueName, RedisBroker};

use crate::admin::Admin;
use crate::error::AdminError;

impl Admin<RedisBroker> {
    /// The handler-signalled blocks of queue `name` in force now (`TaskError::rate_limited`):
    /// the queue's own and up to `max_keys` blocked rate keys with their ends, soonest first.
    /// Two reads, no SCAN.
    pub async fn queue_blocks(
        &self,
        name: &str,
        max_keys: usize,
    ) -> Result<chronos_broker::QueueBlocks, AdminError> {
        Ok(self
            .broker
            .queue_blocks(&QueueName::new(name)?, max_keys)
            .await?)
    }

    /// Lifts a handler-signalled block of queue `name` at once: rate key `key`'s, or the
    /// queue's own. Tasks already held back keep their due time. True when a block was lifted.
    /// [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn unblock(&self, name: &str, key: Option<&str>) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.unblock(&q, key).await?)
    }
}
