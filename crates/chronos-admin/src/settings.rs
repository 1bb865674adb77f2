//! A queue's settings stored in Redis (limits that override every server's configuration, and
//! the aging time of its priority levels), as `chronos queue limits` and the console's queue
//! page show and change them.

use chronos_broker::{
    format_duration, Inspect, ManageSchedules, Operate, QueueName, QueueSettings, Schedules,
    Setting, Settings, SettingsChange,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// The stored settings of one queue for display. Each field is the stored value as an operator
/// writes it (`100/1s`, `10`, `60s`), `none` for a limit lifted in Redis, or absent (`null`)
/// when nothing is stored and each server's configuration applies.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SettingsRow {
    /// Queue name.
    pub queue: String,
    /// Starts per period across the cluster.
    pub rate: Option<String>,
    /// Starts of the rate granted at once.
    pub burst: Option<String>,
    /// Tasks held at once across the cluster.
    pub concurrency: Option<String>,
    /// Starts per period per rate key.
    pub per_key_rate: Option<String>,
    /// How long a waiting task of a less urgent priority level may wait before it is served
    /// ahead of newer, more urgent work.
    pub aging: Option<String>,
    /// The priority level retried tasks go to when it is more urgent than their own.
    pub retry_level: Option<String>,
}

impl SettingsRow {
    /// The view of `settings` stored for `queue`.
    pub fn new(queue: &QueueName, s: &QueueSettings) -> Self {
        Self {
            queue: queue.to_string(),
            rate: s.rate.map(|r| r.to_string()),
            burst: s.burst.map(|n| n.to_string()),
            concurrency: s.concurrency.map(|c| match c {
                Setting::Off => "none".to_string(),
                Setting::On(n) => n.to_string(),
            }),
            per_key_rate: s.per_key_rate.map(|r| r.to_string()),
            aging: s.aging.map(format_duration),
            retry_level: s.retry_level.map(|p| p.to_string()),
        }
    }

    /// True when nothing is stored for the queue.
    pub fn is_empty(&self) -> bool {
        self.rate.is_none()
            && self.burst.is_none()
            && self.concurrency.is_none()
            && self.per_key_rate.is_none()
            && self.aging.is_none()
            && self.retry_level.is_none()
    }
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + Settings + 'static> Admin<B> {
    /// The settings stored for queue `name`; [`AdminError::QueueNotFound`] for a name that
    /// names no queue.
    pub async fn queue_settings(&self, name: &str) -> Result<SettingsRow, AdminError> {
        let q = self.require_queue(name).await?;
        let s = self.broker().queue_settings(&q).await?;
        Ok(SettingsRow::new(&q, &s))
    }

    /// The settings stored for every queue, sorted by queue name (one read per queue, sent
    /// together).
    pub async fn all_queue_settings(&self) -> Result<Vec<SettingsRow>, AdminError> {
        let mut queues = self.broker().queues().await?;
        queues.sort();
        let reads = queues.iter().map(|q| self.broker().queue_settings(q));
        let all = futures::future::try_join_all(reads).await?;
        Ok(queues
            .iter()
            .zip(all)
            .map(|(q, s)| SettingsRow::new(q, &s))
            .collect())
    }

    /// Applies `change` to the settings of queue `name` in one atomic step and returns them as
    /// stored after it. Running servers apply the change within about two seconds.
    /// [`AdminError::QueueNotFound`] for a name that names no queue, and an out-of-range value
    /// is refused ([`chronos_broker::BrokerError::InvalidOption`]): nothing changed either way.
    pub async fn change_queue_settings(
        &self,
        name: &str,
        change: &SettingsChange,
    ) -> Result<SettingsRow, AdminError> {
        if change.is_empty() {
            return Err(AdminError::Invalid(
                "nothing to change: name at least one setting".into(),
            ));
        }
        change.validate()?;
        let q = self.require_queue(name).await?;
        let s = self.broker().change_queue_settings(&q, change).await?;
        Ok(SettingsRow::new(&q, &s))
    }
}
