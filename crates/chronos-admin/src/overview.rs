//! The whole deployment at a glance: queues with their totals, live servers, the scheduler
//! leader and the schedules.

use chronos_broker::{
    Inspect, ManageSchedules, Operate, QueueName, QueueStats, Schedules, ServerRecord,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;
use crate::queues::QueueRow;

/// The scheduler leader.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeaderRow {
    /// Instance id.
    pub id: String,
    /// Fencing epoch.
    pub epoch: u64,
    /// Leading since (unix ms).
    pub since_ms: i64,
}

/// The whole deployment at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// Every queue.
    pub queues: Vec<QueueRow>,
    /// Sums over the queues (name `total`).
    pub total: QueueRow,
    /// Live worker servers.
    pub servers: usize,
    /// The scheduler leader.
    pub leader: Option<LeaderRow>,
    /// Registered schedules.
    pub schedules: usize,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Live worker servers.
    pub async fn servers(&self) -> Result<Vec<ServerRecord>, AdminError> {
        Ok(self.broker.servers().await?)
    }

    /// The scheduler leader, if any.
    pub async fn leader(&self) -> Result<Option<LeaderRow>, AdminError> {
        Ok(self.broker.scheduler_leader().await?.map(|l| LeaderRow {
            id: l.id,
            epoch: l.epoch,
            since_ms: l.since_ms,
        }))
    }

    /// Queues, totals, servers, leader and schedules.
    pub async fn overview(&self) -> Result<Overview, AdminError> {
        let queues = self.queues().await?;
        let mut total = QueueRow::new(&QueueName::new("total")?, QueueStats::default(), false);
        for q in &queues {
            total.pending += q.pending;
            total.active += q.active;
            total.scheduled += q.scheduled;
            total.retry += q.retry;
            total.archived += q.archived;
            total.completed += q.completed;
            total.cancelled += q.cancelled;
            total.processed += q.processed;
            total.failed += q.failed;
        }
        Ok(Overview {
            servers: self.servers().await?.len(),
            leader: self.leader().await?,
            schedules: self.schedules().await?.len(),
            queues,
            total,
        })
    }
}
