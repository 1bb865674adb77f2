//! A queue's event stream (`<prefix>events`): on while the key exists, written by the transition
//! scripts (lib.lua: `emit`), read here with XREAD, or with XREADGROUP, XAUTOCLAIM and XACK by a
//! consumer group.

use std::time::Duration;

use fred::prelude::*;

use super::consume::RedisReader;
use super::lease::{Entries, Fields};
use super::{client_builder, RedisBroker, MAX_BLOCK};
use crate::redis::store::store;
use crate::{duration_ms, BrokerError, Events, QueueName, TaskEvent};

/// How long this process trusts what it last saw of a queue's event stream being on or off:
/// a stream turned on elsewhere gets this process's events within this time (turned off, it
/// gets none at once: the scripts write only while it exists).
pub(super) const EVENTS_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

impl RedisBroker {
    /// The event stream key to declare last to a transition script of `keys`' queue: `Some`
    /// while the stream was on when this process last looked (an EXISTS at most once per
    /// [`EVENTS_RECHECK`] per queue), so that a queue without events pays no call in its
    /// scripts. The script checks again before it writes.
    pub(super) async fn event_stream(
        &self,
        keys: &crate::QueueKeys,
    ) -> Result<Option<String>, BrokerError> {
        let queue = keys.queue();
        let seen = lock(&self.inner.events).get(queue).copied();
        let on = match seen {
            Some((on, at)) if at.elapsed() < EVENTS_RECHECK => on,
            _ => {
                let n: i64 = self
                    .inner
                    .client
                    .exists(keys.events())
                    .await
                    .map_err(store)?;
                self.note_events(queue, n > 0);
                n > 0
            }
        };
        Ok(on.then(|| keys.events()))
    }

    fn note_events(&self, queue: &QueueName, on: bool) {
        lock(&self.inner.events).insert(queue.clone(), (on, std::time::Instant::now()));
    }

    /// The newest `count` events of `queue`, oldest first (empty when its stream is off): what
    /// an operator's view of the stream starts with.
    pub async fn recent_events(
        &self,
        queue: &QueueName,
        count: usize,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        let mut newest: Entries = self
            .inner
            .client
            .xrevrange(self.events_key(queue), "+", "-", Some(count.max(1) as u64))
            .await
            .map_err(store)?;
        newest.reverse();
        Ok(decode(queue, newest))
    }

    /// Up to `count` events of `queue` after the entry id `after`, oldest first, without
    /// blocking and without a connection of their own: what a page that polls reads.
    pub async fn events_after(
        &self,
        queue: &QueueName,
        after: &str,
        count: usize,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        if !crate::keys::is_plain_id(after) {
            return Err(BrokerError::InvalidOption(format!(
                "{after:?} is not a stream entry id (<ms>-<seq>)"
            )));
        }
        let entries: Entries = self
            .inner
            .client
            .xrange(
                self.events_key(queue),
                format!("({after}"),
                "+",
                Some(count.max(1) as u64),
            )
            .await
            .map_err(store)?;
        Ok(decode(queue, entries))
    }

    /// `queue`'s event stream key.
    fn events_key(&self, queue: &QueueName) -> String {
        self.queue_keys(queue).events()
    }

    /// [`BrokerError::EventsOff`] for `queue`.
    fn off(queue: &QueueName) -> BrokerError {
        BrokerError::EventsOff {
            queue: queue.as_str().to_string(),
        }
    }
}

/// The events of `entries`; an entry that does not read as one (deleted while pending, or not
/// written by a script) is left out with a warning.
fn decode(queue: &QueueName, entries: Entries) -> Vec<TaskEvent> {
    entries
        .into_iter()
        .filter_map(|(id, fields)| event_of(queue, &id, fields))
        .collect()
}

fn event_of(queue: &QueueName, id: &str, fields: Fields) -> Option<TaskEvent> {
    let pairs: Vec<(String, Vec<u8>)> = fields?.into_iter().map(|(k, v)| (k, v.to_vec())).collect();
    match TaskEvent::decode(id, &pairs) {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!(queue = queue.as_str(), id, error = %e, "skipping an entry of the event stream");
            None
        }
    }
}

/// One stream's entries out of an XREAD or XREADGROUP reply (None on a timeout).
type StreamReply = Option<Vec<(String, Entries)>>;

fn entries_of(reply: StreamReply) -> Entries {
    reply
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(_, entries)| entries)
        .collect()
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn block_of(block: Duration) -> Option<u64> {
    (!block.is_zero()).then(|| block.min(MAX_BLOCK).as_millis().max(1) as u64)
}

impl Events for RedisBroker {
    type EventReader = RedisReader;

    async fn open_event_reader(&self) -> Result<RedisReader, BrokerError> {
        let client = client_builder(self.inner.client.client_config())
            .build()
            .map_err(store)?;
        client.init().await.map_err(store)?;
        Ok(RedisReader { client })
    }

    async fn set_events(&self, queue: &QueueName, on: bool) -> Result<(), BrokerError> {
        let key = self.events_key(queue);
        if on {
            self.run(|s| &s.events_on, vec![key], vec![]).await?;
        } else {
            let _: i64 = self.inner.client.del(key).await.map_err(store)?;
        }
        self.note_events(queue, on);
        Ok(())
    }

    async fn events_on(&self, queue: &QueueName) -> Result<bool, BrokerError> {
        let n: i64 = self
            .inner
            .client
            .exists(self.events_key(queue))
            .await
            .map_err(store)?;
        Ok(n > 0)
    }

    async fn last_event_id(&self, queue: &QueueName) -> Result<String, BrokerError> {
        let newest: Entries = self
            .inner
            .client
            .xrevrange(self.events_key(queue), "+", "-", Some(1))
            .await
            .map_err(store)?;
        match newest.into_iter().next() {
            Some((id, _)) => Ok(id),
            None if self.events_on(queue).await? => Ok("0-0".into()),
            None => Err(Self::off(queue)),
        }
    }

    async fn read_events(
        &self,
        reader: &mut RedisReader,
        queue: &QueueName,
        after: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        let reply: StreamReply = reader
            .client
            .xread(
                Some(count.max(1) as u64),
                block_of(block),
                self.events_key(queue),
                after.to_string(),
            )
            .await
            .map_err(store)?;
        Ok(decode(queue, entries_of(reply)))
    }

    async fn create_event_group(&self, queue: &QueueName, group: &str) -> Result<(), BrokerError> {
        let made: Result<Value, _> = self
            .inner
            .client
            .xgroup_create(self.events_key(queue), group, "$", false)
            .await;
        match made {
            Ok(_) => Ok(()),
            Err(e) if e.details().starts_with("BUSYGROUP") => Ok(()),
            // XGROUP CREATE without MKSTREAM on a missing key: the stream is off.
            Err(e) if e.details().contains("requires the key to exist") => Err(Self::off(queue)),
            Err(e) => Err(store(e)),
        }
    }

    async fn read_event_group(
        &self,
        reader: &mut RedisReader,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        pending_after: Option<&str>,
        count: usize,
        block: Duration,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        let key = self.events_key(queue);
        let from = pending_after.unwrap_or(">").to_string();
        // A pending read never blocks: it answers what is there.
        let block = if pending_after.is_some() {
            None
        } else {
            block_of(block)
        };
        let read: Result<StreamReply, _> = reader
            .client
            .xreadgroup(
                group,
                consumer,
                Some(count.max(1) as u64),
                block,
                false,
                key.clone(),
                from,
            )
            .await;
        let entries = match read {
            Ok(r) => entries_of(r),
            Err(e) if e.details().starts_with("NOGROUP") => {
                return Err(if self.events_on(queue).await? {
                    BrokerError::InvalidOption(format!(
                        "queue {:?} has no event group {group:?}",
                        queue.as_str()
                    ))
                } else {
                    Self::off(queue)
                });
            }
            Err(e) => return Err(store(e)),
        };
        // Entries trimmed away while pending have no fields: nothing to hand out, so they are
        // acked rather than read again forever.
        let gone: Vec<String> = entries
            .iter()
            .filter(|(_, f)| f.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        if !gone.is_empty() {
            self.ack_events(queue, group, &gone).await?;
        }
        Ok(decode(queue, entries))
    }

    async fn claim_events(
        &self,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        let (_, entries, _gone): (String, Entries, Vec<String>) = self
            .inner
            .client
            .xautoclaim(
                self.events_key(queue),
                group,
                consumer,
                duration_ms(min_idle).max(0) as u64,
                "0-0",
                Some(count.max(1) as u64),
                false,
            )
            .await
            .map_err(store)?;
        Ok(decode(queue, entries))
    }

    async fn ack_events(
        &self,
        queue: &QueueName,
        group: &str,
        ids: &[String],
    ) -> Result<u64, BrokerError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let n: i64 = self
            .inner
            .client
            .xack(self.events_key(queue), group, ids.to_vec())
            .await
            .map_err(store)?;
        Ok(n.max(0) as u64)
    }
}
