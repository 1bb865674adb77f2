//! A queue's history as an operator charts it: processed and failed per minute or per day.

use chronos_broker::{HistorySpan, Inspect, ManageSchedules, Operate, Schedules};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// One bucket of history.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct HistoryRow {
    /// Bucket start (unix ms, UTC).
    pub start_ms: i64,
    /// Tasks completed.
    pub processed: u64,
    /// Failed attempts.
    pub failed: u64,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Processed and failed per minute (last 24 h) or per day (last 90 days), oldest first.
    pub async fn history(
        &self,
        name: &str,
        span: HistorySpan,
    ) -> Result<Vec<HistoryRow>, AdminError> {
        let q = self.require_queue(name).await?;
        let points = self.broker.history(&q, span).await?;
        Ok(points
            .into_iter()
            .map(|p| HistoryRow {
                start_ms: p.start_ms,
                processed: p.processed,
                failed: p.failed,
            })
            .collect())
    }
}
