//! Writes the progress handlers reported. Reports are coalesced: at most one write per
//! [`COALESCE`] for all of a queue's running tasks together, or the heartbeat carries them; the
//! last value a handler reported is written before its task is settled (executor.rs). Each
//! write also refreshes the leases (heartbeat.lua), so a reporting task proves itself alive.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{ProgressUpdate, QueueName};
use tracing::warn;

use crate::progress::Cell;
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// How long the progress loop gathers reports before it writes them.
pub(crate) const COALESCE: Duration = Duration::from_millis(250);

/// Writes reported progress, [`COALESCE`] after the first report of a quiet spell.
pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    loop {
        tokio::select! {
            _ = rt.progress_wake.notified() => {}
            _ = rt.stop_maintenance.cancelled() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(COALESCE) => {}
            _ = rt.stop_maintenance.cancelled() => return,
        }
        for q in 0..rt.queues.len() {
            let pending = rt.unwritten_progress(q);
            if pending.is_empty() {
                continue;
            }
            let ids: Vec<String> = pending.iter().map(|(u, _, _)| u.msg_id.clone()).collect();
            write(&rt, q, &ids, pending).await;
        }
    }
}

/// Refreshes the leases of `ids` and writes `pending` (whose deliveries are among `ids`): the
/// heartbeat's call and the progress loop's. A delivery
/// found lost is dropped and its handler cancelled, as the heartbeat does. Answers the ids
/// still held; None when the store did not answer (the values stay unwritten, for the next
/// try).
pub(crate) async fn write<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    ids: &[String],
    pending: Vec<(ProgressUpdate, Arc<Cell>, u64)>,
) -> Option<Vec<String>> {
    let queue: &QueueName = &rt.queues[q].name;
    let updates: Vec<ProgressUpdate> = pending.iter().map(|(u, _, _)| u.clone()).collect();
    match rt.broker.keep_alive(queue, &rt.id, ids, &updates).await {
        Ok(owned) => {
            let held: HashSet<&str> = owned.iter().map(String::as_str).collect();
            for (u, cell, version) in &pending {
                if held.contains(u.msg_id.as_str()) {
                    cell.wrote(*version);
                }
            }
            let lost: Vec<String> = ids
                .iter()
                .filter(|id| !held.contains(id.as_str()))
                .cloned()
                .collect();
            if !lost.is_empty() {
                warn!(queue = %queue, n = lost.len(), "leases were reclaimed; cancelling those tasks");
                rt.lose(q, &lost);
            }
            Some(owned)
        }
        Err(e) => {
            warn!(queue = %queue, error = %e, "heartbeat failed (leases and progress not written)");
            None
        }
    }
}
