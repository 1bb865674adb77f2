//! Leader election and, while leading, firing: catch-up first, then each trigger at its time.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{now_ms, Broker, FireOutcome, QueueName, SchedulerMetrics, Trigger};
use tokio::time::Instant;
use tracing::{info, info_span, warn, Instrument};

use crate::misfire::plan;
use crate::scheduler::Shared;

/// Triggers per fire call: one round trip each, short enough not to hold Redis for long.
const FIRE_CHUNK: usize = 500;
/// Most triggers of one schedule fired in one tick while catching up after a stall.
const MAX_DUE_PER_TICK: usize = 100;

pub(crate) async fn run<B: Broker>(sh: Arc<Shared<B>>) {
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
                    let end = lead(&sh, &token, epoch, asked)
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
        tokio::select! {
            _ = tokio::time::sleep(ttl / 2) => {}
            _ = recv(&mut resignations) => {}
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
async fn lead<B: Broker>(sh: &Shared<B>, token: &str, epoch: u64, asked: Instant) -> End {
    let ttl = sh.config.leader_ttl;
    let c = &sh.counters;
    c.is_leader.store(true, Ordering::SeqCst);
    c.epoch.store(epoch, Ordering::SeqCst);
    c.elections_won.fetch_add(1, Ordering::Relaxed);
    info!("became scheduler leader");
    // The lock was set after `asked`, so it lives at least until asked + ttl; keep a margin for
    // clock-rate differences and stop firing before then unless a renewal extends it.
    let mut valid_until = asked + ttl * 9 / 10;
    let mut renew_at = asked + ttl / 2;

    let mut queues: Vec<QueueName> = sh.schedules.iter().map(|s| s.queue.clone()).collect();
    queues.sort();
    queues.dedup();
    let mut highest = epoch;
    for q in &queues {
        match sh.broker.fence(q, epoch).await {
            Ok(fence) => highest = highest.max(fence),
            Err(e) => {
                warn!(queue = %q, error = %e, "could not raise the fence; fire calls still check it")
            }
        }
    }
    if highest > epoch {
        return step_down(sh, token, Term::Fenced(highest)).await;
    }
    let mut next = match catch_up(sh, epoch, &queues).await {
        Ok(next) => next,
        Err(outcome) => return step_down(sh, token, outcome).await,
    };

    loop {
        let now = now_ms();
        let due_in = next
            .iter()
            .flatten()
            .min()
            .map(|&t| Duration::from_millis(u64::try_from(t - now).unwrap_or(0)));
        let wake = match due_in {
            Some(d) => (Instant::now() + d).min(renew_at),
            None => renew_at,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = sh.stop.cancelled() => return step_down(sh, token, Term::Resign).await,
            _ = sh.resign.notified() => return step_down(sh, token, Term::Resign).await,
        }
        if Instant::now() >= renew_at {
            let t0 = Instant::now();
            match sh.broker.renew_leadership(token, ttl).await {
                Ok(true) => {
                    valid_until = t0 + ttl * 9 / 10;
                    renew_at = t0 + ttl / 2;
                }
                Ok(false) => return step_down(sh, token, Term::Lost).await,
                Err(e) => {
                    warn!(error = %e, "could not renew the leader lock");
                    renew_at = Instant::now() + (ttl / 10).min(Duration::from_millis(200));
                }
            }
        }
        if Instant::now() >= valid_until {
            warn!("leader lock not renewed in time; stepping down");
            return step_down(sh, token, Term::Lost).await;
        }
        let now = now_ms();
        let mut due: Vec<(usize, i64)> = Vec::new();
        for (i, slot) in next.iter_mut().enumerate() {
            let mut n = 0;
            while let Some(t) = *slot {
                if t > now || n == MAX_DUE_PER_TICK {
                    break;
                }
                due.push((i, t));
                *slot = sh.schedules[i].spec.next_after(t);
                n += 1;
            }
        }
        if due.is_empty() {
            continue;
        }
        match fire(sh, epoch, &due).await {
            Ok(()) => {}
            Err(Term::Failed(failed)) => {
                // Unknown outcome: put those schedules back to the earliest unfired trigger; the
                // fire script is idempotent, so firing one again is safe.
                for (i, t) in failed {
                    if next[i].is_none_or(|n| t < n) {
                        next[i] = Some(t);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(term) => return step_down(sh, token, term).await,
        }
    }
}

enum Term {
    Resign,
    Lost,
    Stale,
    Fenced(u64),
    Failed(Vec<(usize, i64)>),
}

async fn step_down<B: Broker>(sh: &Shared<B>, token: &str, term: Term) -> End {
    let c = &sh.counters;
    c.is_leader.store(false, Ordering::SeqCst);
    c.epoch.store(0, Ordering::SeqCst);
    match term {
        Term::Resign => {
            release(sh, token).await;
            info!("resigned the scheduler leadership");
            End::Resigned
        }
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
            for s in &sh.schedules {
                if let Ok(f) = sh.broker.fence(&s.queue, 0).await {
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
async fn release<B: Broker>(sh: &Shared<B>, token: &str) {
    if let Err(e) = sh.broker.resign_leadership(token).await {
        warn!(error = %e, "could not release the lock; it expires by itself");
    }
}

/// Fires what the misfire policies allow for the gap since each schedule last fired, and
/// returns each schedule's next trigger after now.
async fn catch_up<B: Broker>(
    sh: &Shared<B>,
    epoch: u64,
    queues: &[QueueName],
) -> Result<Vec<Option<i64>>, Term> {
    let now = now_ms();
    let mut last = vec![None; sh.schedules.len()];
    let mut unmarked: Vec<(QueueName, String)> = Vec::new();
    for q in queues {
        let idx: Vec<usize> = (0..sh.schedules.len())
            .filter(|&i| sh.schedules[i].queue == *q)
            .collect();
        let ids: Vec<String> = idx.iter().map(|&i| sh.schedules[i].id.clone()).collect();
        match sh.broker.fire_state(q, &ids).await {
            Ok(state) => {
                for (&i, st) in idx.iter().zip(state) {
                    // Never fired: catch up from when a leader first saw it.
                    last[i] = st.last_fired_ms.or(st.watermark_ms);
                    if last[i].is_none() {
                        unmarked.push((q.clone(), sh.schedules[i].id.clone()));
                    }
                }
            }
            Err(e) => {
                warn!(queue = %q, error = %e, "could not read fire state");
                return Err(Term::Lost);
            }
        }
    }
    for q in queues {
        let ids: Vec<String> = unmarked
            .iter()
            .filter(|(uq, _)| uq == q)
            .map(|(_, id)| id.clone())
            .collect();
        if !ids.is_empty() {
            if let Err(e) = sh.broker.set_watermarks(q, &ids, now).await {
                warn!(queue = %q, error = %e, "could not record catch-up watermarks");
            }
        }
    }
    let mut due = Vec::new();
    let mut missed = 0;
    for (i, s) in sh.schedules.iter().enumerate() {
        let p = plan(&s.misfire, &s.spec, last[i], now);
        missed += p.missed;
        due.extend(p.fire.into_iter().map(|t| (i, t)));
    }
    if missed > 0 {
        sh.counters.missed.fetch_add(missed, Ordering::Relaxed);
        info!(missed, "catch-up skipped triggers by misfire policy");
        report(
            sh,
            SchedulerMetrics {
                missed,
                ..Default::default()
            },
        )
        .await;
    }
    if !due.is_empty() {
        info!(n = due.len(), "catching up on missed triggers");
        if let Err(term) = fire(sh, epoch, &due).await {
            return Err(match term {
                Term::Failed(_) => Term::Lost,
                other => other,
            });
        }
    }
    Ok(sh
        .schedules
        .iter()
        .map(|s| s.spec.next_after(now))
        .collect())
}

/// Fires `due` (schedule index, trigger ms), one call per queue and chunk, concurrently.
async fn fire<B: Broker>(sh: &Shared<B>, epoch: u64, due: &[(usize, i64)]) -> Result<(), Term> {
    let mut by_queue: BTreeMap<QueueName, Vec<(usize, i64, Trigger)>> = BTreeMap::new();
    for &(i, t) in due {
        let s = &sh.schedules[i];
        match s.trigger(t) {
            Ok(trigger) => by_queue
                .entry(s.queue.clone())
                .or_default()
                .push((i, t, trigger)),
            Err(e) => warn!(schedule = %s.id, error = %e, "could not build the trigger's task"),
        }
    }
    let dedup_ttl = sh.config.dedup_ttl();
    let calls = by_queue.iter().flat_map(|(q, items)| {
        items.chunks(FIRE_CHUNK).map(move |chunk| async move {
            let triggers: Vec<Trigger> = chunk.iter().map(|(_, _, t)| t.clone()).collect();
            (chunk, sh.broker.fire(q, epoch, triggers, dedup_ttl).await)
        })
    });
    // The calls share one auto-pipelined connection, so running them together overlaps their
    // round trips.
    let results = futures::future::join_all(calls).await;
    let mut delta = SchedulerMetrics::default();
    let mut failed = Vec::new();
    let mut stale = false;
    for (chunk, result) in results {
        sh.counters.fire_calls.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(outcomes) => {
                for ((_, t, trig), o) in chunk.iter().zip(outcomes) {
                    match o {
                        FireOutcome::Fired => delta.fired += 1,
                        FireOutcome::Duplicate | FireOutcome::Overlap => delta.suppressed += 1,
                        FireOutcome::Stale => stale = true,
                        FireOutcome::Invalid => {
                            delta.missed += 1;
                            tracing::error!(
                                schedule = %trig.schedule_id,
                                "the trigger's task cannot be stored (payload over the broker's limit)"
                            );
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
    sh.counters.fired.fetch_add(delta.fired, Ordering::Relaxed);
    sh.counters
        .suppressed
        .fetch_add(delta.suppressed, Ordering::Relaxed);
    report(sh, delta).await;
    if stale {
        Err(Term::Stale)
    } else if !failed.is_empty() {
        Err(Term::Failed(failed))
    } else {
        Ok(())
    }
}

async fn report<B: Broker>(sh: &Shared<B>, delta: SchedulerMetrics) {
    if delta != SchedulerMetrics::default() {
        if let Err(e) = sh.broker.add_scheduler_metrics(delta).await {
            warn!(error = %e, "could not record scheduler metrics");
        }
    }
}
