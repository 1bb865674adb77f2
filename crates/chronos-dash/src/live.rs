//! What the overview shows of each queue, live: the data the pages render, the JSON polls
//! return and the state caches for a second.

use chronos_admin::{LeaderRow, QueueRow, RedisInfo};
use serde::Serialize;

/// One queue as the overview shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct QueueLive {
    #[serde(flatten)]
    pub(crate) row: QueueRow,
    /// Tasks completed per minute, over the last minute the console watched.
    pub(crate) processed_per_min: Option<f64>,
    /// Failed attempts per minute, likewise.
    pub(crate) failed_per_min: Option<f64>,
    /// Age of the oldest waiting task, seconds.
    pub(crate) oldest_pending_s: Option<i64>,
}

/// Everything the overview shows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OverviewData {
    pub(crate) queues: Vec<QueueLive>,
    pub(crate) total: QueueLive,
    pub(crate) servers: usize,
    pub(crate) schedules: usize,
    pub(crate) leader: Option<LeaderRow>,
    pub(crate) redis: RedisInfo,
    pub(crate) now_ms: i64,
}
