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
    /// A type this version does not know (written by a newer one).
    Other {
        /// The type's name as written.
        name: String,
    },
}

impl EventKind {
    /// Whether the task ends here: nothing follows for it but a new enqueue of its id.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::Completed { .. } | Self::DeadLettered { .. } | Self::Cancelled { .. }
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
