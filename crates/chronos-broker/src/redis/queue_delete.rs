//! Queue deletion: a queue's tasks (when forced), its state keys, and every other key under
//! its prefix but the scheduler's, so a queue created again under the name starts empty.

use std::collections::HashSet;

use fred::prelude::*;

use super::protocol::DELIVERY;
use super::record::Entry;
use super::scan::Entries;
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    BrokerError, Inspect, QueueKeys, QueueName, QueueStats, TaskAction, TaskFilter, TaskState,
};

/// Keys of a deleted queue (besides its sets and streams) one queue-delete call removes.
const QUEUE_KEYS_PER_CALL: usize = 500;

impl RedisBroker {
    /// [`crate::Operate::delete_queue`]: the tasks first when forced (in bounded chunks, active
    /// ones too), then the queue's keys in calls that each check that no task arrived meanwhile.
    pub(super) async fn remove_queue(
        &self,
        queue: &QueueName,
        force: bool,
    ) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut deleted = 0;
        // A few rounds: producers may still be writing while a forced delete runs.
        for _ in 0..3 {
            if force {
                for state in [
                    TaskState::Active,
                    TaskState::Pending,
                    TaskState::Scheduled,
                    TaskState::Retry,
                    TaskState::Archived,
                    TaskState::Completed,
                    TaskState::Cancelled,
                ] {
                    let r = self
                        .bulk(
                            queue,
                            state,
                            &TaskFilter::default(),
                            TaskAction::Delete,
                            1000,
                            true,
                        )
                        .await?;
                    deleted += r.done;
                }
                deleted += self.delete_stray_entries(&keys).await?;
            }
            let declared = keys.state_keys();
            // Every other key of the queue goes with it, in calls of bounded size that each
            // check again that no task arrived meanwhile.
            let others = self.other_queue_keys(&keys, &declared).await?;
            let mut held = 0;
            for part in others.chunks(QUEUE_KEYS_PER_CALL).chain(
                // One call even when there is nothing else to delete.
                others.is_empty().then_some(&[][..]),
            ) {
                let mut all = declared.clone();
                all.extend(part.iter().cloned());
                all.push(keys.events());
                held = reply::int(
                    &self.run(|s| &s.admin_queue_delete, all, Vec::new()).await?,
                    "queue delete",
                )?;
                if held != 0 {
                    break;
                }
            }
            if held == 0 {
                // Outside the queue's slot: plain commands after the queue's own keys are gone.
                let _: i64 = self
                    .inner
                    .client
                    .srem(self.inner.keys.queues(), queue.as_str())
                    .await
                    .map_err(store)?;
                let _: i64 = self
                    .inner
                    .client
                    .srem(self.inner.keys.paused(), queue.as_str())
                    .await
                    .map_err(store)?;
                // Servers of a queue created again under this name must not keep it paused.
                self.signal_paused().await?;
                self.forget_queues();
                return Ok(deleted);
            }
            if !force {
                return Err(BrokerError::QueueNotEmpty {
                    queue: queue.to_string(),
                    tasks: held.max(0) as u64,
                });
            }
        }
        Err(BrokerError::QueueNotEmpty {
            queue: queue.to_string(),
            tasks: self.queue_stats(queue).await.map(total).unwrap_or(0),
        })
    }

    /// The keys of a queue being deleted that `declared` (its sets, streams, counters and
    /// settings) leaves out: one SCAN over the queue's prefix (on a cluster, on the node of its
    /// slot). Leaves out the event stream (every call declares it) and the scheduler's keys
    /// (`sched:*`: its fences and fire state guard the schedules that still feed the queue).
    async fn other_queue_keys(
        &self,
        keys: &QueueKeys,
        declared: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        let prefix = keys.prefix();
        let pattern = format!("{}*", super::locks::glob_escape(prefix));
        let scheduler = format!("{prefix}sched:");
        let events = keys.events();
        let mut found = HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, page): (String, Vec<String>) = self
                .inner
                .client
                .scan_page(cursor, pattern.clone(), Some(1_000), None)
                .await
                .map_err(store)?;
            found.extend(page.into_iter().filter(|k| {
                k.starts_with(prefix)
                    && !k.starts_with(&scheduler)
                    && *k != events
                    && !declared.contains(k)
            }));
            if next == "0" {
                break;
            }
            cursor = next;
        }
        let mut out: Vec<String> = found.into_iter().collect();
        out.sort();
        Ok(out)
    }

    /// Stream entries no state listing reaches (an entry whose task hash is gone or names
    /// another delivery): removed before a forced queue delete, a page at a time. An entry of a
    /// live task (enqueued meanwhile) is left for the next round of the delete. Returns 0:
    /// these entries held no task.
    async fn delete_stray_entries(&self, keys: &QueueKeys) -> Result<u64, BrokerError> {
        // Every level's stream too (the default level's is the main one).
        let mut streams = keys.lanes();
        streams.pop();
        for stream in streams {
            self.delete_stray_entries_of(keys, &stream).await?;
        }
        Ok(0)
    }

    /// [`RedisBroker::delete_stray_entries`] on one stream of the queue.
    async fn delete_stray_entries_of(
        &self,
        keys: &QueueKeys,
        stream: &str,
    ) -> Result<u64, BrokerError> {
        let client = &self.inner.client;
        let mut start = "-".to_string();
        loop {
            let page: Entries = client
                .xrange(stream, start.as_str(), "+", Some(1000))
                .await
                .map_err(store)?;
            let Some((last, _)) = page.last() else {
                return Ok(0);
            };
            let next = format!("({last}");
            let full = page.len() == 1000;
            let owners = futures::future::join_all(page.iter().map(|(mid, fields)| async move {
                let entry = Entry::of(fields);
                let Some(id) = entry.task_id.and_then(|v| std::str::from_utf8(v).ok()) else {
                    // A plain task's entry (no `i`, its id its own) is its whole record.
                    return entry.envelope.map(|_| mid.clone());
                };
                let m: Option<String> = client.hget(keys.task(id), DELIVERY).await.ok().flatten();
                m
            }))
            .await;
            let stray: Vec<&str> = page
                .iter()
                .zip(owners)
                .filter(|((mid, _), owner)| owner.as_deref() != Some(mid.as_str()))
                .map(|((mid, _), _)| mid.as_str())
                .collect();
            if !stray.is_empty() {
                // One key: the stream. A re-sent XDEL deletes nothing twice.
                let _: i64 = client.xdel(stream, stray).await.map_err(store)?;
            }
            if !full {
                return Ok(0);
            }
            start = next;
        }
    }
}

/// Tasks a queue holds, in every state.
fn total(s: QueueStats) -> u64 {
    s.pending + s.active + s.scheduled + s.retry + s.archived + s.completed
}
