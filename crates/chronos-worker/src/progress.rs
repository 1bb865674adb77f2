//! A running task's progress, as its handler reports it: the latest value waits in its
//! delivery's [`Cell`] until it is written (progress_writer.rs).

use std::sync::{Arc, Mutex};

use chronos_core::ProgressUpdate;
use tokio::sync::Notify;

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
