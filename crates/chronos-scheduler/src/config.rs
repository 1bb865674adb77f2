use std::time::Duration;

/// Configuration of a [`crate::Scheduler`].
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Lifetime of the leader lock (default 5 s). The leader renews it every half TTL; a crashed
    /// leader is replaced within one TTL.
    pub leader_ttl: Duration,
    /// Zone of cron schedules that name none (default `UTC`).
    pub default_zone: String,
    /// This instance's id in the registry and leader info (default `host:pid:random`).
    pub instance_id: Option<String>,
    /// How often every instance re-publishes its schedules to the registry (default 5 s).
    pub publish_interval: Duration,
    /// Registry entries not re-published for this long are removed (default 1 h); after three
    /// publish intervals they are reported stale.
    pub remove_after: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            leader_ttl: Duration::from_secs(5),
            default_zone: "UTC".into(),
            instance_id: None,
            publish_interval: Duration::from_secs(5),
            remove_after: Duration::from_secs(3600),
        }
    }
}

impl SchedulerConfig {
    /// How long a fired trigger's dedup key lives: well past any hand-off (four leader TTLs,
    /// at least 30 s). The monotonic last-fired mark guards beyond that.
    pub(crate) fn dedup_ttl(&self) -> Duration {
        self.leader_ttl
            .saturating_mul(4)
            .max(Duration::from_secs(30))
    }
}
