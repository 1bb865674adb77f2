//! The schedule registry: every instance publishes the schedules it registered, so the
//! inspector, CLI and console list them (even those that never fired), with liveness.
//!
//! An instance writes an entry only when its content changes: at start, again if the registry
//! forgot the instance, and for cron schedules once the published next run has passed
//! (readers compute the next run of intervals themselves). Between those, a publish is one
//! small command that marks the instance alive. At 10k schedules that is under 200 bytes per
//! publish instead of megabytes (see the measurement in `tests/scheduling.rs`).
//!
//! With its entries, an instance publishes each schedule's definition (task, options, spec)
//! once, after the entries, so that a leader which does not register the schedule fires it
//! (see `adopter`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{BrokerError, ScheduleDef, ScheduleEntry, Schedules};
use tracing::{info, warn};

use crate::config::SchedulerConfig;
use crate::def::published;
use crate::schedule::Schedule;
use crate::shared::Shared;

/// Entries per registry write, so one call never carries megabytes.
const CHUNK: usize = 1000;
/// How often the leader prunes forgotten instances and their schedules, at most (never less
/// often than twice per `remove_after`).
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What this instance last wrote for one schedule.
#[derive(Debug)]
struct Written {
    /// The entry without its time-dependent fields.
    content: ScheduleEntry,
    /// The next run it carried (cron only; intervals are computed by readers).
    next_run_ms: Option<i64>,
}

/// This instance's side of the registry.
#[derive(Debug, Default)]
pub(crate) struct Publisher {
    written: HashMap<String, Written>,
    /// Schedules whose definition is stored (or cannot be: see `def::published`).
    defs_written: HashSet<String>,
    ticks: u64,
    pruned_once: bool,
}

fn content(e: &ScheduleEntry) -> ScheduleEntry {
    ScheduleEntry {
        next_run_ms: None,
        last_seen_ms: 0,
        ..e.clone()
    }
}

impl Publisher {
    /// Writes the entries that changed, or marks this instance alive; the leader also prunes
    /// about once a minute.
    pub(crate) async fn tick<B: Schedules>(&mut self, sh: &Shared<B>) {
        self.ticks += 1;
        if sh.schedules.is_empty() {
            return;
        }
        let now = sh.now();
        let changed: Vec<ScheduleEntry> = sh
            .schedules
            .iter()
            .map(|s| s.entry(&sh.instance, now))
            .filter(|e| match self.written.get(&e.id) {
                None => true,
                Some(w) => {
                    w.content != content(e)
                        || (e.every_ms.is_none() && w.next_run_ms.is_some_and(|n| n <= now))
                }
            })
            .collect();
        if changed.is_empty() {
            match sh.broker.publish_schedules(&sh.instance, &[]).await {
                Ok(true) => {}
                Ok(false) => {
                    info!("the registry forgot this instance; publishing every schedule again");
                    self.written.clear();
                    self.defs_written.clear();
                    return Box::pin(self.tick(sh)).await;
                }
                Err(e) => warn!(error = %e, "could not mark this instance alive in the registry"),
            }
        } else {
            for chunk in changed.chunks(CHUNK) {
                if let Err(e) = sh.broker.publish_schedules(&sh.instance, chunk).await {
                    warn!(error = %e, "could not publish schedules to the registry");
                    return;
                }
                for e in chunk {
                    self.written.insert(
                        e.id.clone(),
                        Written {
                            content: content(e),
                            next_run_ms: e.next_run_ms,
                        },
                    );
                }
            }
        }
        // After the entries: an id in an instance's set may lack its definition for a moment
        // (the leader then skips it until its next read), but a prune running in between can
        // never drop a definition whose id is registered.
        let unwritten: Vec<&Schedule> = sh
            .schedules
            .iter()
            .filter(|s| !self.defs_written.contains(&s.id))
            .collect();
        if !unwritten.is_empty() {
            let defs: Vec<ScheduleDef> = unwritten
                .iter()
                .filter_map(|s| {
                    let def = published(s);
                    if def.is_none() {
                        warn!(schedule = %s.id, "its options (a rate key, an absolute deadline) \
                              cannot be stored, so only leaders that register it fire it");
                    }
                    def
                })
                .collect();
            match sh.broker.publish_schedule_defs(&defs).await {
                Ok(()) => self
                    .defs_written
                    .extend(unwritten.iter().map(|s| s.id.clone())),
                Err(e) => warn!(error = %e, "could not publish schedule definitions"),
            }
        }
        let prune_every = PRUNE_EVERY.min(sh.config.remove_after / 2);
        let every = u64::try_from(
            (prune_every.as_millis() / sh.config.publish_interval.as_millis().max(1)).max(1),
        )
        .unwrap_or(1);
        if sh.counters.is_leader.load(Ordering::SeqCst) && self.ticks % every == 0 {
            let remove_after = sh.config.remove_after.max(Duration::from_secs(1));
            match sh
                .broker
                .prune_schedules(remove_after, !self.pruned_once)
                .await
            {
                Ok(ids) => {
                    self.pruned_once = true;
                    if !ids.is_empty() {
                        info!(n = ids.len(), ids = ?ids, "pruned schedules no instance registers any more");
                    }
                }
                Err(e) => warn!(error = %e, "could not prune the schedule registry"),
            }
        }
    }
}

/// Publishes once per `publish_interval` until the scheduler stops.
pub(crate) async fn run<B: Schedules>(sh: Arc<Shared<B>>, mut publisher: Publisher) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(sh.config.publish_interval) => publisher.tick(&sh).await,
            _ = sh.stop.cancelled() => return,
        }
    }
}

/// Every schedule in the registry with its last fired trigger and task, as the inspector shows
/// them. An entry that no instance registering it marked alive within three publish intervals
/// is marked stale; entries of instances gone for `remove_after` are left out (and pruned by
/// the leader).
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
