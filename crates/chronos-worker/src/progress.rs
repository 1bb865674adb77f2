//! A running task's progress on its way to the store. A handler's reports are coalesced: the
//! latest value waits in its delivery's [`Cell`] until the progress loop writes it, at most
//! one write per [`COALESCE`] for all of a queue's tasks together, or until the heartbeat
//! carries it; the last value a handler reported is written before its task is settled. Each
//! write also refreshes the lease (heartbeat.lua), so a reporting task proves itself alive.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_core::{ProgressUpdate, QueueName};
use tokio::sync::Notify;
use tracing::warn;

use crate::runtime::Runtime;
use crate::WorkerBroker;

/// How long the progress loop gathers reports before it writes them.
pub(crate) const COALESCE: Duration = Duration::from_millis(250);

/// The latest progress of one running delivery and how much of it reached the store.
#[derive(Debug)]
pub(crate) struct Cell {
    task_id: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    json: Vec<u8>,
    /// Bumped by each report.
    version: u64,
    /// The version last written to the store.
    written: u64,
}

impl Cell {
    pub(crate) fn new(task_id: &str) -> Self {
        Self {
            task_id: task_id.to_string(),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the value is still ours.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, json: Vec<u8>) {
        let mut s = self.lock();
        s.json = json;
        s.version += 1;
    }

    /// The value not yet written, for delivery `msg_id`, with its version.
    pub(crate) fn unwritten(&self, msg_id: &str) -> Option<(ProgressUpdate, u64)> {
        let s = self.lock();
        (s.version > s.written).then(|| {
            (
                ProgressUpdate {
                    msg_id: msg_id.to_string(),
                    task_id: self.task_id.clone(),
                    json: s.json.clone(),
                },
                s.version,
            )
        })
    }

    /// `version` reached the store.
    pub(crate) fn wrote(&self, version: u64) {
        let mut s = self.lock();
        s.written = s.written.max(version);
    }
}

/// The handle a [`crate::Context`] reports through.
#[derive(Debug, Clone)]
pub(crate) struct Reporter {
    cell: Arc<Cell>,
    wake: Arc<Notify>,
}

impl Reporter {
    pub(crate) fn new(cell: Arc<Cell>, wake: Arc<Notify>) -> Self {
        Self { cell, wake }
    }

    pub(crate) fn report(&self, json: Vec<u8>) {
        self.cell.set(json);
        self.wake.notify_one();
    }
}

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
    match rt
        .broker
        .report_progress(queue, &rt.id, ids, &updates)
        .await
    {
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
