//! Trims archives and retained tasks, and removes consumers of servers that are gone.

use std::collections::HashSet;
use std::sync::Arc;

use crate::WorkerBroker;
use tracing::{debug, warn};

use crate::loops::every;
use crate::runtime::Runtime;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    every(&rt, rt.config.janitor_interval, || sweep(&rt)).await
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

pub(crate) async fn sweep<B: WorkerBroker>(rt: &Runtime<B>) {
    let live: HashSet<String> = match rt.broker.servers().await {
        Ok(s) => s.into_iter().map(|r| r.id).collect(),
        Err(e) => {
            warn!(error = %e, "janitor could not list servers");
            return;
        }
    };
    for slot in &rt.queues {
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
