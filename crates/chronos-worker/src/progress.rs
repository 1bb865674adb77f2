//! What a running attempt reports, as its handler reports it: the latest progress value waits
//! in the attempt's [`Cell`] until it is written (progress_writer.rs), and its log lines
//! collect there until the attempt is settled. One allocation per attempt, and nothing more
//! until the handler reports.

use std::sync::{Arc, Mutex};

use chronos_core::ProgressUpdate;
use tokio::sync::Notify;

use crate::logs::{Buffer, LineSink};
use crate::TaskLogs;

/// The latest progress of one running attempt and how much of it reached the store, and the
/// attempt's log lines.
#[derive(Debug)]
pub(crate) struct Cell {
    state: Mutex<State>,
    /// The attempt's own log lines.
    pub(crate) lines: Buffer,
}

#[derive(Debug, Default)]
struct State {
    /// Set by the first report (a task that never reports copies nothing).
    task_id: String,
    json: Vec<u8>,
    /// Bumped by each report.
    version: u64,
    /// The version last written to the store.
    written: u64,
}

impl Cell {
    pub(crate) fn new(logs: &TaskLogs) -> Self {
        Self {
            state: Mutex::new(State::default()),
            lines: Buffer::new(logs),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the value is still ours.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, task_id: &str, json: Vec<u8>) {
        let mut s = self.lock();
        if s.task_id.is_empty() {
            s.task_id = task_id.to_string();
        }
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
                    task_id: s.task_id.clone(),
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

    pub(crate) fn report(&self, task_id: &str, json: Vec<u8>) {
        self.cell.set(task_id, json);
        self.wake.notify_one();
    }

    /// Adds a line to the attempt's log.
    pub(crate) fn log(&self, level: &str, text: &str) {
        self.cell.lines.push(level, text);
    }
}

impl LineSink for Cell {
    fn push_line(&self, level: &str, text: &str) {
        self.lines.push(level, text);
    }
}
