//! Every instance polls the revision of the runtime schedules and reloads them when it moved,
//! so a leader (this one now, or this one after a failover) always holds a recent set.

use std::collections::HashSet;
use std::sync::Arc;

use chronos_core::{ManageSchedules, StoredDef};
use tracing::{info, warn};

use crate::def::schedule_of;
use crate::schedule::Schedule;
use crate::shared::Shared;

/// The active (not paused) runtime schedules, by id, minus those whose id a schedule
/// registered in code on this instance uses (code wins, so one id never fires twice here).
fn active(code: &[Schedule], defs: Vec<StoredDef>) -> Vec<Schedule> {
    let code_ids: HashSet<&str> = code.iter().map(|s| s.id.as_str()).collect();
    let mut out = Vec::new();
    for d in defs {
        if d.def.paused {
            continue;
        }
        if code_ids.contains(d.def.id.as_str()) {
            warn!(schedule = %d.def.id, "a runtime schedule uses the id of a schedule registered in code; ignored");
            continue;
        }
        match schedule_of(&d.def) {
            Ok(s) => out.push(s),
            Err(e) => warn!(schedule = %d.def.id, error = %e, "invalid runtime schedule; ignored"),
        }
    }
    out
}

/// Reloads the runtime set when the revision differs from `seen`.
pub(crate) async fn refresh<B: ManageSchedules>(sh: &Shared<B>, seen: &mut Option<u64>) {
    let rev = match sh.broker.schedule_revision().await {
        Ok(rev) => rev,
        Err(e) => {
            warn!(error = %e, "could not read the runtime schedules' revision");
            return;
        }
    };
    if *seen == Some(rev) {
        return;
    }
    // A change between these two reads shows up as a newer revision at the next poll.
    match sh.broker.schedule_defs().await {
        Ok(defs) => {
            let set = active(&sh.schedules, defs);
            if seen.is_some() || !set.is_empty() {
                info!(
                    revision = rev,
                    active = set.len(),
                    "runtime schedules loaded"
                );
            }
            sh.runtime.send_replace(Arc::new(set));
            *seen = Some(rev);
        }
        Err(e) => warn!(error = %e, "could not read the runtime schedules"),
    }
}

/// Polls the revision once per `runtime_poll` until the scheduler stops (never, without one).
pub(crate) async fn run<B: ManageSchedules>(sh: Arc<Shared<B>>, mut seen: Option<u64>) {
    let Some(every) = sh.config.runtime_poll else {
        return;
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => refresh(&sh, &mut seen).await,
            _ = sh.stop.cancelled() => return,
        }
    }
}
