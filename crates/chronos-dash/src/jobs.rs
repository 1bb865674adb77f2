//! Bulk actions as background jobs: the POST that confirms one starts it and answers at once
//! with its progress page; the run goes on whatever the browser does (a closed tab, a proxy's
//! timeout) until it ends or someone cancels it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use chronos_admin::{verb, Admin, BulkJob, BulkStatus, CancelToken, MatchCount};
use chronos_broker::{RedisBroker, TaskAction, TaskFilter, TaskState};
use serde::Serialize;

use crate::config::DashConfig;

/// Jobs kept for their progress pages; the oldest ended one goes first.
const KEPT: usize = 50;
/// Bulk jobs that may run at once: each keeps a pipeline of Redis calls busy.
const MAX_RUNNING: usize = 4;

/// One bulk action started from the console.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) queue: String,
    pub(crate) action: TaskAction,
    pub(crate) state: TaskState,
    pub(crate) filter: TaskFilter,
    /// The count the operator confirmed.
    pub(crate) expected: MatchCount,
    /// Who started it (the request's `Actor`).
    pub(crate) who: String,
    pub(crate) started_ms: i64,
    pub(crate) cancel: CancelToken,
    status: Mutex<BulkStatus>,
}

impl Job {
    /// Its counts now.
    pub(crate) fn status(&self) -> BulkStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn set(&self, s: BulkStatus) {
        if let Ok(mut cur) = self.status.lock() {
            *cur = s;
        }
    }

    /// What the progress page polls.
    pub(crate) fn view(&self) -> JobView {
        let s = self.status();
        JobView {
            id: self.id.clone(),
            state: phase(&s),
            done: s.done,
            matched: s.matched,
            scanned: s.scanned,
            skipped: s.skipped,
            running: s.running,
            failed: s.failed,
            untouched: s.untouched(),
            expected_at_most: self.expected.at_most,
            error: s.error.clone(),
            cancel_requested: self.cancel.is_cancelled(),
        }
    }
}

/// `running`, `finished`, `cancelled` or `stopped` (by an error).
pub(crate) fn phase(s: &BulkStatus) -> &'static str {
    if s.finished {
        "finished"
    } else if s.cancelled {
        "cancelled"
    } else if s.error.is_some() {
        "stopped"
    } else {
        "running"
    }
}

/// A job's progress as JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JobView {
    pub(crate) id: String,
    pub(crate) state: &'static str,
    pub(crate) done: u64,
    pub(crate) matched: u64,
    pub(crate) scanned: u64,
    pub(crate) skipped: u64,
    /// Refused because a worker held them (their handler may have run).
    pub(crate) running: u64,
    pub(crate) failed: u64,
    pub(crate) untouched: u64,
    pub(crate) expected_at_most: u64,
    pub(crate) error: Option<String>,
    pub(crate) cancel_requested: bool,
}

/// The console's jobs.
#[derive(Debug, Default)]
pub(crate) struct Jobs {
    all: Mutex<VecDeque<Arc<Job>>>,
}

/// Why a job was not started.
#[derive(Debug)]
pub(crate) struct Busy;

impl Jobs {
    /// The job `id`, while it is kept.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.all.lock().ok()?.iter().find(|j| j.id == id).cloned()
    }

    /// Starts `job` in the background for `who`. Takes the console's parts rather than its
    /// state, which holds the jobs: the registry stays below the state it is part of.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &self,
        admin: &Admin<RedisBroker>,
        config: &DashConfig,
        queue: &str,
        state: TaskState,
        filter: TaskFilter,
        action: TaskAction,
        expected: MatchCount,
        who: String,
    ) -> Result<Arc<Job>, Busy> {
        let job = Arc::new(Job {
            id: format!("{:016x}", rand::random::<u64>()),
            queue: queue.to_string(),
            action,
            state,
            filter: filter.clone(),
            expected,
            who,
            started_ms: crate::format::now_ms(),
            cancel: CancelToken::new(),
            status: Mutex::new(BulkStatus::default()),
        });
        {
            let mut all = self.all.lock().map_err(|_| Busy)?;
            if all.iter().filter(|j| j.status().running()).count() >= MAX_RUNNING {
                return Err(Busy);
            }
            while all.len() >= KEPT {
                match all.iter().position(|j| !j.status().running()) {
                    Some(i) => {
                        all.remove(i);
                    }
                    None => break,
                }
            }
            all.push_back(job.clone());
        }
        let bulk = BulkJob::new(queue, state, filter, action)
            .chunk(config.bulk_chunk)
            .pause(config.bulk_pause);
        let (admin, j) = (admin.clone(), job.clone());
        tokio::spawn(async move {
            let end = match admin.run_bulk(&bulk, &j.cancel, |s| j.set(s.clone())).await {
                Ok(s) => s,
                Err(e) => BulkStatus {
                    error: Some(e.to_string()),
                    ..BulkStatus::default()
                },
            };
            j.set(end.clone());
            tracing::info!(
                who = %j.who,
                job = %j.id,
                queue = %j.queue,
                action = verb(j.action),
                state = j.state.as_str(),
                outcome = phase(&end),
                done = end.done,
                matched = end.matched,
                skipped = end.skipped,
                running = end.running,
                failed = end.failed,
                error = end.error.as_deref().unwrap_or(""),
                "console: bulk action ended"
            );
        });
        Ok(job)
    }
}
