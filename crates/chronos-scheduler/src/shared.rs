//! The state a running scheduler's loops share: the broker, the configuration, the schedule
//! sets, the counters and the stop and resign signals.
//!
//! It lives apart from `scheduler`, which builds it, so that the loops (`leader`, `registry`,
//! `watcher`, `adopter`) depend on it and `scheduler` depends on them, never the other way.

use std::sync::Arc;

use chronos_core::{BrokerError, ScheduleDef};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::config::SchedulerConfig;
use crate::schedule::Schedule;
use crate::stats::Counters;

/// Schedules registered by other live instances, each with the definition it was built from.
pub(crate) type Adopted = Arc<Vec<(ScheduleDef, Schedule)>>;

/// A resign request: answered with whether this instance led and released the lock.
pub(crate) type ResignRequest = oneshot::Sender<Result<bool, BrokerError>>;

/// What every loop of one scheduler instance reads.
pub(crate) struct Shared<B> {
    /// The broker every loop talks to.
    pub(crate) broker: B,
    /// The configuration, as validated by `Scheduler::start`.
    pub(crate) config: SchedulerConfig,
    /// The schedules registered in code on this instance.
    pub(crate) schedules: Vec<Schedule>,
    /// The active runtime schedules as last loaded (see `watcher`).
    pub(crate) runtime: watch::Sender<Arc<Vec<Schedule>>>,
    /// The live schedules that only other instances register, as the leader last read them
    /// (see `adopter`).
    pub(crate) adopted: watch::Sender<Adopted>,
    /// This instance's id in the registry and the leader info.
    pub(crate) instance: String,
    /// What this instance counts.
    pub(crate) counters: Counters,
    /// Stops everything (shutdown).
    pub(crate) stop: CancellationToken,
    /// Asks the leader loop to end the current term (resign_leadership); the answer says
    /// whether this instance led and released the lock.
    pub(crate) resign: mpsc::Sender<ResignRequest>,
}

impl<B> Shared<B> {
    /// Now, by the configured clock.
    pub(crate) fn now(&self) -> i64 {
        self.config.clock.now_ms()
    }
}
