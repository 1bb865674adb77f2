//! Tasks as an operator reads them: one task, a page of a state, and how many of a state pass
//! a filter (the count a bulk action's confirmation shows).

use std::collections::BTreeMap;

use chronos_broker::{
    Inspect, ManageSchedules, Operate, QueueName, Schedules, TaskFilter, TaskRecord, TaskState,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// A task for display: its envelope's fields with the payload decoded to JSON.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// Queue.
    pub queue: String,
    /// State name.
    pub state: String,
    /// Priority level inside the queue (0 runs first; 5 is the default).
    pub priority: u8,
    /// Kind (empty when the envelope does not decode).
    pub kind: String,
    /// The payload as JSON (MessagePack decoded; `"0x.."` for bytes that are not MessagePack).
    pub payload: serde_json::Value,
    /// Failed attempts so far.
    pub retried: u32,
    /// Retries allowed.
    pub max_retry: u32,
    /// Times its handler snoozed it (no attempt spent each time).
    pub snoozes: u32,
    /// Last failure message.
    pub last_error: Option<String>,
    /// When it last failed (unix ms).
    pub last_failed_at_ms: Option<i64>,
    /// When it was enqueued (unix ms).
    pub enqueued_at_ms: Option<i64>,
    /// Headers (trace context, schedule id, ...).
    pub headers: BTreeMap<String, String>,
    /// Why the envelope does not decode, when it does not.
    pub decode_error: Option<String>,
    /// Why its handler cancelled it (a cancelled task only).
    pub cancel_reason: Option<String>,
    /// When its handler cancelled it (unix ms; a cancelled task only).
    pub cancelled_at_ms: Option<i64>,
    /// The last progress its handler reported (`Context::progress`), as JSON, with its
    /// percent when the value says one; read by [`Admin::task`] only (None in listings).
    pub progress: Option<chronos_broker::TaskProgress>,
    /// The progress's percent (0..=100), when its value says one.
    pub progress_percent: Option<f64>,
    /// Its attempt history, oldest first ([`Admin::task`] only; empty in listings).
    pub attempts: Vec<chronos_broker::AttemptRow>,
    /// The time that matters in its state (listings only, unix ms): when a scheduled task runs,
    /// when a retrying one tries again, when an archived or cancelled one ended, until when a
    /// completed one is kept ([`TaskRecord::state_time_ms`]).
    pub state_time_ms: Option<i64>,
    /// An active task's server (its id) and when its handler started there (unix ms), as the
    /// server last published them (every heartbeat); None when not running or not published.
    pub running_on: Option<(String, i64)>,
}

impl TaskRow {
    /// The view of a broker record in `queue`.
    pub fn from_record(queue: &QueueName, r: &TaskRecord) -> Self {
        let mut row = TaskRow {
            id: r.id.clone(),
            queue: queue.to_string(),
            state: r.state.as_str().to_string(),
            priority: r.priority.get(),
            kind: String::new(),
            payload: serde_json::Value::Null,
            retried: 0,
            max_retry: 0,
            snoozes: r.snoozes,
            last_error: None,
            last_failed_at_ms: None,
            enqueued_at_ms: None,
            headers: BTreeMap::new(),
            decode_error: None,
            cancel_reason: r.cancelled.as_ref().map(|c| c.reason.clone()),
            cancelled_at_ms: r.cancelled.as_ref().map(|c| c.at_ms),
            progress: r.progress.clone(),
            progress_percent: r.progress.as_ref().and_then(|p| p.percent()),
            attempts: r.attempts.clone(),
            state_time_ms: r.state_time_ms,
            running_on: None,
        };
        match &r.envelope {
            Ok(e) => {
                row.kind = e.kind.clone();
                row.payload = serde_json::from_str(&chronos_broker::envelope_payload_json(e))
                    .unwrap_or(serde_json::Value::Null);
                row.retried = e.retried;
                row.max_retry = e.max_retry;
                row.last_error = e.last_error.clone();
                row.last_failed_at_ms = e.last_failed_at_ms;
                row.enqueued_at_ms = Some(e.enqueued_at_ms);
                row.headers = e.headers.clone();
            }
            Err(e) => row.decode_error = Some(e.to_string()),
        }
        row
    }
}

/// One page of tasks.
#[derive(Debug, Clone, Serialize)]
pub struct TaskList {
    /// The tasks.
    pub tasks: Vec<TaskRow>,
    /// Cursor of the next page, None at the end.
    pub next: Option<String>,
}

/// The count behind a bulk action's confirmation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MatchCount {
    /// Tasks that pass the filter (all of them when `exact`, else those found so far).
    pub matched: u64,
    /// Tasks read.
    pub scanned: u64,
    /// False when the scan stopped at its bound before the end of the state: then between
    /// `matched` and `at_most` tasks match.
    pub exact: bool,
    /// Tasks in the state when counted (0 when the state has no count).
    pub in_state: u64,
    /// Most tasks that can match: `matched` when exact, else `matched` plus the tasks of the
    /// state not read.
    pub at_most: u64,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// A page of tasks of `state` passing `filter`, from `cursor`; [`AdminError::QueueNotFound`]
    /// for a name that names no queue.
    pub async fn tasks(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskList, AdminError> {
        let q = self.require_queue(name).await?;
        let page = self
            .broker
            .list_page(&q, state, filter, cursor, limit)
            .await?;
        let mut tasks: Vec<TaskRow> = page
            .tasks
            .iter()
            .map(|r| TaskRow::from_record(&q, r))
            .collect();
        if state == TaskState::Active && !tasks.is_empty() {
            self.fill_running_on(&q, &mut tasks).await?;
        }
        Ok(TaskList {
            tasks,
            next: page.next,
        })
    }

    /// Sets [`TaskRow::running_on`] from the live servers' records.
    async fn fill_running_on(&self, q: &QueueName, rows: &mut [TaskRow]) -> Result<(), AdminError> {
        let servers = self.broker.servers().await?;
        let mut on: std::collections::HashMap<&str, (&str, i64)> = Default::default();
        for s in &servers {
            for t in s.tasks.iter().filter(|t| t.queue == q.as_str()) {
                on.insert(t.id.as_str(), (s.id.as_str(), t.started_at_ms));
            }
        }
        for r in rows {
            r.running_on = on
                .get(r.id.as_str())
                .map(|(server, at)| (server.to_string(), *at));
        }
        Ok(())
    }

    /// One task: [`AdminError::QueueNotFound`] for an unknown queue, [`AdminError::TaskNotFound`]
    /// for an unknown id.
    pub async fn task(&self, name: &str, id: &str) -> Result<TaskRow, AdminError> {
        let q = self.require_queue(name).await?;
        match self.broker.task(&q, id).await? {
            Some(r) if r.state == TaskState::Active => {
                let mut rows = [TaskRow::from_record(&q, &r)];
                self.fill_running_on(&q, &mut rows).await?;
                let [row] = rows;
                Ok(row)
            }
            Some(r) => Ok(TaskRow::from_record(&q, &r)),
            None => Err(AdminError::TaskNotFound {
                queue: name.to_string(),
                id: id.to_string(),
            }),
        }
    }
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// How many tasks of `state` pass `filter`, for confirming a bulk action before it runs.
    /// Without a filter this is the state's count (one call); with one, it reads the state page
    /// by page and stops after `max_scan` tasks: the count is then a range,
    /// [`MatchCount::matched`] to [`MatchCount::at_most`] (what was found, plus every task not
    /// read yet). [`AdminError::QueueNotFound`] for an unknown queue.
    pub async fn count_matching(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        max_scan: u64,
    ) -> Result<MatchCount, AdminError> {
        let q = self.require_queue(name).await?;
        let s = self.broker.queue_stats(&q).await?;
        let in_state = match state {
            TaskState::Pending => Some(s.pending),
            TaskState::Active => Some(s.active),
            TaskState::Scheduled => Some(s.scheduled),
            TaskState::Retry => Some(s.retry),
            TaskState::Archived => Some(s.archived),
            TaskState::Completed => Some(s.completed),
            TaskState::Cancelled => Some(s.cancelled),
            _ => None,
        };
        if let (true, Some(n)) = (filter.is_empty(), in_state) {
            return Ok(MatchCount {
                matched: n,
                scanned: n,
                exact: true,
                in_state: n,
                at_most: n,
            });
        }
        let mut count = MatchCount {
            exact: true,
            in_state: in_state.unwrap_or(0),
            ..MatchCount::default()
        };
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .broker
                .list_page(&q, state, filter, cursor.as_deref(), 1000)
                .await?;
            count.matched += page.tasks.len() as u64;
            count.scanned += page.scanned;
            match page.next {
                Some(next) if count.scanned < max_scan => cursor = Some(next),
                Some(_) => {
                    count.exact = false;
                    count.at_most = count
                        .matched
                        .saturating_add(count.in_state.saturating_sub(count.scanned))
                        .max(count.matched);
                    return Ok(count);
                }
                None => {
                    count.at_most = count.matched;
                    return Ok(count);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronos_broker::DecodeError;

    #[test]
    fn an_undecodable_task_still_has_a_row_with_the_reason() {
        let q = QueueName::new("q").expect("queue");
        let rec = TaskRecord {
            id: "t1".into(),
            state: TaskState::Archived,
            priority: Default::default(),
            snoozes: 0,
            envelope: Err(DecodeError::Empty),
            cancelled: None,
            progress: None,
            attempts: Vec::new(),
            state_time_ms: None,
        };
        let row = TaskRow::from_record(&q, &rec);
        assert_eq!((row.id.as_str(), row.state.as_str()), ("t1", "archived"));
        assert_eq!(row.decode_error.as_deref(), Some("empty task envelope"));
        assert_eq!(row.payload, serde_json::Value::Null);
    }
}
