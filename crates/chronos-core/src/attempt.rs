//! A task's attempt history: one row per attempt that ended, kept in the task's record by the
//! step that settled the attempt ([`crate::TaskRecord::attempts`]).

use serde::{Deserialize, Serialize};

/// Rows of attempt history a task record keeps: the newest 25.
pub const ATTEMPTS_KEPT: usize = 25;

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The handler succeeded (kept only for a task retained after it completed).
    Succeeded,
    /// The handler failed and the task was scheduled for another attempt.
    Retried,
    /// The handler failed for the last time, or for good: the task was dead-lettered.
    Dead,
    /// The handler snoozed the task (`TaskError::snooze`): no attempt spent.
    Snoozed,
    /// The handler was rate limited (`TaskError::rate_limited`): no attempt spent.
    Throttled,
    /// The handler cancelled the task (`TaskError::cancel`).
    Cancelled,
    /// The worker was lost mid-attempt (no heartbeat): the recoverer counted the attempt.
    Lost,
}

impl AttemptOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Retried => "retried",
            Self::Dead => "dead",
            Self::Snoozed => "snoozed",
            Self::Throttled => "throttled",
            Self::Cancelled => "cancelled",
            Self::Lost => "lost",
        }
    }

    /// The outcome of a stored name, None for a name this version does not know.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Succeeded,
            Self::Retried,
            Self::Dead,
            Self::Snoozed,
            Self::Throttled,
            Self::Cancelled,
            Self::Lost,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// One attempt of a task as its record keeps it. Times are the store's (unix ms); how long the
/// handler ran is the worker's measure, so a start is known only when the worker said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRow {
    /// The attempt's number (1 for the first run; snoozes and throttles keep the number).
    pub attempt: u32,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The worker (server id) that ran it, when known.
    pub worker: Option<String>,
    /// When it ended.
    pub ended_at_ms: i64,
    /// When its handler started (`ended_at_ms - ran_ms`), when the worker said how long it ran.
    pub started_at_ms: Option<i64>,
    /// How long the handler ran (ms), when the worker said.
    pub ran_ms: Option<u64>,
    /// The error (or a cancel's reason), cut to its first 2 KiB.
    pub error: Option<String>,
    /// The attempt's own log lines (`Context::log`, captured `tracing` events), as the worker
    /// capped and redacted them.
    pub logs: Option<String>,
}

/// A row as the scripts write it: one JSON object with short names per line.
#[derive(Deserialize)]
struct Stored {
    a: u32,
    o: String,
    e: i64,
    #[serde(default)]
    w: Option<String>,
    #[serde(default)]
    s: Option<i64>,
    #[serde(default)]
    d: Option<u64>,
    #[serde(default)]
    err: Option<String>,
    #[serde(default)]
    l: Option<String>,
}

impl AttemptRow {
    /// Every row of a stored history, oldest first. A line that does not read as a row (an
    /// outcome of a later version, damage) is skipped: the history is for display, and one bad
    /// row must not hide the others.
    pub fn decode_all(raw: &[u8]) -> Vec<Self> {
        raw.split(|&b| b == b'\n')
            .filter_map(|line| {
                let s: Stored = serde_json::from_slice(line).ok()?;
                Some(Self {
                    attempt: s.a,
                    outcome: AttemptOutcome::parse(&s.o)?,
                    worker: s.w.filter(|w| !w.is_empty()),
                    ended_at_ms: s.e,
                    started_at_ms: s.s,
                    ran_ms: s.d,
                    error: s.err,
                    logs: s.l,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_rows_read_back_and_bad_lines_are_skipped() {
        let raw = concat!(
            r#"{"a":1,"o":"retried","e":2000,"w":"srv-1","s":1500,"d":500,"err":"timeout"}"#,
            "\n",
            "not json\n",
            r#"{"a":2,"o":"from-the-future","e":3000}"#,
            "\n",
            r#"{"a":2,"o":"lost","e":4000,"err":"worker lost"}"#,
        );
        let rows = AttemptRow::decode_all(raw.as_bytes());
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            AttemptRow {
                attempt: 1,
                outcome: AttemptOutcome::Retried,
                worker: Some("srv-1".into()),
                ended_at_ms: 2000,
                started_at_ms: Some(1500),
                ran_ms: Some(500),
                error: Some("timeout".into()),
                logs: None,
            }
        );
        assert_eq!(rows[1].outcome, AttemptOutcome::Lost);
        assert_eq!((rows[1].worker.as_deref(), rows[1].ran_ms), (None, None));
        assert!(AttemptRow::decode_all(b"").is_empty());
    }
}
