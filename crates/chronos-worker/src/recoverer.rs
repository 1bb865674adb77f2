//! Takes deliveries whose worker stopped heartbeating (crashed, frozen, cut off) and re-queues
//! them, or dead-letters those with no attempt left; then reports the dead-lettered group
//! members to their groups, from the broker's reclaim outbox (see `drain`).
//!
//! What it costs an idle server does not grow with its queues: each period it reads the ids of
//! the live servers (one call) and passes over one queue, in turn. Every queue is passed over
//! when deliveries of a lost server may be waiting: at the start and once more
//! `recover_min_idle` later (a server lost before this one started, whose record is gone, left
//! deliveries that are idle long enough by then), and each period from the moment a server's
//! record expires (it stopped heartbeating) until its deliveries, idle since its last
//! heartbeat, are surely idle long enough to take (a server lost just before this one started
//! is among the live ones at first, so its expiry is seen). The turns catch the rest (a
//! blocking read's reply lost on a live server), within the queue count times
//! `recover_interval`.

use std::collections::HashSet;
use std::sync::Arc;

use chronos_core::{DecodeError, LeaseId, QueueName, TaskEnvelope};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::ended;
use crate::loops::Turn;
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// Most deliveries reclaimed per queue per pass (in pages of 100): a server that crashed holding
/// thousands is recovered in a pass or two, not at 100 per interval.
const PER_PASS: usize = 5000;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    let interval = rt.config.recover_interval;
    let settle = rt.config.recover_min_idle + interval;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut known: HashSet<String> = HashSet::new();
    let start = Instant::now();
    let mut every_queue_until = start;
    let mut second_pass = Some(start + rt.config.recover_min_idle);
    let mut first = true;
    let mut turn = Turn::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = rt.stop_maintenance.cancelled() => return,
        }
        match rt.broker.live_servers().await {
            Ok(live) => {
                let live: HashSet<String> = live.into_iter().collect();
                if let Some(gone) = known.iter().find(|id| !live.contains(*id)) {
                    debug!(server = %gone, "a server stopped heartbeating; recovering every queue");
                    every_queue_until = Instant::now() + settle;
                }
                known = live;
            }
            Err(e) => {
                // Whether a server went away cannot be told: look everywhere meanwhile.
                warn!(error = %e, "could not read the live servers; recovering every queue");
                every_queue_until = every_queue_until.max(Instant::now() + interval);
            }
        }
        let now = Instant::now();
        let due = second_pass.is_some_and(|at| now >= at);
        if due {
            second_pass = None;
        }
        if std::mem::take(&mut first) || due || now <= every_queue_until {
            for q in 0..rt.queues.len() {
                recover(&rt, q).await;
            }
        } else if let Some(q) = turn.next(rt.queues.len()) {
            recover(&rt, q).await;
        }
    }
}

async fn recover<B: WorkerBroker>(rt: &Runtime<B>, q: usize) {
    {
        let queue = &rt.queues[q].name;
        let mut reported = Vec::new();
        match rt
            .broker
            .reclaim_idle(queue, rt.config.recover_min_idle, PER_PASS)
            .await
        {
            Ok(r) => {
                if r.requeued > 0 {
                    crate::metrics::recovered(queue.as_str(), r.requeued);
                    info!(queue = %queue, n = r.requeued, "re-queued tasks of a lost worker");
                }
                for dead in r.dead {
                    let id = LeaseId::new(queue.clone(), dead.task_id, String::new());
                    if count_failed(rt, &id.task_id, &dead.envelope).await {
                        reported.push(id.task_id.clone());
                    }
                    ended::dead_lettered(rt, &id, dead.envelope.ok(), LOST, dead.discarded).await;
                }
            }
            Err(e) => warn!(queue = %queue, error = %e, "recovery failed"),
        }
        drain(rt, queue, reported).await;
    }
}

/// Why a task the recoverer dead-lettered failed, as its group records it.
const LOST: &str = "worker lost on the last allowed attempt";

/// Most left-over outbox entries reported per queue per pass.
const OUTBOX_PER_PASS: usize = 1000;

/// Acknowledges the outbox entries of this pass's dead letters that were reported, then
/// reports what earlier passes left there: the reclaim script records every dead letter in the
/// outbox in the same step, so a recoverer that died (or lost the reclaim's reply, or failed
/// to report) before this point leaves its group members to be counted now. Reports are
/// idempotent, so an entry another recoverer is reporting at the same time costs nothing.
/// Left-over entries are not passed to the dead-letter hook: the task was dead-lettered by
/// another pass, which may have called it already.
async fn drain<B: WorkerBroker>(rt: &Runtime<B>, queue: &QueueName, mut done: Vec<String>) {
    if let Err(e) = rt.broker.ack_reclaimed(queue, &done).await {
        warn!(queue = %queue, error = %e, "could not clear the reclaim outbox; the next pass does");
    }
    let left = match rt.broker.reclaimed_dead(queue, OUTBOX_PER_PASS).await {
        Ok(left) => left,
        Err(e) => {
            warn!(queue = %queue, error = %e, "could not read the reclaim outbox");
            return;
        }
    };
    done.clear();
    for dead in left {
        if count_failed(rt, &dead.task_id, &dead.envelope).await {
            done.push(dead.task_id);
        }
    }
    if done.is_empty() {
        return;
    }
    match rt.broker.ack_reclaimed(queue, &done).await {
        Ok(n) => debug!(queue = %queue, n, "reported left-over dead letters of a reclaim"),
        Err(e) => {
            warn!(queue = %queue, error = %e, "could not clear the reclaim outbox; the next pass does")
        }
    }
}

/// Counts a dead-lettered group member as failed. False when the report failed (the outbox
/// entry stays for the next pass); a task that is no member, or whose envelope does not
/// decode (it cannot name its group), needs nothing.
async fn count_failed<B: WorkerBroker>(
    rt: &Runtime<B>,
    task_id: &str,
    env: &Result<TaskEnvelope, DecodeError>,
) -> bool {
    let Ok(env) = env else {
        return true;
    };
    match crate::flow::failed(&rt.broker, env, LOST).await {
        Ok(()) => true,
        Err(e) => {
            warn!(task_id, error = %e, "could not count a lost group member as failed; the next recovery pass tries again");
            false
        }
    }
}
