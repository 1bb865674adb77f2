//! A queue's event stream as an operator reads it: on or off, the newest events, and the events
//! after a position.

use chronos_broker::{QueueName, RedisBroker};

use crate::admin::Admin;
use crate::error::AdminError;

impl Admin<RedisBroker> {
    /// Whether queue `name` keeps an event stream, and then its newest `count` events, oldest
    /// first.
    pub async fn recent_events(
        &self,
        name: &str,
        count: usize,
    ) -> Result<(bool, Vec<chronos_broker::TaskEvent>), AdminError> {
        use chronos_broker::Events as _;
        let q = self.require_queue(name).await?;
        if !self.broker.events_on(&q).await? {
            return Ok((false, Vec::new()));
        }
        Ok((true, self.broker.recent_events(&q, count).await?))
    }

    /// Up to `count` events of queue `name` after the entry id `after`, oldest first.
    pub async fn events_after(
        &self,
        name: &str,
        after: &str,
        count: usize,
    ) -> Result<Vec<chronos_broker::TaskEvent>, AdminError> {
        let q = QueueName::new(name)?;
        Ok(self.broker.events_after(&q, after, count).await?)
    }

    /// Turns queue `name`'s event stream on or off (off deletes its events and groups).
    pub async fn set_events(&self, name: &str, on: bool) -> Result<(), AdminError> {
        use chronos_broker::Events as _;
        let q = self.require_queue(name).await?;
        Ok(self.broker.set_events(&q, on).await?)
    }
}
