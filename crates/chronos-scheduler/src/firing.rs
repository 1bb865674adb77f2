//! What a leader does during its term: catch-up first, then each trigger at its time, over
//! the set of schedules it fires (those registered in code, the active runtime ones, and those
//! only other live instances register), switching sets when one of the sources changes.
//!
//! The term holds its [`Lease`] and wakes for whichever comes first: the next trigger or the
//! next renewal. It stops firing as soon as the lease can no longer be proven held.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use chronos_core::{ManageSchedules, QueueName, ScheduleDef, Schedules};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::adopter;
use crate::batch::{fire, FireError};
use crate::catchup::catch_up;
use crate::election::{End, Lease, Term};
use crate::metrics;
use crate::misfire::plan;
use crate::schedule::Schedule;
use crate::shared::{ResignRequest, Shared};

/// One leadership term, from the acquired `lease` until it ends.
pub(crate) async fn term<B: Schedules + ManageSchedules + Clone + 'static>(
    sh: &Shared<B>,
    mut lease: Lease,
    resign_rx: &mut mpsc::Receiver<ResignRequest>,
) -> End {
    lease.announce(sh);
    let epoch = lease.epoch();
    // The schedules of this term: those registered in code, then the active runtime ones,
    // replaced whenever the watcher loads a new runtime set.
    let mut runtime = sh.runtime.subscribe();
    let mut adopted = sh.adopted.subscribe();
    // The live schedules other instances register and this one does not, read now so that
    // this term's catch-up covers them too.
    adopter::refresh(sh).await;
    let mut runtime_seen = runtime_queues(&runtime.borrow_and_update());
    let mut set = current(
        sh,
        &runtime.borrow_and_update(),
        &adopted.borrow_and_update(),
    );
    if let Err(term) = lease.fence(sh, &set).await {
        return lease.step_down(sh, term).await;
    }
    // Each schedule's last task as far as this term knows: the hint for the overlap check.
    let mut last_task: Vec<Option<String>> = vec![None; set.len()];
    let mut next = match catch_up(sh, epoch, &set, &mut last_task).await {
        Ok(next) => next,
        Err(term) => return lease.step_down(sh, term).await,
    };

    loop {
        let now = sh.now();
        let due_in = next
            .iter()
            .flatten()
            .min()
            .map(|&t| Duration::from_millis(u64::try_from(t.saturating_sub(now)).unwrap_or(0)));
        let wake = match due_in {
            Some(d) => (Instant::now() + d).min(lease.renew_at()),
            None => lease.renew_at(),
        };
        let mut reload = false;
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = sh.stop.cancelled() => return lease.step_down(sh, Term::Resign).await,
            Some(reply) = resign_rx.recv() => {
                let (end, released) = lease.resign(sh).await;
                let _ = reply.send(released);
                return end;
            }
            Ok(()) = runtime.changed() => reload = true,
            Ok(()) = adopted.changed() => reload = true,
        }
        if reload {
            let now_runtime = runtime_queues(&runtime.borrow_and_update());
            let new_set = current(
                sh,
                &runtime.borrow_and_update(),
                &adopted.borrow_and_update(),
            );
            if let Err(term) =
                apply(sh, &mut lease, &mut set, new_set, &mut next, &mut last_task).await
            {
                return lease.step_down(sh, term).await;
            }
            let left = std::mem::replace(&mut runtime_seen, now_runtime);
            forget_removed(sh, &set, &runtime_seen, left).await;
        }
        if let Err(term) = lease.keep(sh).await {
            return lease.step_down(sh, term).await;
        }
        let now = sh.now();
        let (due, missed) = due_now(sh, &set, &mut next, now);
        if due.is_empty() && missed.is_empty() {
            continue;
        }
        match fire(sh, epoch, &set, &due, &missed, &mut last_task).await {
            Ok(()) => {}
            Err(FireError::Failed(failed)) => {
                // Unknown outcome: put those schedules back to the earliest unfired trigger; the
                // fire script is idempotent, so firing one again is safe.
                for (i, t) in failed {
                    if let Some(slot) = next.get_mut(i) {
                        if slot.is_none_or(|n| t < n) {
                            *slot = Some(t);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(FireError::Stale) => return lease.step_down(sh, Term::Stale).await,
        }
    }
}

/// The queue of each active runtime schedule, by id.
fn runtime_queues(runtime: &[Schedule]) -> HashMap<String, QueueName> {
    runtime
        .iter()
        .map(|s| (s.id.clone(), s.queue.clone()))
        .collect()
}

/// Forgets the fire state of the runtime schedules that left this term's set because they were
/// removed (a paused one is still stored and keeps its state). The remover forgets it too, but
/// a trigger this leader fired between that and its reload wrote it again (seen by the
/// torture run: `sched:fires`, `sched:last` and `sched:task` left behind); now that this
/// leader fires them no more, nothing writes it after this. A failure is logged: the state of a
/// removed schedule is only clutter.
async fn forget_removed<B: ManageSchedules>(
    sh: &Shared<B>,
    set: &[Schedule],
    now: &HashMap<String, QueueName>,
    before: HashMap<String, QueueName>,
) {
    for (id, queue) in before {
        if now.contains_key(&id) || set.iter().any(|s| s.id == id) {
            continue;
        }
        match sh.broker.schedule_def(&id).await {
            Ok(None) => {
                if let Err(e) = sh
                    .broker
                    .forget_fire_state(&queue, std::slice::from_ref(&id))
                    .await
                {
                    warn!(schedule = %id, error = %e, "could not forget a removed schedule's fire state");
                }
            }
            Ok(Some(_)) => {}
            Err(e) => {
                warn!(schedule = %id, error = %e, "could not read a schedule that left the set")
            }
        }
    }
}

/// Code schedules, then the active runtime ones, then those only other instances register;
/// one schedule per id, the earlier source winning.
fn current<B>(
    sh: &Shared<B>,
    runtime: &[Schedule],
    adopted: &[(ScheduleDef, Schedule)],
) -> Vec<Schedule> {
    let mut set = sh.schedules.clone();
    let mut ids: HashSet<String> = set.iter().map(|s| s.id.clone()).collect();
    for s in runtime.iter().chain(adopted.iter().map(|(_, s)| s)) {
        if ids.insert(s.id.clone()) {
            set.push(s.clone());
        }
    }
    set
}

/// Switches the term to a new set of schedules (a source changed). A schedule kept with the
/// same spec keeps its next trigger; one whose spec changed takes the new spec's next trigger
/// after now; a new one (added or resumed) is caught up like at the start of a term, from the
/// later of its last fired trigger and its activation; a removed or paused one is dropped and
/// fires nothing more.
async fn apply<B: Schedules>(
    sh: &Shared<B>,
    lease: &mut Lease,
    set: &mut Vec<Schedule>,
    new_set: Vec<Schedule>,
    next: &mut Vec<Option<i64>>,
    last_task: &mut Vec<Option<String>>,
) -> Result<(), Term> {
    let now = sh.now();
    let old: HashMap<&str, usize> = set
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut new_next = vec![None; new_set.len()];
    let mut new_last = vec![None; new_set.len()];
    let mut added = Vec::new();
    for (j, s) in new_set.iter().enumerate() {
        match old.get(s.id.as_str()) {
            Some(&i) => {
                new_last[j] = last_task.get_mut(i).and_then(Option::take);
                let same = set
                    .get(i)
                    .is_some_and(|o| o.spec.describe() == s.spec.describe());
                new_next[j] = if same {
                    next.get(i).copied().flatten()
                } else {
                    s.spec.next_after(now)
                };
            }
            None => added.push(j),
        }
    }
    let dropped = set.len().saturating_sub(new_set.len() - added.len());
    lease.fence(sh, &new_set).await?;
    if !added.is_empty() {
        let sub: Vec<Schedule> = added.iter().map(|&j| new_set[j].clone()).collect();
        let mut sub_last = vec![None; sub.len()];
        let sub_next = catch_up(sh, lease.epoch(), &sub, &mut sub_last).await?;
        for ((&j, n), l) in added.iter().zip(sub_next).zip(sub_last) {
            new_next[j] = n;
            new_last[j] = l;
        }
    }
    info!(added = added.len(), dropped, "schedule set changed");
    *set = new_set;
    *next = new_next;
    *last_task = new_last;
    Ok(())
}

/// The triggers due at `now`, and per queue how many the misfire policies skipped; advances
/// each schedule's next trigger past `now`.
///
/// One due trigger per schedule is the normal case and fires. More than one means a backlog:
/// the wall clock jumped forward, the host was suspended, or the leader stalled for a whole
/// period. Then the schedule's misfire policy decides over every due trigger, exactly as in a
/// catch-up after an outage, instead of firing the whole backlog.
fn due_now<B>(
    sh: &Shared<B>,
    set: &[Schedule],
    next: &mut [Option<i64>],
    now: i64,
) -> (Vec<(usize, i64)>, BTreeMap<QueueName, u64>) {
    let mut due = Vec::new();
    let mut missed: BTreeMap<QueueName, u64> = BTreeMap::new();
    for (i, (slot, s)) in next.iter_mut().zip(set).enumerate() {
        let Some(t) = *slot else { continue };
        if t > now {
            continue;
        }
        if s.spec.next_after(t).is_some_and(|after| after <= now) {
            let p = plan(&s.misfire, &s.spec, Some(t.saturating_sub(1)), now);
            if p.missed > 0 {
                *missed.entry(s.queue.clone()).or_default() += p.missed;
                sh.counters.missed.fetch_add(p.missed, Ordering::Relaxed);
                metrics::missed(s.queue.as_str(), p.missed);
                warn!(schedule = %s.id, missed = p.missed, firing = p.fire.len(),
                      "a backlog of triggers fell due at once (clock jump or suspend?); \
                       the misfire policy skipped some");
            }
            due.extend(p.fire.into_iter().map(|x| (i, x)));
        } else {
            due.push((i, t));
        }
        *slot = s.spec.next_after(now);
    }
    (due, missed)
}
