//! Catch-up: what a new leader (or a schedule new to the term) fires for the triggers that fell
//! due while nobody fired them, as each schedule's misfire policy allows.
//!
//! Catch-up of a schedule starts after the later of its last fired trigger and its first
//! registration anywhere in the cluster: an id never fires a trigger from before it existed,
//! even when a last-fired mark of an earlier life (one that outlived a prune, or was written
//! by an older version) is found under it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use chronos_core::{QueueName, Schedules};
use tracing::{info, warn};

use crate::batch::{fire, FireError};
use crate::election::Term;
use crate::metrics;
use crate::misfire::plan;
use crate::schedule::Schedule;
use crate::shared::Shared;

/// Fires what the misfire policies allow for the gap since each schedule of `set` last fired,
/// fills `last_task` from the fire state, and returns each schedule's next trigger after now.
pub(crate) async fn catch_up<B: Schedules>(
    sh: &Shared<B>,
    epoch: u64,
    set: &[Schedule],
    last_task: &mut [Option<String>],
) -> Result<Vec<Option<i64>>, Term> {
    let now = sh.now();
    let mut start = vec![None; set.len()];
    let mut queues: Vec<&QueueName> = set.iter().map(|s| &s.queue).collect();
    queues.sort();
    queues.dedup();
    for q in queues {
        let idx: Vec<usize> = (0..set.len()).filter(|&i| set[i].queue == *q).collect();
        let ids: Vec<String> = idx.iter().map(|&i| set[i].id.clone()).collect();
        let state = match sh.broker.fire_state(q, &ids).await {
            Ok(state) => state,
            Err(e) => {
                warn!(queue = %q, error = %e, "could not read fire state");
                return Err(Term::Lost);
            }
        };
        let mut unmarked = Vec::new();
        for (&i, st) in idx.iter().zip(state) {
            last_task[i] = st.last_task_id;
            // A runtime schedule starts at its activation (added or resumed), which was
            // stored with it: the registration mark, written when a leader first saw it, may
            // come later and would drop the triggers in between. Its fire state is forgotten
            // on removal, and the activation fences marks of an earlier life anyway.
            if let Some(since) = set[i].since_ms {
                start[i] = Some(st.last_fired_ms.map_or(since, |l| l.max(since)));
                if st.registered_ms.is_none() {
                    unmarked.push((i, None));
                }
                continue;
            }
            match st.registered_ms {
                Some(reg) => start[i] = Some(st.last_fired_ms.map_or(reg, |l| l.max(reg))),
                None => unmarked.push((i, st.last_fired_ms)),
            }
        }
        if !unmarked.is_empty() {
            // Not marked (pruned since this instance started, or its start could not reach
            // Redis): the mark written now is the first registration.
            let ids: Vec<String> = unmarked.iter().map(|&(i, _)| set[i].id.clone()).collect();
            match sh.broker.register_schedules(q, &ids).await {
                Ok(marks) => {
                    for (&(i, last), reg) in unmarked.iter().zip(marks) {
                        if set[i].since_ms.is_none() {
                            start[i] = Some(last.map_or(reg, |l| l.max(reg)));
                        }
                    }
                }
                Err(e) => {
                    warn!(queue = %q, error = %e, "could not mark first registrations");
                    return Err(Term::Lost);
                }
            }
        }
    }
    let mut due = Vec::new();
    let mut missed: BTreeMap<QueueName, u64> = BTreeMap::new();
    let mut total = 0;
    for (i, s) in set.iter().enumerate() {
        let p = plan(&s.misfire, &s.spec, start[i], now);
        if p.missed > 0 {
            *missed.entry(s.queue.clone()).or_default() += p.missed;
            total += p.missed;
            metrics::missed(s.queue.as_str(), p.missed);
        }
        due.extend(p.fire.into_iter().map(|t| (i, t)));
    }
    if total > 0 {
        sh.counters.missed.fetch_add(total, Ordering::Relaxed);
        info!(
            missed = total,
            "catch-up skipped triggers by misfire policy"
        );
    }
    if !due.is_empty() || !missed.is_empty() {
        if !due.is_empty() {
            info!(n = due.len(), "catching up on missed triggers");
        }
        if let Err(e) = fire(sh, epoch, set, &due, &missed, last_task).await {
            // A catch-up whose outcome is unknown is not retried in place: the term ends, and
            // the next one catches up from the fire state as it then is.
            return Err(match e {
                FireError::Stale => Term::Stale,
                FireError::Failed(_) => Term::Lost,
            });
        }
    }
    Ok(set.iter().map(|s| s.spec.next_after(now)).collect())
}
