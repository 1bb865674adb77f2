//! Operator actions and what they answer: the types of [`crate::Operate`].

use crate::{DecodeError, TaskEnvelope, TaskRecord, TaskState};

/// An inspector action on tasks (see [`Operate`](crate::Operate)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskAction {
    /// Scheduled, retry or archived -> pending, at the end of the stream. A dead letter run
    /// again gets its attempts back.
    RunNow,
    /// Removes a task in any state but active, releasing its unique lock.
    Delete,
    /// Pending, scheduled or retry -> archived, releasing its unique lock.
    Archive,
    /// Asks the worker running an active task to cancel it: the handler's `Context` sees the
    /// cancellation within a second (a handler that ignores it keeps running, and its outcome
    /// settles the task as usual).
    Cancel,
}

impl TaskAction {
    /// The states this action takes a task from.
    pub fn sources(self) -> &'static [TaskState] {
        match self {
            TaskAction::RunNow => &[
                TaskState::Scheduled,
                TaskState::Retry,
                TaskState::Archived,
                TaskState::Cancelled,
            ],
            TaskAction::Delete => &[
                TaskState::Pending,
                TaskState::Scheduled,
                TaskState::Retry,
                TaskState::Archived,
                TaskState::Completed,
                TaskState::Cancelled,
            ],
            TaskAction::Archive => &[TaskState::Pending, TaskState::Scheduled, TaskState::Retry],
            TaskAction::Cancel => &[TaskState::Active],
        }
    }
}

/// What an action did to one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionOutcome {
    /// Done now.
    Done,
    /// The task already was where the action takes it (pending for run-now, archived for
    /// archive, a cancel already requested): nothing changed. A call re-sent by the client
    /// after a lost reply answers this.
    Already,
    /// No such task (for delete: possibly deleted by a first run of this same call).
    NotFound,
    /// The task's state does not allow the action (for example deleting an active task);
    /// nothing changed. Holds the state, when it is one this version knows.
    Refused(Option<TaskState>),
    /// The task record is corrupt; nothing changed.
    Corrupt,
}

/// Which tasks a listing or bulk action takes, besides their state. Empty matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks of this kind; a trailing `*` makes it a prefix (`email:*` takes `email:send`
    /// and `email:digest`).
    pub kind: Option<String>,
    /// Only tasks whose payload, decoded for display (MessagePack as JSON, see
    /// [`crate::payload_json`]), contains this text.
    pub grep: Option<String>,
    /// Only tasks whose last error (or a cancelled task's reason) contains this text.
    pub error: Option<String>,
}

impl TaskFilter {
    /// True when no condition is set.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.grep.is_none() && self.error.is_none()
    }

    /// Whether `kind` passes the kind condition (exact, or a prefix ending in `*`).
    pub fn kind_matches(&self, kind: &str) -> bool {
        match self.kind.as_deref() {
            None => true,
            Some(k) => match k.strip_suffix('*') {
                Some(prefix) => kind.starts_with(prefix),
                None => k == kind,
            },
        }
    }

    /// True when `envelope` passes (an envelope that does not decode passes only an empty
    /// filter).
    pub fn matches(&self, envelope: &Result<TaskEnvelope, DecodeError>) -> bool {
        if self.is_empty() {
            return true;
        }
        let Ok(env) = envelope else { return false };
        if !self.kind_matches(&env.kind) {
            return false;
        }
        if let Some(text) = &self.error {
            if !env
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains(text.as_str()))
            {
                return false;
            }
        }
        match &self.grep {
            Some(text) => crate::envelope_payload_json(env).contains(text.as_str()),
            None => true,
        }
    }
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Tasks read in the state (each once).
    pub scanned: u64,
    /// Tasks that passed the filter.
    pub matched: u64,
    /// Tasks the action changed.
    pub done: u64,
    /// Matched tasks left alone: gone meanwhile, or moved to a state the action does not take.
    pub skipped: u64,
    /// Matched tasks refused because a worker holds them (fetched, started or not, or completed
    /// with the acknowledgement still on its way): their handler may have run, so they are not
    /// archived or deleted as if they were waiting. Counted apart from `skipped`.
    pub running: u64,
    /// Matched tasks whose record is corrupt: nothing changed.
    pub failed: u64,
    /// Script calls made, each on at most one chunk of tasks.
    pub calls: u64,
}

/// One page of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskPage {
    /// The tasks, in the state's order: stream order; soonest first for scheduled and retrying
    /// tasks; newest first for archived, cancelled and completed ones.
    pub tasks: Vec<TaskRecord>,
    /// Where the next page starts (pass it back as the cursor), or None at the end.
    pub next: Option<String>,
    /// Tasks read for this page (more than returned when a filter skipped some).
    pub scanned: u64,
}

/// One bucket of a queue's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryPoint {
    /// Start of the bucket (unix ms, UTC).
    pub start_ms: i64,
    /// Tasks completed in it.
    pub processed: u64,
    /// Failed attempts in it.
    pub failed: u64,
}

/// Which history of a queue to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistorySpan {
    /// Per minute, the last 24 hours (1,440 points).
    Minutes,
    /// Per UTC day, the last 90 days (90 points).
    Days,
}
