//! Trims archives and retained tasks, and removes consumers of servers that are gone.
//!
//! Each sweep takes the queues this server took tasks of since their last sweep, and one more
//! in turn: a queue idle here changes only by what other servers (which sweep it when they are
//! busy with it) or operators do, so it is swept within the queue count times
//! `janitor_interval`, and the sweeps of an idle server cost Redis the same whatever its queue
//! count.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::WorkerBroker;
use tracing::{debug, warn};

use crate::loops::Turn;
use crate::runtime::Runtime;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    let mut tick = tokio::time::interval(rt.config.janitor_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut turn = Turn::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = rt.stop_maintenance.cancelled() => return,
        }
        let next = turn.next(rt.queues.len());
        sweep(&rt, next).await;
    }
}

/// Tasks removed per call: each call holds Redis for about a millisecond.
const TRIM_CHUNK: usize = 500;
/// Most calls per queue per sweep (a million removals), so one sweep always ends.
const MAX_CHUNKS: usize = 2000;

/// Trims the queue's archive and retained tasks until nothing more is due: a dead-letter or
/// retention rate of any size is trimmed back to the caps each sweep, in bounded chunks.
async fn trim<B: WorkerBroker>(rt: &Runtime<B>, queue: &chronos_core::QueueName) {
    for _ in 0..MAX_CHUNKS {
        match rt
            .broker
            .trim(
                queue,
                rt.config.archive_retention,
                rt.config.archive_max,
                TRIM_CHUNK,
            )
            .await
        {
            Ok(0) => return,
            Ok(_) => {
                if rt.stop_maintenance.is_cancelled() {
                    return;
                }
            }
            Err(e) => {
                warn!(queue = %queue, error = %e, "trim failed");
                return;
            }
        }
    }
}

/// Sweeps the queues touched since their last sweep, and queue `turn`.
async fn sweep<B: WorkerBroker>(rt: &Runtime<B>, turn: Option<usize>) {
    let live: HashSet<String> = match rt.broker.servers().await {
        Ok(s) => s.into_iter().map(|r| r.id).collect(),
        Err(e) => {
            warn!(error = %e, "janitor could not list servers");
            return;
        }
    };
    for (q, slot) in rt.queues.iter().enumerate() {
        let touched = slot.touched.swap(false, Ordering::Relaxed);
        if !touched && turn != Some(q) {
            continue;
        }
        let queue = &slot.name;
        trim(rt, queue).await;
        let consumers = match rt.broker.consumers(queue).await {
            Ok(c) => c,
            Err(e) => {
                warn!(queue = %queue, error = %e, "could not list consumers");
                continue;
            }
        };
        for (name, pending, _) in consumers {
            // A dead server's entries are reclaimed first (the broker refuses to drop a consumer
            // that still holds any), so removing it never loses a task.
            if name != rt.id && pending == 0 && !live.contains(&name) {
                match rt.broker.remove_consumer(queue, &name).await {
                    Ok(true) => {
                        debug!(queue = %queue, consumer = %name, "removed consumer of a gone server")
                    }
                    Ok(false) => {}
                    Err(e) => warn!(queue = %queue, error = %e, "could not remove consumer"),
                }
            }
        }
    }
}
