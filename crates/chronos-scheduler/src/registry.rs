//! The schedule registry: every instance re-publishes the schedules it registered, so the
//! inspector, CLI and console list them (even those that never fired), with liveness.

use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{now_ms, Broker, BrokerError, ScheduleEntry, Schedules};
use tracing::warn;

use crate::scheduler::Shared;
use crate::SchedulerConfig;

pub(crate) async fn run<B: Broker>(sh: Arc<Shared<B>>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(sh.config.publish_interval) => publish(&sh).await,
            _ = sh.stop.cancelled() => return,
        }
    }
}

pub(crate) async fn publish<B: Broker>(sh: &Shared<B>) {
    let now = now_ms();
    let entries: Vec<ScheduleEntry> = sh
        .schedules
        .iter()
        .map(|s| s.entry(&sh.instance, now))
        .collect();
    // Large registries go in slices, so one call never carries megabytes.
    for chunk in entries.chunks(1000) {
        if let Err(e) = sh.broker.publish_schedules(chunk).await {
            warn!(error = %e, "could not publish schedules to the registry");
            return;
        }
    }
}

/// Every schedule in the registry with its last fired trigger and task, as the inspector shows
/// them. An entry that no live instance re-published within three publish intervals is marked
/// stale; one older than `remove_after` is deleted.
pub async fn list_schedules<B: Schedules>(
    broker: &B,
    config: &SchedulerConfig,
) -> Result<Vec<ScheduleEntry>, BrokerError> {
    broker
        .schedules(
            config.publish_interval.saturating_mul(3),
            config.remove_after.max(Duration::from_secs(1)),
        )
        .await
}
