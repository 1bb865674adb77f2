//! The archive's cap as an operator's archive meets it. Worker servers keep at most
//! `archive_max` archived tasks per queue (their janitor deletes the oldest past it, within a
//! minute), and an operator's archive adds to the same set as the dead letters: archiving 66,600
//! pending tasks silently deleted them and the dead letters being investigated. The CLI's
//! summary and the console's confirm step say what the cap will delete, from this.

use chronos_broker::{Inspect, Operate, DEFAULT_ARCHIVE_MAX};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// A queue's archive and the cap its servers keep it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ArchiveCap {
    /// Most archived tasks kept: the smallest `archive_max` among the live servers of the
    /// queue (each one's janitor trims to its own), or the default when none says.
    pub max: u64,
    /// How many live servers of the queue told their cap (0: `max` is the default, which the
    /// servers that start later may not use).
    pub servers: usize,
    /// Archived tasks now.
    pub archived: u64,
}

impl ArchiveCap {
    /// How many archived tasks the janitor will delete (the oldest, whatever put them there)
    /// once `more` tasks are archived on top of those there now.
    pub fn deleted_after(&self, more: u64) -> u64 {
        self.archived.saturating_add(more).saturating_sub(self.max)
    }

    /// Where `max` comes from, for a sentence: "the archive_max of its servers" or "the
    /// default archive_max (no live server of the queue says)".
    pub fn source(&self) -> &'static str {
        if self.servers > 0 {
            "the archive_max of its servers"
        } else {
            "the default archive_max: no live server of the queue says"
        }
    }
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// The archive of queue `name` and its cap ([`ArchiveCap`]): one read of the live servers
    /// and one of the queue's counts. [`AdminError::QueueNotFound`] for an unknown queue.
    pub async fn archive_cap(&self, name: &str) -> Result<ArchiveCap, AdminError> {
        let q = self.require_queue(name).await?;
        let caps: Vec<u64> = self
            .broker
            .servers()
            .await?
            .into_iter()
            .filter(|s| s.queues.iter().any(|(n, _)| n == q.as_str()))
            .filter_map(|s| s.archive_max)
            .collect();
        let archived = self.broker.queue_stats(&q).await?.archived;
        Ok(ArchiveCap {
            max: caps.iter().copied().min().unwrap_or(DEFAULT_ARCHIVE_MAX),
            servers: caps.len(),
            archived,
        })
    }
}
