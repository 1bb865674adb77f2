use std::sync::Arc;
use std::time::Duration;

/// Where the scheduler reads the wall clock. Trigger times are wall-clock instants, so this is
/// the seam through which a test (or a simulation) moves time: a clock that jumps forward
/// shows what a host suspend or an NTP step does to a leader.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in unix milliseconds.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chronos_core::now_ms()
    }
}

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
    /// How often every instance marks itself alive in the registry (default 5 s). Entries are
    /// written only when they change (at start, and for cron schedules when the published next
    /// run has passed); the periodic mark is one small command. The leader reads, this often,
    /// which live schedules other instances register and it does not, and fires those too: a
    /// schedule of a newly started instance fires within about one interval (caught up from its
    /// registration), and one whose instances all stopped is dropped after three.
    pub publish_interval: Duration,
    /// An instance not seen alive for this long is forgotten (default 1 h), and with it every
    /// schedule id that no remaining instance registers: its registry entry and its fire state
    /// (last fired, last task, first registration). The leader prunes about once a minute (or
    /// every half `remove_after`, when that is shorter).
    /// Entries whose instances were last seen three publish intervals ago are reported stale.
    pub remove_after: Duration,
    /// The wall clock trigger times are compared with (default: the system's).
    pub clock: Arc<dyn Clock>,
    /// How often every instance reads the revision of the runtime schedules (one `GET`), and
    /// reloads them when it moved (default 500 ms, so the leader applies a change within about
    /// a second). None: runtime schedules are neither read nor fired by this instance.
    pub runtime_poll: Option<Duration>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            leader_ttl: Duration::from_secs(5),
            default_zone: "UTC".into(),
            instance_id: None,
            publish_interval: Duration::from_secs(5),
            remove_after: Duration::from_secs(3600),
            clock: Arc::new(SystemClock),
            runtime_poll: Some(Duration::from_millis(500)),
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
