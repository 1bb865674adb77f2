//! A queue's event stream: what happened to its tasks, in order, as the scripts that made each
//! transition wrote it (opt-in per queue, [`crate::Events::set_events`]).
//!
//! An event is one entry of the queue's capped stream. Its fields are named by the constants of
//! [`fields`], which the scripts get through the protocol crate's prologue, so the writer and
//! the reader cannot drift.

use serde::Serialize;

use crate::DecodeError;

/// Events a queue's stream keeps (about: it is trimmed with `MAXLEN ~`, so a few more may
/// stay): a reader that falls further behind than this loses the oldest ones.
pub const EVENTS_KEPT: usize = 10_000;

/// The field names of an event entry and the names of its types, as the scripts write them.
pub mod fields {
    /// The event's type: one of the `*` names below.
    pub const TYPE: &str = "e";
    /// The task's id.
    pub const TASK: &str = "i";
    /// The task's kind ('' when the script could not read it).
    pub const KIND: &str = "k";
    /// The attempt the event belongs to (1 for the first).
    pub const ATTEMPT: &str = "a";
    /// The worker (consumer) that held the task.
    pub const WORKER: &str = "w";
    /// An error, a dead letter's or a cancel's reason.
    pub const REASON: &str = "r";
    /// A time the event names (unix ms): when a scheduled, retried or snoozed task is due.
    pub const AT: &str = "t";
    /// A progress value, as JSON.
    pub const VALUE: &str = "v";
    /// The task a deduplicated enqueue found holding its key.
    pub const HOLDER: &str = "h";
    /// '1' when a completed task's handler returned a result.
    pub const RESULT: &str = "x";
    /// A priority level (`0`..`9`) an operator gave the task.
    pub const LEVEL: &str = "l";

    /// A task was added to the queue (due now, or at [`AT`]).
    pub const ENQUEUED: &str = "enqueued";
    /// An enqueue found its deduplication key held by [`HOLDER`]: nothing was added.
    pub const DEDUPLICATED: &str = "deduplicated";
    /// A worker started an attempt.
    pub const STARTED: &str = "started";
    /// A running task reported progress.
    pub const PROGRESS: &str = "progress";
    /// An attempt failed; the task runs again at [`AT`].
    pub const RETRIED: &str = "retried";
    /// The handler snoozed the task until [`AT`], spending no attempt.
    pub const SNOOZED: &str = "snoozed";
    /// The task succeeded.
    pub const COMPLETED: &str = "completed";
    /// The task failed for good.
    pub const DEAD: &str = "dead";
    /// The handler cancelled the task.
    pub const CANCELLED: &str = "cancelled";
    /// The task's worker was lost (no heartbeat): the task is ready again. [`ATTEMPT`] is the
    /// attempt the loss cost (absent: the delivery had not started, no attempt was spent) and
    /// [`WORKER`] the lost worker. A loss that ends the task writes [`DEAD`] instead.
    pub const RECLAIMED: &str = "reclaimed";
    /// The handler said "rate limited": the task waits until [`AT`], no attempt spent.
    pub const THROTTLED: &str = "throttled";
    /// A delivery not started yet was put off until [`AT`] (its rate key was full, or its queue
    /// or key blocked; [`REASON`] says which), no attempt spent.
    pub const DEFERRED: &str = "deferred";
    /// A delivery not started yet was handed back to its queue (a worker shutting down).
    pub const REQUEUED: &str = "requeued";
    /// A scheduled, retried, snoozed or deferred task fell due and is ready again.
    pub const FORWARDED: &str = "forwarded";
    /// An operator deleted the task.
    pub const DELETED: &str = "deleted";
    /// An operator archived the task (a dead letter kept for inspection).
    pub const ARCHIVED: &str = "archived";
    /// An operator made the task ready now (a scheduled, retry, archived or cancelled task).
    pub const RUN_NOW: &str = "run_now";
    /// An operator (or a deduplicating enqueue) changed a waiting task: its payload, its run
    /// time ([`AT`], when it changed) or its level ([`LEVEL`], when it changed).
    pub const EDITED: &str = "edited";
    /// An operator gave the task priority level [`LEVEL`].
    pub const PRIORITIZED: &str = "prioritized";
    /// An operator asked the worker running the task to cancel it (the worker's `cancelled`
    /// follows when the handler stops).
    pub const CANCEL_REQUESTED: &str = "cancel_requested";
}

/// One event of a queue's stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEvent {
    /// The entry's id in the stream (`<ms>-<seq>`): where a reader resumes after it.
    pub id: String,
    /// When the script wrote it (unix ms, by the store's clock: the id's first part).
    pub at_ms: i64,
    /// The task's id.
    pub task_id: String,
    /// The task's kind, or '' when the writing script could not read it.
    pub kind: String,
    /// What happened.
    #[serde(flatten)]
    pub event: EventKind,
}

/// What happened to a task; serialized with a `type` tag in snake case.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// Added to the queue; `run_at_ms` when it waits for a time.
    Enqueued {
        /// When it is due, for a scheduled task.
        run_at_ms: Option<i64>,
    },
    /// Refused as a duplicate of `holder`, which holds the deduplication key.
    Deduplicated {
        /// The task holding the key.
        holder: String,
    },
    /// A worker started attempt `attempt`.
    Started {
        /// 1 for the first attempt.
        attempt: u32,
        /// The worker's consumer name.
        worker: String,
    },
    /// The handler reported progress.
    Progress {
        /// The reported value.
        value: serde_json::Value,
    },
    /// Attempt `attempt` failed with `error`; the next one is due at `next_at_ms`.
    Retried {
        /// The attempt that failed.
        attempt: u32,
        /// Its error.
        error: String,
        /// When the task runs again.
        next_at_ms: i64,
    },
    /// Snoozed until `until_ms`, no attempt spent.
    Snoozed {
        /// When it runs again.
        until_ms: i64,
    },
    /// Succeeded; `result` says whether the handler returned one.
    Completed {
        /// The handler returned a result.
        result: bool,
    },
    /// Failed for good (or discarded), for `reason`.
    DeadLettered {
        /// The last error or why it was dead-lettered.
        reason: String,
    },
    /// Cancelled by its handler, for `reason`.
    Cancelled {
        /// The handler's reason.
        reason: String,
    },
    /// Its worker was lost; the task is ready again.
    Reclaimed {
        /// The attempt the loss cost; 0 when the delivery had not started (none was spent).
        attempt: u32,
        /// The lost worker's consumer name ('' when unknown).
        worker: String,
    },
    /// The handler said "rate limited": the task waits until `until_ms`, no attempt spent.
    Throttled {
        /// When it runs again.
        until_ms: i64,
    },
    /// A delivery not started yet was put off until `until_ms`, no attempt spent.
    Deferred {
        /// When it runs again.
        until_ms: i64,
        /// Why: its rate key's window was full, or its queue or key was blocked.
        reason: String,
    },
    /// A delivery not started yet went back to its queue (a worker shutting down).
    Requeued,
    /// A scheduled, retried, snoozed or deferred task fell due and is ready again.
    Forwarded,
    /// An operator deleted the task.
    Deleted,
    /// An operator archived the task.
    Archived,
    /// An operator made the task ready now.
    RunNow,
    /// A waiting task was changed (its payload, run time or level).
    Edited {
        /// Its new run time, when that changed.
        run_at_ms: Option<i64>,
        /// Its new priority level, when that changed.
        level: Option<u8>,
    },
    /// An operator gave the task a priority level.
    Prioritized {
        /// The level (0 the most urgent).
        level: u8,
    },
    /// An operator asked the worker running the task to cancel it.
    CancelRequested,
    /// A type this version does not know (written by a newer one).
    Other {
        /// The type's name as written.
        name: String,
    },
}

impl EventKind {
    /// Whether the task ends here: nothing follows for it but a new enqueue of its id, or an
    /// operator's run-now of a dead letter or a cancelled task.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::Completed { .. }
                | Self::DeadLettered { .. }
                | Self::Cancelled { .. }
                | Self::Deleted
                | Self::Archived
        )
    }

    /// What the event says beyond its type, task and kind, in words for a person (times
    /// written by `time`, from unix ms): the due time, the holder, the attempt and worker, the
    /// value, the error and next time, the reason; empty when there is nothing more.
    pub fn detail(&self, time: impl Fn(i64) -> String) -> String {
        match self {
            Self::Enqueued {
                run_at_ms: Some(at),
            } => format!("due {}", time(*at)),
            Self::Deduplicated { holder } => format!("held by {holder}"),
            Self::Started { attempt, worker } => format!("attempt {attempt} on {worker}"),
            Self::Progress { value } => value.to_string(),
            Self::Retried {
                attempt,
                error,
                next_at_ms,
            } => format!(
                "attempt {attempt} failed: {error}; next {}",
                time(*next_at_ms)
            ),
            Self::Snoozed { until_ms } => format!("until {}", time(*until_ms)),
            Self::Completed { result: true } => "with a result".into(),
            Self::DeadLettered { reason } | Self::Cancelled { reason } => reason.clone(),
            Self::Reclaimed { attempt: 0, worker } => {
                format!("worker {worker} lost before it started; no attempt spent")
            }
            Self::Reclaimed { attempt, worker } => {
                format!("attempt {attempt} lost with worker {worker}")
            }
            Self::Throttled { until_ms } => format!("until {}", time(*until_ms)),
            Self::Deferred { until_ms, reason } => {
                format!("{reason}; until {}", time(*until_ms))
            }
            Self::Edited { run_at_ms, level } => {
                let mut parts = Vec::new();
                if let Some(at) = run_at_ms {
                    parts.push(format!("due {}", time(*at)));
                }
                if let Some(l) = level {
                    parts.push(format!("level {l}"));
                }
                parts.join(", ")
            }
            Self::Prioritized { level } => format!("level {level}"),
            _ => String::new(),
        }
    }

    /// The type's name as the stream spells it.
    pub fn name(&self) -> &str {
        use fields::*;
        match self {
            Self::Enqueued { .. } => ENQUEUED,
            Self::Deduplicated { .. } => DEDUPLICATED,
            Self::Started { .. } => STARTED,
            Self::Progress { .. } => PROGRESS,
            Self::Retried { .. } => RETRIED,
            Self::Snoozed { .. } => SNOOZED,
            Self::Completed { .. } => COMPLETED,
            Self::DeadLettered { .. } => DEAD,
            Self::Cancelled { .. } => CANCELLED,
            Self::Reclaimed { .. } => RECLAIMED,
            Self::Throttled { .. } => THROTTLED,
            Self::Deferred { .. } => DEFERRED,
            Self::Requeued => REQUEUED,
            Self::Forwarded => FORWARDED,
            Self::Deleted => DELETED,
            Self::Archived => ARCHIVED,
            Self::RunNow => RUN_NOW,
            Self::Edited { .. } => EDITED,
            Self::Prioritized { .. } => PRIORITIZED,
            Self::CancelRequested => CANCEL_REQUESTED,
            Self::Other { name } => name,
        }
    }
}

impl TaskEvent {
    /// Reads one stream entry: its id and its field-value pairs. A missing type or task id is an
    /// error; a missing or malformed detail reads as empty or zero, so one odd field never hides
    /// the event.
    pub fn decode(id: &str, pairs: &[(String, Vec<u8>)]) -> Result<Self, DecodeError> {
        use fields::*;
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let text = |name: &str| get(name).unwrap_or_default();
        let int = |name: &str| get(name).and_then(|v| v.parse::<i64>().ok());
        let count = |name: &str| get(name).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
        let level = || get(LEVEL).and_then(|v| v.parse::<u8>().ok());
        let bad = |why: &str| DecodeError::Malformed(format!("event {id}: {why}"));
        let at_ms = id
            .split_once('-')
            .and_then(|(ms, _)| ms.parse::<i64>().ok())
            .ok_or_else(|| bad("the id is not a stream id"))?;
        let name = get(TYPE).ok_or_else(|| bad("no type"))?;
        let task_id = get(TASK).ok_or_else(|| bad("no task id"))?;
        let event = match name.as_str() {
            ENQUEUED => EventKind::Enqueued {
                run_at_ms: int(AT).filter(|&t| t > 0),
            },
            DEDUPLICATED => EventKind::Deduplicated {
                holder: text(HOLDER),
            },
            STARTED => EventKind::Started {
                attempt: count(ATTEMPT),
                worker: text(WORKER),
            },
            PROGRESS => EventKind::Progress {
                value: get(VALUE)
                    .and_then(|v| serde_json::from_str(&v).ok())
                    .unwrap_or(serde_json::Value::Null),
            },
            RETRIED => EventKind::Retried {
                attempt: count(ATTEMPT),
                error: text(REASON),
                next_at_ms: int(AT).unwrap_or(0),
            },
            SNOOZED => EventKind::Snoozed {
                until_ms: int(AT).unwrap_or(0),
            },
            COMPLETED => EventKind::Completed {
                result: get(RESULT).as_deref() == Some("1"),
            },
            DEAD => EventKind::DeadLettered {
                reason: text(REASON),
            },
            CANCELLED => EventKind::Cancelled {
                reason: text(REASON),
            },
            RECLAIMED => EventKind::Reclaimed {
                attempt: count(ATTEMPT),
                worker: text(WORKER),
            },
            THROTTLED => EventKind::Throttled {
                until_ms: int(AT).unwrap_or(0),
            },
            DEFERRED => EventKind::Deferred {
                until_ms: int(AT).unwrap_or(0),
                reason: text(REASON),
            },
            REQUEUED => EventKind::Requeued,
            FORWARDED => EventKind::Forwarded,
            DELETED => EventKind::Deleted,
            ARCHIVED => EventKind::Archived,
            RUN_NOW => EventKind::RunNow,
            EDITED => EventKind::Edited {
                run_at_ms: int(AT).filter(|&t| t > 0),
                level: level(),
            },
            PRIORITIZED => EventKind::Prioritized {
                level: level().unwrap_or(0),
            },
            CANCEL_REQUESTED => EventKind::CancelRequested,
            _ => EventKind::Other { name },
        };
        Ok(Self {
            id: id.to_string(),
            at_ms,
            task_id,
            kind: text(KIND),
            event,
        })
    }
}

/// Where a reader of a queue's events starts ([`crate::Events::read_events`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EventCursor {
    /// Only events written after the first read.
    #[default]
    New,
    /// Every event the stream still keeps.
    Oldest,
    /// The events after this entry id (a [`TaskEvent::id`] read before).
    After(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn each_type_reads_back_with_its_details() {
        let e = TaskEvent::decode(
            "1700000000000-3",
            &pairs(&[
                ("e", "retried"),
                ("i", "t1"),
                ("k", "email"),
                ("a", "2"),
                ("r", "smtp down"),
                ("t", "1700000005000"),
            ]),
        )
        .expect("decoded");
        assert_eq!(e.at_ms, 1_700_000_000_000);
        assert_eq!((e.task_id.as_str(), e.kind.as_str()), ("t1", "email"));
        assert_eq!(
            e.event,
            EventKind::Retried {
                attempt: 2,
                error: "smtp down".into(),
                next_at_ms: 1_700_000_005_000
            }
        );
        assert!(!e.event.is_final());
        let done = TaskEvent::decode(
            "1-0",
            &pairs(&[("e", "completed"), ("i", "t1"), ("x", "1")]),
        )
        .expect("decoded");
        assert_eq!(done.event, EventKind::Completed { result: true });
        assert!(done.event.is_final());
        let p = TaskEvent::decode(
            "1-0",
            &pairs(&[("e", "progress"), ("i", "t1"), ("v", r#"{"percent":5}"#)]),
        )
        .expect("decoded");
        assert_eq!(
            p.event,
            EventKind::Progress {
                value: serde_json::json!({"percent": 5})
            }
        );
        let json = serde_json::to_value(&done).expect("json");
        assert_eq!(json["type"], "completed");
        assert_eq!(json["result"], true);
    }

    #[test]
    fn the_moves_of_recovery_throttles_and_operators_read_back_and_deletes_end_a_task() {
        let read = |p: &[(&str, &str)]| TaskEvent::decode("1-0", &pairs(p)).expect("decoded");
        let lost = read(&[("e", "reclaimed"), ("i", "t"), ("a", "2"), ("w", "w1")]);
        assert_eq!(
            lost.event,
            EventKind::Reclaimed {
                attempt: 2,
                worker: "w1".into()
            }
        );
        let put_off = read(&[
            ("e", "deferred"),
            ("i", "t"),
            ("t", "9"),
            ("r", "rate key full"),
        ]);
        assert_eq!(
            put_off.event,
            EventKind::Deferred {
                until_ms: 9,
                reason: "rate key full".into()
            }
        );
        let edited = read(&[("e", "edited"), ("i", "t"), ("l", "2")]);
        assert_eq!(
            edited.event,
            EventKind::Edited {
                run_at_ms: None,
                level: Some(2)
            }
        );
        assert_eq!(
            read(&[("e", "prioritized"), ("i", "t"), ("l", "0")]).event,
            EventKind::Prioritized { level: 0 }
        );
        for (name, kind, last) in [
            ("requeued", EventKind::Requeued, false),
            ("forwarded", EventKind::Forwarded, false),
            ("run_now", EventKind::RunNow, false),
            ("cancel_requested", EventKind::CancelRequested, false),
            ("deleted", EventKind::Deleted, true),
            ("archived", EventKind::Archived, true),
        ] {
            let e = read(&[("e", name), ("i", "t")]);
            assert_eq!(e.event, kind);
            assert_eq!(e.event.name(), name);
            assert_eq!(e.event.is_final(), last, "{name}");
            let json = serde_json::to_value(&e).expect("json");
            assert_eq!(json["type"], name);
        }
        assert!(!lost.event.is_final() && !put_off.event.is_final());
    }

    #[test]
    fn an_unknown_type_is_kept_and_a_missing_task_is_an_error() {
        let e =
            TaskEvent::decode("5-0", &pairs(&[("e", "teleported"), ("i", "t")])).expect("decoded");
        assert_eq!(
            e.event,
            EventKind::Other {
                name: "teleported".into()
            }
        );
        assert!(TaskEvent::decode("5-0", &pairs(&[("e", "started")])).is_err());
        assert!(TaskEvent::decode("nope", &pairs(&[("e", "started"), ("i", "t")])).is_err());
    }
}
