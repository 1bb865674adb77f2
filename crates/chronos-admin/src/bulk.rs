//! Bulk actions as a run that reports its progress and can be stopped: what the console runs
//! in the background and the CLI runs behind `--all`.
//!
//! The run pages through the state with [`Operate::list_page`] and acts on each page's tasks
//! with [`Operate::act_many`] while the next page is read. That is safe because a cursor is a
//! position, not a rank: an entry id, or a sorted set's (score, member), which the broker
//! resumes after exactly even when acting on the page before moved that member out (a rank, or
//! a fall back to "past this score", skipped the tasks sharing its score: thousands of dead
//! letters settled in one millisecond, of which a bulk run left a third behind).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{
    ActionOutcome, BulkReport, Inspect, ManageSchedules, Operate, QueueName, Schedules, TaskAction,
    TaskFilter, TaskState,
};
use serde::Serialize;

use crate::actions::verb;
use crate::admin::Admin;
use crate::error::AdminError;

/// Tasks listed and acted on per step of a run, by default.
pub const DEFAULT_BULK_CHUNK: usize = 500;

/// A stop signal for a bulk run: clone it, hand one clone to the run, call [`CancelToken::cancel`]
/// on another. The run stops before its next step (a step in flight finishes, so a run stops
/// within one chunk of tasks).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every run holding a clone of this token to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once [`CancelToken::cancel`] was called on any clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Which tasks a bulk run takes, what it does to them, and at what pace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkJob {
    /// The queue.
    pub queue: String,
    /// The state whose tasks are taken (one of the action's [`TaskAction::sources`]).
    pub state: TaskState,
    /// Only tasks passing this filter.
    pub filter: TaskFilter,
    /// What is done to each task.
    pub action: TaskAction,
    /// Tasks per step (listed, then acted on), 1..=5,000; default [`DEFAULT_BULK_CHUNK`].
    pub chunk: usize,
    /// A pause after each step, leaving Redis to the workers on a busy deployment (default
    /// none).
    pub pause: Duration,
}

impl BulkJob {
    /// `action` on every task of `queue` in `state` passing `filter`, in default chunks.
    pub fn new(
        queue: impl Into<String>,
        state: TaskState,
        filter: TaskFilter,
        action: TaskAction,
    ) -> Self {
        Self {
            queue: queue.into(),
            state,
            filter,
            action,
            chunk: DEFAULT_BULK_CHUNK,
            pause: Duration::ZERO,
        }
    }

    /// Sets the tasks per step (clamped to 1..=5,000).
    pub fn chunk(mut self, n: usize) -> Self {
        self.chunk = n.clamp(1, 5_000);
        self
    }

    /// Sets the pause after each step.
    pub fn pause(mut self, d: Duration) -> Self {
        self.pause = d;
        self
    }
}

/// Where a bulk run stands: handed to the progress callback after every step, and returned as
/// the run's report when it ends.
///
/// Counts only grow during a run. `matched` counts tasks found; each of them ends up in exactly
/// one of `done`, `skipped`, `running`, `failed`, or (when the run was cancelled or stopped by an error)
/// [`BulkStatus::untouched`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BulkStatus {
    /// Tasks read in the state.
    pub scanned: u64,
    /// Tasks read that passed the filter.
    pub matched: u64,
    /// Tasks the action changed.
    pub done: u64,
    /// Matched tasks left alone: gone, moved to another state, or already where the action
    /// takes them by the time the action reached them.
    pub skipped: u64,
    /// Matched tasks refused because a worker held them by the time the action reached them
    /// (fetched, started or not, or completed with its acknowledgement on its way): an archive
    /// or delete never takes a task whose handler may have run.
    pub running: u64,
    /// Matched tasks the action refused (a corrupt record).
    pub failed: u64,
    /// True when the run went through the whole state.
    pub finished: bool,
    /// True when the run stopped because its token was cancelled.
    pub cancelled: bool,
    /// What stopped the run early (Redis unreachable, ...), when something did.
    pub error: Option<String>,
}

impl BulkStatus {
    /// Counts the outcomes of one step's actions.
    fn count(&mut self, outcomes: &[ActionOutcome]) {
        for o in outcomes {
            match o {
                ActionOutcome::Done => self.done += 1,
                ActionOutcome::Corrupt => self.failed += 1,
                ActionOutcome::Refused(Some(TaskState::Active)) => self.running += 1,
                _ => self.skipped += 1,
            }
        }
    }

    /// Matched tasks the run did not reach (after a cancel or an error).
    pub fn untouched(&self) -> u64 {
        self.matched
            .saturating_sub(self.done + self.skipped + self.running + self.failed)
    }

    /// True while the run goes on (neither finished, cancelled nor stopped by an error).
    pub fn running(&self) -> bool {
        !self.finished && !self.cancelled && self.error.is_none()
    }
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// Runs `job`: lists the state a chunk at a time and applies the action to each task found,
    /// calling `progress` after every step, until the state is exhausted or `cancel` is
    /// cancelled. Tasks that reach the state while it runs may be included.
    ///
    /// Fails before doing anything when the queue does not exist
    /// ([`AdminError::QueueNotFound`]) or the action does not take tasks in the state
    /// ([`AdminError::Invalid`]). An error during the run (Redis unreachable) stops it and is
    /// reported in [`BulkStatus::error`] with the counts reached, so a caller always learns
    /// what was done.
    pub async fn run_bulk<F>(
        &self,
        job: &BulkJob,
        cancel: &CancelToken,
        mut progress: F,
    ) -> Result<BulkStatus, AdminError>
    where
        F: FnMut(&BulkStatus) + Send,
    {
        let q = self.require_queue(&job.queue).await?;
        if !job.action.sources().contains(&job.state) {
            return Err(AdminError::Invalid(format!(
                "cannot {} {} tasks",
                verb(job.action),
                job.state.as_str()
            )));
        }
        let mut status = BulkStatus::default();
        let mut cursor: Option<String> = None;
        // The page read but not acted on yet: it is acted on while the next page is read, so
        // Redis gets the two calls back to back instead of waiting on this process between.
        let mut waiting: Vec<String> = Vec::new();
        loop {
            if cancel.is_cancelled() {
                status.cancelled = true;
                break;
            }
            let list =
                self.broker
                    .list_page(&q, job.state, &job.filter, cursor.as_deref(), job.chunk);
            let previous = std::mem::take(&mut waiting);
            let (page, acted) = tokio::join!(list, self.act_many(&q, job.action, previous));
            if let Err(e) = acted.map(|o| status.count(&o)) {
                status.error = Some(e.to_string());
                break;
            }
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    status.error = Some(e.to_string());
                    break;
                }
            };
            status.scanned += page.scanned;
            status.matched += page.tasks.len() as u64;
            waiting = page.tasks.into_iter().map(|t| t.id).collect();
            progress(&status);
            match page.next {
                Some(next) => cursor = Some(next),
                None => {
                    let last = std::mem::take(&mut waiting);
                    if cancel.is_cancelled() {
                        status.cancelled = true;
                    } else {
                        match self.act_many(&q, job.action, last).await {
                            Ok(o) => {
                                status.count(&o);
                                status.finished = true;
                            }
                            Err(e) => status.error = Some(e.to_string()),
                        }
                    }
                    break;
                }
            }
            if !job.pause.is_zero() {
                tokio::time::sleep(job.pause).await;
            }
        }
        progress(&status);
        Ok(status)
    }

    async fn act_many(
        &self,
        q: &QueueName,
        action: TaskAction,
        ids: Vec<String>,
    ) -> Result<Vec<ActionOutcome>, AdminError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.broker.act_many(q, &ids, action).await?)
    }
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct BulkRow {
    /// Tasks read in the state.
    pub scanned: u64,
    /// Tasks that passed the filter.
    pub matched: u64,
    /// Tasks changed.
    pub done: u64,
    /// Matched tasks left alone (gone or moved meanwhile).
    pub skipped: u64,
    /// Matched tasks refused because a worker held them (see [`BulkStatus::running`]).
    pub running: u64,
    /// Matched tasks whose record is corrupt.
    pub failed: u64,
    /// Script calls made.
    pub calls: u64,
}

impl From<BulkReport> for BulkRow {
    fn from(r: BulkReport) -> Self {
        Self {
            scanned: r.scanned,
            matched: r.matched,
            done: r.done,
            skipped: r.skipped,
            running: r.running,
            failed: r.failed,
            calls: r.calls,
        }
    }
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Applies `action` to every task of `state` passing `filter`, in chunks of 1,000, as one
    /// call without progress (see [`Admin::run_bulk`] for a run that reports its progress and
    /// can be cancelled).
    pub async fn act_all(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
    ) -> Result<BulkRow, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self
            .broker
            .act_all(&q, state, filter, action, 1000)
            .await?
            .into())
    }
}
