//! The model: what the run asked for and what it was told, with the time of every answer.
//! One [`TaskModel`] per model key (an enqueue call), the operators' acknowledged actions, the
//! faults with the processes they hit, and the windows in which a queue or tenant could not run
//! (paused, blocked) or its events were off. The checker holds what happened (the journal, the
//! events, Redis) against it.

use std::collections::{BTreeMap, HashMap};

use crate::gen::{Fault, Op, Shape};
use crate::job::Act;
use crate::journal::now_us;

/// A task's place in a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    Single,
    /// Step `index` of chain `chain` (its steps' keys in order).
    Step {
        chain: Vec<u64>,
        index: usize,
    },
    Member {
        group: String,
    },
    /// A group's callback, with its members' keys.
    Callback {
        members: Vec<u64>,
    },
}

/// What the model expects of a task, as the acknowledged calls left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Runs to the end its behaviour predicts.
    Run,
    /// Not written (refused, or a duplicate of another task): must never run under its key.
    NotCreated(String),
    /// The enqueue failed without an answer: it may or may not exist.
    Unknown,
    /// An operator deleted it (acknowledged at this time).
    Deleted(i64),
    /// An operator archived it (acknowledged at this time).
    Archived(i64),
    /// A later enqueue replaced its payload in the same task (acknowledged at this time): this
    /// payload must not start after it.
    Superseded { by: u64, at: i64 },
}

/// What an enqueue answered.
#[derive(Debug, Clone)]
pub(crate) struct EnqueueAck {
    pub(crate) sent_us: i64,
    pub(crate) at_us: i64,
    /// `Created`, `Duplicate`, `Replaced`, `Extended`, or the error.
    pub(crate) answer: String,
    /// When the store said the task is due (unix us), for an answer that names one.
    pub(crate) due_us: Option<i64>,
}

/// One task of the model.
#[derive(Debug, Clone)]
pub(crate) struct TaskModel {
    pub(crate) shape: Shape,
    pub(crate) role: Role,
    pub(crate) id: Option<String>,
    pub(crate) ack: Option<EnqueueAck>,
    /// The payload generation an operator's edit last gave it.
    pub(crate) gen: u32,
    pub(crate) fate: Fate,
    /// A unique task's re-send that was let in: the id it created.
    pub(crate) resent_as: Option<String>,
    /// The model's history of the task, one line per call about it.
    pub(crate) history: Vec<String>,
}

impl TaskModel {
    /// Whether its behaviour dead-letters it (ignoring faults).
    pub(crate) fn dies(&self) -> bool {
        self.shape.act == Act::SkipRetry || self.shape.act.failures() > self.shape.max_retry
    }
}

/// An operator's action and what it answered.
#[derive(Debug, Clone)]
pub(crate) struct OpRecord {
    pub(crate) op: Op,
    /// The task it acted on (queue, id), when it names one.
    pub(crate) task: Option<(String, String)>,
    pub(crate) sent_us: i64,
    pub(crate) ack_us: i64,
    pub(crate) answer: String,
    /// It took effect (`Done`).
    pub(crate) done: bool,
}

impl OpRecord {
    /// Whether it acted on task `id` of `queue`.
    pub(crate) fn targets(&self, queue: &str, id: &str) -> bool {
        self.task
            .as_ref()
            .is_some_and(|(q, i)| q == queue && i == id)
    }
}

/// A fault and its reach.
#[derive(Debug, Clone)]
pub(crate) struct FaultRecord {
    pub(crate) fault: Fault,
    /// Worker processes it hit (all of them for a Redis restart).
    pub(crate) pids: Vec<u32>,
    pub(crate) from_us: i64,
    /// When its effect is over: the process back, the stall lifted, and the time a lease
    /// takes to be reclaimed after it.
    pub(crate) to_us: i64,
}

/// A span in which something could not run.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    pub(crate) queue: String,
    pub(crate) tenant: Option<String>,
    pub(crate) what: &'static str,
    pub(crate) from_us: i64,
    pub(crate) to_us: Option<i64>,
}

/// One worker process's life.
#[derive(Debug, Clone)]
pub(crate) struct Life {
    pub(crate) slot: usize,
    pub(crate) pid: u32,
    pub(crate) born_us: i64,
    pub(crate) died_us: Option<i64>,
}

/// Everything the run recorded.
#[derive(Debug, Default)]
pub(crate) struct Model {
    /// The load's start.
    pub(crate) t0_us: i64,
    pub(crate) tasks: BTreeMap<u64, TaskModel>,
    /// Model keys by (queue, task id): plain tasks' ids are stream entry ids, unique per queue
    /// only.
    pub(crate) by_id: HashMap<(String, String), Vec<u64>>,
    pub(crate) ops: Vec<OpRecord>,
    pub(crate) faults: Vec<FaultRecord>,
    pub(crate) windows: Vec<Window>,
    /// When each queue's events were turned on and off.
    pub(crate) events: Vec<Window>,
    pub(crate) lives: Vec<Life>,
    /// Stored caps of each tenant over time (the default is the tenant `""`).
    pub(crate) caps: HashMap<String, Vec<(i64, Option<u32>)>>,
    /// The limited queue's concurrency limit over time.
    pub(crate) limit_concurrency: Vec<(i64, u32)>,
    /// When the runtime schedule was added and removed.
    pub(crate) schedule: Option<(i64, Option<i64>)>,
    /// Per worker process: its concurrency.
    pub(crate) concurrency: usize,
}

impl Model {
    /// `+12.345s` from the start of the load.
    pub(crate) fn rel(&self, us: i64) -> String {
        format!("+{:.3}s", (us - self.t0_us) as f64 / 1e6)
    }

    pub(crate) fn register(&mut self, shape: Shape, role: Role) {
        let key = shape.key;
        let line = format!("planned: {}", shape.describe());
        self.tasks.insert(
            key,
            TaskModel {
                shape,
                role,
                id: None,
                ack: None,
                gen: 0,
                fate: Fate::Run,
                resent_as: None,
                history: vec![line],
            },
        );
    }

    pub(crate) fn note(&mut self, key: u64, at_us: i64, text: String) {
        let line = format!("{} {text}", self.rel(at_us));
        if let Some(t) = self.tasks.get_mut(&key) {
            t.history.push(line);
        }
    }

    /// Two replaces of one task whose calls overlapped in time: Redis applied them in an order
    /// the client cannot see, and the model took the order their answers were handled in. The
    /// payload that started after the later answer shows which one Redis applied last; when it
    /// is the one the model marked superseded, the two swap (seen as a false
    /// `replaced-payload-ran` on seed 1 in CI, two replaces answered in the same millisecond).
    /// Calls that did not overlap keep the model's order: the later call is the later write.
    pub(crate) fn settle_races(&mut self, runs: &[crate::journal::Run]) {
        let swaps: Vec<(u64, u64, i64)> = self
            .tasks
            .iter()
            .filter_map(|(&key, t)| {
                let Fate::Superseded { by, at } = t.fate else {
                    return None;
                };
                let winner = self.tasks.get(&by)?;
                let (mine, theirs) = (t.ack.as_ref()?, winner.ack.as_ref()?);
                let overlapped = mine.at_us >= theirs.sent_us && theirs.at_us >= mine.sent_us;
                let ran_after = |k: u64| runs.iter().any(|r| r.key == k && r.start_us > at);
                (overlapped && winner.fate == Fate::Run && ran_after(key) && !ran_after(by))
                    .then_some((key, by, at))
            })
            .collect();
        for (key, by, at) in swaps {
            if let Some(t) = self.tasks.get_mut(&key) {
                t.fate = Fate::Run;
            }
            if let Some(t) = self.tasks.get_mut(&by) {
                t.fate = Fate::Superseded { by: key, at };
            }
            self.note(
                key,
                at,
                format!("its replace raced key {by}'s; Redis applied this one last (it ran)"),
            );
            self.note(
                by,
                at,
                format!("its replace raced key {key}'s; Redis applied key {key} last"),
            );
        }
    }

    /// Records that model key `key` names task `id` (the first id it is given stays the
    /// task's; a later one, a unique re-send let in, is found through [`Model::keys_of`]).
    pub(crate) fn set_id(&mut self, key: u64, id: &str) {
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        t.id.get_or_insert_with(|| id.to_string());
        let q = t.shape.queue.to_string();
        let keys = self.by_id.entry((q, id.to_string())).or_default();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }

    /// Records an enqueue's answer and what it makes of the task.
    pub(crate) fn enqueued(&mut self, key: u64, ack: EnqueueAck, id: Option<&str>, fate: Fate) {
        let line = format!(
            "enqueue answered {} (id {}, due {})",
            ack.answer,
            id.unwrap_or("-"),
            ack.due_us.map(|d| self.rel(d)).unwrap_or("-".into())
        );
        self.note(key, ack.at_us, line);
        if let Some(id) = id {
            self.set_id(key, id);
        }
        if let Some(t) = self.tasks.get_mut(&key) {
            t.ack = Some(ack);
            t.fate = fate;
        }
    }

    /// Records an operator's action and applies what it did to the model.
    pub(crate) fn operated(&mut self, rec: OpRecord, key: Option<u64>) {
        if let Some(k) = key {
            let line = format!(
                "operator {:?} sent {}, answered {}",
                rec.op,
                self.rel(rec.sent_us),
                rec.answer
            );
            self.note(k, rec.ack_us, line);
            if rec.done {
                if let Some(t) = self.tasks.get_mut(&k) {
                    match rec.op {
                        Op::Delete(_) => t.fate = Fate::Deleted(rec.ack_us),
                        Op::Archive(_) => t.fate = Fate::Archived(rec.ack_us),
                        Op::RunNow(_) | Op::Unblock(_) => {
                            if matches!(t.fate, Fate::Archived(_)) {
                                t.fate = Fate::Run;
                            }
                        }
                        Op::Edit(_) => t.gen += 1,
                        _ => {}
                    }
                }
            }
        }
        self.ops.push(rec);
    }

    /// The model keys of task `id` of `queue`.
    pub(crate) fn keys_of(&self, queue: &str, id: &str) -> &[u64] {
        self.by_id
            .get(&(queue.to_string(), id.to_string()))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The first model key of task `id` of `queue`, if the model knows it.
    pub(crate) fn key_of(&self, queue: &str, id: &str) -> Option<u64> {
        self.keys_of(queue, id).first().copied()
    }

    /// Records a window (pause, block) that opens now.
    pub(crate) fn open_window(&mut self, queue: &str, tenant: Option<&str>, what: &'static str) {
        let w = Window {
            queue: queue.to_string(),
            tenant: tenant.map(str::to_string),
            what,
            from_us: now_us(),
            to_us: None,
        };
        if what == "events on" {
            self.events.push(w);
        } else {
            self.windows.push(w);
        }
    }

    /// Closes the last open window of this kind.
    pub(crate) fn close_window(&mut self, queue: &str, tenant: Option<&str>, what: &'static str) {
        let list = if what == "events on" {
            &mut self.events
        } else {
            &mut self.windows
        };
        if let Some(w) = list.iter_mut().rev().find(|w| {
            w.queue == queue && w.tenant.as_deref() == tenant && w.what == what && w.to_us.is_none()
        }) {
            w.to_us = Some(now_us());
        }
    }

    /// The pid's life, if it is one of the run's worker processes.
    pub(crate) fn life(&self, pid: u32) -> Option<&Life> {
        self.lives.iter().find(|l| l.pid == pid)
    }
}
