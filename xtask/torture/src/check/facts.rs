//! What the checks read: the plan, the model, what was observed at the end (the journal, the
//! events, Redis), indexed once, and the shape of a violation.

use std::collections::HashMap;

use chronos::{DedupLock, QueueStats, TaskState};

use crate::events::Collected;
use crate::gen::{Fault, Plan};
use crate::journal::{Outcome, Read, Run};
use crate::model::{FaultRecord, Model};

/// A task's record at the end of the run, as the inspector read it.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) state: TaskState,
    pub(crate) last_error: Option<String>,
}

/// One key of the namespace at the end of the run.
#[derive(Debug, Clone)]
pub(crate) struct KeyInfo {
    pub(crate) key: String,
    pub(crate) kind: String,
    /// Milliseconds to live, or -1 for none.
    pub(crate) ttl_ms: i64,
    /// Members or entries (ZCARD, HLEN, SCARD, XLEN).
    pub(crate) len: u64,
    /// For a stream: deliveries pending in its consumer group.
    pub(crate) pending: u64,
    /// For a hash: its field names (small hashes only).
    pub(crate) fields: Vec<String>,
}

/// A queue's counts at the end.
#[derive(Debug, Clone)]
pub(crate) struct Books {
    pub(crate) stats: QueueStats,
    /// Processed and failed, summed over the per-minute history.
    pub(crate) history: (u64, u64),
    pub(crate) locks: Vec<DedupLock>,
}

/// What was observed.
#[derive(Debug)]
pub(crate) struct Observed {
    pub(crate) journal: Read,
    pub(crate) events: Collected,
    /// Every model task's record by id (None: no record).
    /// By (queue, task id).
    pub(crate) records: HashMap<(String, String), Option<Record>>,
    pub(crate) books: HashMap<String, Books>,
    pub(crate) keys: Vec<KeyInfo>,
    /// Members of the archived, cancelled and completed sets, by queue.
    pub(crate) kept: HashMap<String, Vec<String>>,
    /// When the drain ended (the workers were asked to stop right after).
    pub(crate) end_us: i64,
}

/// A broken promise.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub(crate) kind: &'static str,
    pub(crate) queue: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) detail: String,
    /// The task's model history, its runs and its events.
    pub(crate) history: Vec<String>,
    /// The task's Redis state (filled in by the runner).
    pub(crate) redis: Vec<String>,
}

/// Everything the checks read, indexed.
pub(crate) struct Facts<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) model: &'a Model,
    pub(crate) obs: &'a Observed,
    /// Runs by queue, then task id.
    pub(crate) by_id: HashMap<&'a str, HashMap<&'a str, Vec<&'a Run>>>,
    pub(crate) by_key: HashMap<u64, Vec<&'a Run>>,
}

impl std::fmt::Debug for Facts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Facts").finish_non_exhaustive()
    }
}

impl<'a> Facts<'a> {
    pub(crate) fn new(plan: &'a Plan, model: &'a Model, obs: &'a Observed) -> Self {
        let mut by_id: HashMap<&str, HashMap<&str, Vec<&Run>>> = HashMap::new();
        let mut by_key: HashMap<u64, Vec<&Run>> = HashMap::new();
        for r in &obs.journal.runs {
            by_id
                .entry(r.queue.as_str())
                .or_default()
                .entry(r.task.as_str())
                .or_default()
                .push(r);
            by_key.entry(r.key).or_default().push(r);
        }
        Self {
            plan,
            model,
            obs,
            by_id,
            by_key,
        }
    }

    pub(crate) fn runs_of(&self, queue: &str, id: &str) -> &[&'a Run] {
        self.by_id
            .get(queue)
            .and_then(|m| m.get(id))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// A task's record at the end.
    pub(crate) fn record(&self, queue: &str, id: &str) -> Option<&'a Record> {
        self.obs
            .records
            .get(&(queue.to_string(), id.to_string()))
            .and_then(Option::as_ref)
    }

    pub(crate) fn runs_of_key(&self, key: u64) -> &[&'a Run] {
        self.by_key.get(&key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// When a run stopped running: its end, else its process's death, else the end of the run.
    pub(crate) fn run_end(&self, r: &Run) -> i64 {
        r.end
            .map(|(t, _)| t)
            .or_else(|| self.model.life(r.pid).and_then(|l| l.died_us))
            .unwrap_or(self.obs.end_us)
    }

    /// A fault that hit worker `pid` (or every worker) and overlaps `from..=to`.
    pub(crate) fn fault_on(&self, pid: u32, from: i64, to: i64) -> Option<&'a FaultRecord> {
        self.model
            .faults
            .iter()
            .find(|f| f.pids.contains(&pid) && f.from_us <= to && f.to_us >= from)
    }

    /// A fault of any kind that overlaps `from..=to`, but those that cannot delay a task of a
    /// worker (a lost reply to the producer, a scheduler fault) unless `all`.
    pub(crate) fn any_fault(&self, from: i64, to: i64, all: bool) -> Option<&'a FaultRecord> {
        self.model.faults.iter().find(|f| {
            let relevant = all
                || !matches!(
                    f.fault,
                    Fault::DropReply(None) | Fault::KillLeader | Fault::StopLeader(_)
                );
            relevant && f.from_us <= to && f.to_us >= from
        })
    }

    /// Attempts of worker `pid` running at `x`.
    pub(crate) fn running_at(&self, pid: u32, x: i64) -> usize {
        self.obs
            .journal
            .runs
            .iter()
            .filter(|r| r.pid == pid && r.start_us <= x && self.run_end(r) > x)
            .count()
    }

    /// Whether the last run of `id` ended in a failure (the task was dead-lettered or is
    /// retrying), from the journal.
    pub(crate) fn last_outcome(&self, queue: &str, id: &str) -> Option<Outcome> {
        self.runs_of(queue, id)
            .last()
            .and_then(|r| r.end.map(|(_, o)| o))
    }

    /// A violation about task `id` (of model key `key`, when known), with its history.
    pub(crate) fn task_violation(
        &self,
        kind: &'static str,
        queue: &str,
        id: Option<&str>,
        key: Option<u64>,
        detail: String,
    ) -> Violation {
        let m = self.model;
        let mut history = Vec::new();
        let mut keys: Vec<u64> = key.into_iter().collect();
        if let Some(id) = id {
            for k in m.keys_of(queue, id) {
                if !keys.contains(k) {
                    keys.push(*k);
                }
            }
        }
        for k in &keys {
            if let Some(t) = m.tasks.get(k) {
                history.push(format!("model key {k}:"));
                history.extend(t.history.iter().map(|h| format!("  {h}")));
            }
        }
        let mut runs: Vec<&Run> = id
            .map(|i| self.runs_of(queue, i).to_vec())
            .unwrap_or_default();
        for k in &keys {
            for r in self.runs_of_key(*k) {
                if !runs.iter().any(|x| std::ptr::eq(*x, *r)) {
                    runs.push(r);
                }
            }
        }
        runs.sort_by_key(|r| r.start_us);
        for r in runs {
            history.push(format!(
                "run {} key {} gen {} attempt {} on pid {}: start {}, end {}",
                r.task,
                r.key,
                r.gen,
                r.attempt,
                r.pid,
                m.rel(r.start_us),
                match r.end {
                    Some((t, o)) => format!("{} {o:?}", m.rel(t)),
                    None => "none (process died or stopped)".into(),
                }
            ));
        }
        if let Some(id) = id {
            for e in self.obs.events.of(queue, id) {
                history.push(format!(
                    "event {} {}: {}",
                    m.rel(e.at_ms * 1000),
                    e.event.name(),
                    e.event.detail(|t| m.rel(t * 1000))
                ));
            }
        }
        Violation {
            kind,
            queue: Some(queue.to_string()),
            task: id.map(str::to_string),
            detail,
            history,
            redis: Vec::new(),
        }
    }

    /// A violation that names no task.
    pub(crate) fn violation(&self, kind: &'static str, detail: String) -> Violation {
        Violation {
            kind,
            queue: None,
            task: None,
            detail,
            history: Vec::new(),
            redis: Vec::new(),
        }
    }
}
