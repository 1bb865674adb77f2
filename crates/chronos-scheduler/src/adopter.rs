//! The leader fires every live schedule in the registry, not only those it registers itself.
//!
//! In a rolling deploy that adds a schedule, the new instances register it while the leader
//! may still run the old version: without this, nothing would fire it until the leader is
//! upgraded, while the console lists it as live. Every instance therefore publishes the
//! definition of each code schedule (task, options, spec) beside its registry entry, and the
//! leader reads the definitions of the ids that instances seen alive within three publish
//! intervals register and it does not (neither in code nor at run time). It fires them through
//! the same fenced, deduplicated fire script, so their exactly-once keys
//! `<schedule>:<trigger unix seconds>` are the ones any other leader would use.
//!
//! The read happens at the start of every term (before its catch-up) and then once per publish
//! interval while leading: a schedule registered by a newly started instance is picked up
//! within one publish interval and caught up from its first registration, as its misfire
//! policy allows. A schedule whose every registering instance went quiet for three publish
//! intervals (listed stale) is dropped and fires nothing more.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use chronos_core::{ManageSchedules, Schedules};
use tracing::{info, warn};

use crate::def::schedule_of;
use crate::metrics;
use crate::shared::Shared;

/// Reads the definitions of live schedules this instance does not fire otherwise, and replaces
/// the adopted set when they changed.
pub(crate) async fn refresh<B: Schedules>(sh: &Shared<B>) {
    let mut known: Vec<String> = sh.schedules.iter().map(|s| s.id.clone()).collect();
    known.extend(sh.runtime.borrow().iter().map(|s| s.id.clone()));
    let live_within = sh.config.publish_interval.saturating_mul(3);
    let mut defs = match sh
        .broker
        .registered_defs(&sh.instance, live_within, &known)
        .await
    {
        Ok(defs) => defs,
        Err(e) => {
            warn!(error = %e, "could not read the schedules other instances register");
            return;
        }
    };
    defs.sort_by(|a, b| a.id.cmp(&b.id));
    let known: HashSet<&str> = known.iter().map(String::as_str).collect();
    let mut set = Vec::with_capacity(defs.len());
    for d in defs {
        if known.contains(d.id.as_str()) {
            continue;
        }
        match schedule_of(&d) {
            Ok(s) => set.push((d, s)),
            Err(e) => {
                warn!(schedule = %d.id, error = %e, "a registered schedule this version cannot fire; ignored")
            }
        }
    }
    sh.adopted.send_if_modified(|cur| {
        if cur.len() == set.len() && cur.iter().zip(&set).all(|((a, _), (b, _))| a == b) {
            return false;
        }
        info!(
            schedules = set.len(),
            "firing schedules that only other instances register"
        );
        *cur = Arc::new(std::mem::take(&mut set));
        true
    });
    metrics::adopted(sh.adopted.borrow().len());
}

/// While this instance leads, refreshes the adopted set once per publish interval.
pub(crate) async fn run<B: Schedules + ManageSchedules>(sh: Arc<Shared<B>>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(sh.config.publish_interval) => {
                if sh.counters.is_leader.load(Ordering::SeqCst) {
                    refresh(&sh).await;
                }
            }
            _ = sh.stop.cancelled() => return,
        }
    }
}
