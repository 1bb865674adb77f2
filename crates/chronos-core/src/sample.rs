//! Queue gauges for metrics: what one process of the cluster samples every few seconds, so
//! that a scrape never costs Redis anything and N workers do not each read every queue.

use std::time::Duration;

use crate::QueueStats;

/// One sample of a queue: its counts by state and the age of its oldest pending task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// Counts by state, as [`crate::Inspect::queue_stats`] gives them.
    pub stats: QueueStats,
    /// When the oldest pending (ready, not yet delivered) task became ready, in unix ms of the
    /// broker's clock; None when nothing is pending or the broker cannot tell.
    pub oldest_pending_ms: Option<i64>,
    /// When the sample was taken, in unix ms of the same clock as `oldest_pending_ms`.
    pub sampled_at_ms: i64,
}

impl QueueSample {
    /// How long the oldest pending task has waited to be delivered (zero when nothing is
    /// pending, or the clocks disagree); None when the broker cannot tell.
    pub fn oldest_pending_age(&self) -> Option<Duration> {
        if self.stats.pending == 0 {
            return Some(Duration::ZERO);
        }
        let ready = self.oldest_pending_ms?;
        let ms = u64::try_from(self.sampled_at_ms.saturating_sub(ready)).unwrap_or(0);
        Some(Duration::from_millis(ms))
    }
}
