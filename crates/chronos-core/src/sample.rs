//! Queue gauges for metrics: what one process of the cluster samples every few seconds, so
//! that a scrape never costs Redis anything and N workers do not each read every queue.

use std::time::Duration;

use crate::QueueStats;

/// Tenants a sample names one by one: those with the most tasks waiting (then running); the
/// others are summed in [`QueueSample::other_tenants`], so a queue with thousands of tenants
/// still makes a bounded number of metric series.
pub const SAMPLED_TENANTS: usize = 10;

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
    /// For a queue shared by tenants ([`crate::EnqueueOptions::tenant`]): the
    /// [`SAMPLED_TENANTS`] with the most tasks waiting (then running), busiest first; empty
    /// otherwise (or when the broker cannot tell).
    pub tenants: Vec<TenantSample>,
    /// The tenants left out of `tenants`, summed (`tenant` empty, `oldest_ms` the oldest of
    /// theirs that the broker saw); None when none is left out.
    pub other_tenants: Option<TenantSample>,
}

/// The counts of one tenant of a queue (or of several, summed) in a [`QueueSample`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantSample {
    /// The tenant key (empty for the sum of the others).
    pub tenant: String,
    /// How many tenants this counts (1 for one tenant).
    pub tenants: u64,
    /// Tasks waiting for their turn.
    pub waiting: u64,
    /// Tasks started or fetched and not settled yet.
    pub running: u64,
    /// When the next task to start was enqueued or made ready, in unix ms of the clock of
    /// [`QueueSample::sampled_at_ms`]; None when none waits or the broker cannot tell.
    pub oldest_ms: Option<i64>,
}

impl TenantSample {
    /// How long its next task to start has waited at `sampled_at_ms` (zero when none waits, or
    /// the clocks disagree).
    pub fn oldest_age(&self, sampled_at_ms: i64) -> Duration {
        let ms = self.oldest_ms.map_or(0, |t| {
            u64::try_from(sampled_at_ms.saturating_sub(t)).unwrap_or(0)
        });
        Duration::from_millis(ms)
    }
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
