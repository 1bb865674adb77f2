//! Leader election and, while leading, firing: catch-up first, then each trigger at its time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{
    BrokerError, FireOutcome, ManageSchedules, QueueName, ScheduleDef, Schedules, Trigger,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{info, info_span, warn, Instrument};

use crate::misfire::plan;
use crate::schedule::Schedule;
use crate::scheduler::Shared;
use crate::{adopter, metrics};

/// Triggers per fire call: one round trip each, short enough not to hold Redis for long.
const FIRE_CHUNK: usize = 500;

/// A resign request: answered with whether this instance led and released the lock.
pub(crate) type ResignRequest = oneshot::Sender<Result<bool, BrokerError>>;

pub(crate) async fn run<B: Schedules + ManageSchedules + Clone + 'static>(
    sh: Arc<Shared<B>>,
    mut resign_rx: mpsc::Receiver<ResignRequest>,
) {
    let token = format!("{}:{:016x}", sh.instance, rand::random::<u64>());
    let ttl = sh.config.leader_ttl;
    let mut resignations = match sh.broker.resignations().await {
        Ok(rx) => Some(rx),
        Err(e) => {
            warn!(error = %e, "no resign notifications; followers poll the lock only");
            None
        }
    };
    let mut cooldown_until: Option<Instant> = None;
    // The highest fence seen above our own epoch: the next acquisition takes an epoch above it.
    let mut min_epoch = 0;
    while !sh.stop.is_cancelled() {
        if cooldown_until.is_none_or(|t| Instant::now() >= t) {
            let asked = Instant::now();
            match sh
                .broker
                .acquire_leadership(&token, &sh.instance, ttl, min_epoch)
                .await
            {
                Ok(Some(epoch)) => {
                    let end = lead(&sh, &token, epoch, asked, &mut resign_rx)
                        .instrument(info_span!("leader", instance = %sh.instance, epoch))
                        .await;
                    cooldown_until = None;
                    match end {
                        // After handing over, stay out for one TTL so a follower takes the lock.
                        End::Resigned => cooldown_until = Some(Instant::now() + ttl),
                        End::Fenced(fence) => min_epoch = min_epoch.max(fence),
                        End::Lost => {}
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => warn!(error = %e, "leader election failed; retrying"),
            }
        }
        // A follower polls at half the TTL (pub/sub is only a hint and can be missed) and wakes
        // at once on a resign message.
        metrics::leader(false);
        tokio::select! {
            _ = tokio::time::sleep(ttl / 2) => {}
            _ = recv(&mut resignations) => {}
            Some(reply) = resign_rx.recv() => { let _ = reply.send(Ok(false)); }
            _ = sh.stop.cancelled() => return,
        }
    }
}

async fn recv(rx: &mut Option<tokio::sync::mpsc::Receiver<()>>) {
    match rx {
        Some(r) => {
            if r.recv().await.is_none() {
                *rx = None;
            }
        }
        None => std::future::pending().await,
    }
}

/// How a leadership term ended.
enum End {
    /// Resigned (shutdown or on request).
    Resigned,
    /// Lost the lock, or could not prove it still held it.
    Lost,
    /// A fence above its epoch was found: a newer leader exists, or the epoch counter was lost
    /// (a Redis shard restarted empty). The lock is released and the next term starts above it.
    Fenced(u64),
}

/// One leadership term.
async fn lead<B: Schedules + ManageSchedules + Clone + 'static>(
    sh: &Shared<B>,
    token: &str,
    epoch: u64,
    asked: Instant,
    resign_rx: &mut mpsc::Receiver<ResignRequest>,
) -> End {
    let ttl = sh.config.leader_ttl;
    let c = &sh.counters;
    c.is_leader.store(true, Ordering::SeqCst);
    c.epoch.store(epoch, Ordering::SeqCst);
    c.elections_won.fetch_add(1, Ordering::Relaxed);
    metrics::leader(true);
    info!("became scheduler leader");
    // The lock was set after `asked`, so it lives at least until asked + ttl; keep a margin for
    // clock-rate differences and stop firing before then unless a renewal extends it.
    let mut valid_until = asked + ttl * 9 / 10;
    let mut renew_at = asked + ttl / 2;

    // The schedules of this term: those registered in code, then the active runtime ones,
    // replaced whenever the watcher loads a new runtime set.
    let mut runtime = sh.runtime.subscribe();
    let mut adopted = sh.adopted.subscribe();
    // The live schedules other instances register and this one does not, read now so that
    // this term's catch-up covers them too.
    adopter::refresh(sh).await;
    let mut set = current(
        sh,
        &runtime.borrow_and_update(),
        &adopted.borrow_and_update(),
    );
    let mut queues: Vec<QueueName> = Vec::new();
    if let Err(term) = raise_fences(sh, epoch, &set, &mut queues).await {
        return step_down(sh, token, term, &queues).await;
    }
    // Each schedule's last task as far as this term knows: the hint for the overlap check.
    let mut last_task: Vec<Option<String>> = vec![None; set.len()];
    let mut next = match catch_up(sh, epoch, &set, &mut last_task).await {
        Ok(next) => next,
        Err(outcome) => return step_down(sh, token, outcome, &queues).await,
    };

    loop {
        let now = sh.now();
        let due_in = next
            .iter()
            .flatten()
            .min()
            .map(|&t| Duration::from_millis(u64::try_from(t.saturating_sub(now)).unwrap_or(0)));
        let wake = match due_in {
            Some(d) => (Instant::now() + d).min(renew_at),
            None => renew_at,
        };
        let mut reload = false;
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = sh.stop.cancelled() => return step_down(sh, token, Term::Resign, &queues).await,
            Some(reply) = resign_rx.recv() => {
                let (end, released) = resign(sh, token).await;
                let _ = reply.send(released);
                return end;
            }
            Ok(()) = runtime.changed() => reload = true,
            Ok(()) = adopted.changed() => reload = true,
        }
        if reload {
            let new_set = current(
                sh,
                &runtime.borrow_and_update(),
                &adopted.borrow_and_update(),
            );
            if let Err(term) = apply(
                sh,
                epoch,
                &mut set,
                new_set,
                &mut queues,
                &mut next,
                &mut last_task,
            )
            .await
            {
                return step_down(sh, token, term, &queues).await;
            }
        }
        if Instant::now() >= renew_at {
            let t0 = Instant::now();
            match sh.broker.renew_leadership(token, ttl).await {
                Ok(true) => {
                    metrics::leader(true);
                    valid_until = t0 + ttl * 9 / 10;
                    renew_at = t0 + ttl / 2;
                }
                Ok(false) => return step_down(sh, token, Term::Lost, &queues).await,
                Err(e) => {
                    warn!(error = %e, "could not renew the leader lock");
                    renew_at = Instant::now() + (ttl / 10).min(Duration::from_millis(200));
                }
            }
        }
        if Instant::now() >= valid_until {
            warn!("leader lock not renewed in time; stepping down");
            return step_down(sh, token, Term::Lost, &queues).await;
        }
        let now = sh.now();
        let (due, missed) = due_now(sh, &set, &mut next, now);
        if due.is_empty() && missed.is_empty() {
            continue;
        }
        match fire(sh, epoch, &set, &due, &missed, &mut last_task).await {
            Ok(()) => {}
            Err(Term::Failed(failed)) => {
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
            Err(term) => return step_down(sh, token, term, &queues).await,
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

/// Raises the fence of every queue of `set` not yet in `queues` (adding it there): a paused,
/// deposed leader that wakes up is then refused in those queues too.
async fn raise_fences<B: Schedules>(
    sh: &Shared<B>,
    epoch: u64,
    set: &[Schedule],
    queues: &mut Vec<QueueName>,
) -> Result<(), Term> {
    let mut new: Vec<QueueName> = set
        .iter()
        .map(|s| s.queue.clone())
        .filter(|q| !queues.contains(q))
        .collect();
    new.sort();
    new.dedup();
    let mut highest = epoch;
    for q in &new {
        match sh.broker.fence(q, epoch).await {
            Ok(fence) => highest = highest.max(fence),
            Err(e) => {
                warn!(queue = %q, error = %e, "could not raise the fence; fire calls still check it")
            }
        }
    }
    queues.extend(new);
    queues.sort();
    if highest > epoch {
        return Err(Term::Fenced(highest));
    }
    Ok(())
}

/// Switches the term to a new set of schedules (the runtime ones changed). A schedule kept
/// with the same spec keeps its next trigger; one whose spec changed takes the new spec's next
/// trigger after now; a new one (added or resumed) is caught up like at the start of a term,
/// from the later of its last fired trigger and its activation; a removed or paused one is
/// dropped and fires nothing more.
async fn apply<B: Schedules>(
    sh: &Shared<B>,
    epoch: u64,
    set: &mut Vec<Schedule>,
    new_set: Vec<Schedule>,
    queues: &mut Vec<QueueName>,
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
    raise_fences(sh, epoch, &new_set, queues).await?;
    if !added.is_empty() {
        let sub: Vec<Schedule> = added.iter().map(|&j| new_set[j].clone()).collect();
        let mut sub_last = vec![None; sub.len()];
        let sub_next = catch_up(sh, epoch, &sub, &mut sub_last).await?;
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
pub(crate) fn due_now<B>(
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

enum Term {
    Resign,
    Lost,
    Stale,
    Fenced(u64),
    Failed(Vec<(usize, i64)>),
}

/// Ends a term on request: stops firing, then releases the lock and says whether that worked.
async fn resign<B: Schedules>(sh: &Shared<B>, token: &str) -> (End, Result<bool, BrokerError>) {
    let c = &sh.counters;
    c.is_leader.store(false, Ordering::SeqCst);
    c.epoch.store(0, Ordering::SeqCst);
    metrics::leader(false);
    metrics::adopted(0);
    let released = sh.broker.resign_leadership(token).await;
    match &released {
        Ok(_) => info!("resigned the scheduler leadership"),
        Err(e) => warn!(error = %e, "could not release the lock; it expires by itself"),
    }
    (End::Resigned, released)
}

async fn step_down<B: Schedules>(
    sh: &Shared<B>,
    token: &str,
    term: Term,
    queues: &[QueueName],
) -> End {
    let c = &sh.counters;
    c.is_leader.store(false, Ordering::SeqCst);
    c.epoch.store(0, Ordering::SeqCst);
    metrics::leader(false);
    metrics::adopted(0);
    match term {
        Term::Resign => resign(sh, token).await.0,
        Term::Lost | Term::Failed(_) => {
            warn!("lost the scheduler leadership");
            End::Lost
        }
        Term::Fenced(fence) => {
            release(sh, token).await;
            warn!(
                fence,
                "a fence above this epoch exists; re-electing above it"
            );
            End::Fenced(fence)
        }
        Term::Stale => {
            // Learn the fence that refused us, so a lost epoch counter is passed next time.
            let mut fence = 0;
            for q in queues {
                if let Ok(f) = sh.broker.fence(q, 0).await {
                    fence = fence.max(f);
                }
            }
            release(sh, token).await;
            warn!(fence, "a newer epoch fenced this leader off; stepping down");
            End::Fenced(fence)
        }
    }
}

/// Compare-and-delete of the lock: a no-op when it already belongs to someone else.
async fn release<B: Schedules>(sh: &Shared<B>, token: &str) {
    if let Err(e) = sh.broker.resign_leadership(token).await {
        warn!(error = %e, "could not release the lock; it expires by itself");
    }
}

/// Fires what the misfire policies allow for the gap since each schedule last fired, and
/// returns each schedule's next trigger after now.
///
/// Catch-up of a schedule starts after the later of its last fired trigger and its first
/// registration anywhere in the cluster: an id never fires a trigger from before it existed,
/// even when a last-fired mark of an earlier life (one that outlived a prune, or was written
/// by an older version) is found under it.
async fn catch_up<B: Schedules>(
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
        if let Err(term) = fire(sh, epoch, set, &due, &missed, last_task).await {
            return Err(match term {
                Term::Failed(_) => Term::Lost,
                other => other,
            });
        }
    }
    Ok(set.iter().map(|s| s.spec.next_after(now)).collect())
}

/// Fires `due` (schedule index, trigger ms), one call per queue and chunk, concurrently; the
/// first call of each queue also records that queue's `missed` count.
async fn fire<B: Schedules>(
    sh: &Shared<B>,
    epoch: u64,
    set: &[Schedule],
    due: &[(usize, i64)],
    missed: &BTreeMap<QueueName, u64>,
    last_task: &mut [Option<String>],
) -> Result<(), Term> {
    let now = sh.now();
    let mut by_queue: BTreeMap<QueueName, Vec<(usize, i64, Trigger)>> = BTreeMap::new();
    for q in missed.keys() {
        by_queue.entry(q.clone()).or_default();
    }
    for &(i, t) in due {
        let Some(s) = set.get(i) else {
            continue;
        };
        let prev = last_task.get(i).cloned().flatten();
        match s.trigger(t, now, prev) {
            Ok(trigger) => by_queue
                .entry(s.queue.clone())
                .or_default()
                .push((i, t, trigger)),
            Err(e) => warn!(schedule = %s.id, error = %e, "could not build the trigger's task"),
        }
    }
    let dedup_ttl = sh.config.dedup_ttl();
    let calls = by_queue.iter().flat_map(|(q, items)| {
        let chunks: Vec<&[(usize, i64, Trigger)]> = if items.is_empty() {
            vec![&items[..]]
        } else {
            items.chunks(FIRE_CHUNK).collect()
        };
        let q_missed = missed.get(q).copied().unwrap_or(0);
        chunks
            .into_iter()
            .enumerate()
            .map(move |(n, chunk)| async move {
                let triggers: Vec<Trigger> = chunk.iter().map(|(_, _, t)| t.clone()).collect();
                let m = if n == 0 { q_missed } else { 0 };
                (
                    chunk,
                    sh.broker.fire(q, epoch, triggers, dedup_ttl, m).await,
                )
            })
    });
    // The calls share one auto-pipelined connection, so running them together overlaps their
    // round trips.
    let results = futures::future::join_all(calls).await;
    let (mut fired, mut suppressed, mut expired) = (0, 0, 0);
    let mut failed = Vec::new();
    let mut stale = false;
    for (chunk, result) in results {
        sh.counters.fire_calls.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(outcomes) => {
                for ((i, t, trig), o) in chunk.iter().zip(outcomes) {
                    let queue = set.get(*i).map_or("", |s| s.queue.as_str());
                    match o {
                        FireOutcome::Fired => {
                            fired += 1;
                            metrics::fired(queue, now.saturating_sub(*t));
                            if let Some(slot) = last_task.get_mut(*i) {
                                *slot = Some(trig.task.envelope.id.clone());
                            }
                        }
                        FireOutcome::Duplicate | FireOutcome::Overlap | FireOutcome::Unique => {
                            suppressed += 1;
                            metrics::suppressed(queue);
                        }
                        FireOutcome::Expired => {
                            expired += 1;
                            metrics::missed(queue, 1);
                        }
                        FireOutcome::Stale => stale = true,
                        FireOutcome::Invalid => {
                            expired += 1;
                            metrics::missed(queue, 1);
                            tracing::error!(
                                schedule = %trig.schedule_id,
                                "the trigger's task cannot be stored (payload over the broker's limit)"
                            );
                        }
                        other => {
                            warn!(schedule = %trig.schedule_id, outcome = ?other, "unknown fire outcome")
                        }
                    }
                    tracing::debug!(schedule = %trig.schedule_id, at = t, outcome = ?o, "trigger");
                }
            }
            Err(e) => {
                warn!(error = %e, n = chunk.len(), "fire failed; will retry these triggers");
                failed.extend(chunk.iter().map(|(i, t, _)| (*i, *t)));
            }
        }
    }
    let c = &sh.counters;
    c.fired.fetch_add(fired, Ordering::Relaxed);
    c.suppressed.fetch_add(suppressed, Ordering::Relaxed);
    c.missed.fetch_add(expired, Ordering::Relaxed);
    if stale {
        Err(Term::Stale)
    } else if !failed.is_empty() {
        Err(Term::Failed(failed))
    } else {
        Ok(())
    }
}
