//! The scheduler: a 1 s interval schedule in code, and a runtime schedule an operator would add.

use std::time::Duration;

use chronos::prelude::*;
use chronos::SchedulerHandle;

use crate::tasks::{Digest, Reconcile};

/// Registers the demo's schedules and starts the scheduler (it competes for the leadership).
pub(crate) async fn start(broker: &RedisBroker) -> anyhow::Result<SchedulerHandle> {
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    scheduler.register_interval(
        Duration::from_secs(1),
        &Reconcile {
            ledger: "main".into(),
        },
        ScheduleOptions::new().id("reconcile"),
    )?;
    // An operator's schedule, stored in Redis: any instance may add it, the leader fires it.
    let digest = chronos::NewSchedule::interval(
        "team-digest",
        Duration::from_secs(10),
        &Digest { team: "ops".into() },
        ScheduleOptions::new(),
    )?;
    chronos::RuntimeSchedules::new(broker.clone())
        .add(digest)
        .await?;
    Ok(scheduler.start().await?)
}
