//! One round of firing: the due triggers of a term, grouped by queue and chunk, each chunk one
//! fenced, deduplicated fire call, all calls of the round in flight together.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use chronos_core::{FireOutcome, QueueName, Schedules, Trigger};
use tracing::warn;

use crate::metrics;
use crate::schedule::Schedule;
use crate::shared::Shared;

/// Triggers per fire call: one round trip each, short enough not to hold Redis for long.
const FIRE_CHUNK: usize = 500;

/// Why a round did not fire everything it was given.
#[derive(Debug)]
pub(crate) enum FireError {
    /// A fence above this leader's epoch refused a call: a newer leader exists.
    Stale,
    /// Calls whose outcome is unknown (the broker failed): their (schedule index, trigger ms).
    /// The fire script is idempotent, so firing them again is safe.
    Failed(Vec<(usize, i64)>),
}

/// Fires `due` (schedule index, trigger ms), one call per queue and chunk, concurrently; the
/// first call of each queue also records that queue's `missed` count. Updates `last_task` with
/// each fired trigger's task, the hint of the overlap check.
pub(crate) async fn fire<B: Schedules>(
    sh: &Shared<B>,
    epoch: u64,
    set: &[Schedule],
    due: &[(usize, i64)],
    missed: &BTreeMap<QueueName, u64>,
    last_task: &mut [Option<String>],
) -> Result<(), FireError> {
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
        // A queue with only missed triggers still gets one (empty) call, to record them.
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
        Err(FireError::Stale)
    } else if !failed.is_empty() {
        Err(FireError::Failed(failed))
    } else {
        Ok(())
    }
}
