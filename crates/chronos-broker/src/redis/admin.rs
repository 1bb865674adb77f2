//! Operator actions: task actions one by one and in bounded chunks, listing by cursor, queue
//! deletion, history, and the worker's poll for cancel requests.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use fred::bytes::Bytes;
use fred::prelude::*;

use super::lease::decode_envelope;
use super::protocol::{
    CANCELLED_AT, CANCEL_REASON, DELIVERY, ENVELOPE, ERROR, FAILED_AT, PRIORITY, RETRIED, SNOOZES,
    STATE, UNIQUE,
};
use super::record::{Entry, Record};
use super::reply::{ActionCode, EditCode};
use super::{lane, reply, RedisBroker};
use crate::keys::DAY_MS;
use crate::redis::store::store;
use crate::{
    duration_ms, now_ms, ActionOutcome, BrokerError, BulkReport, Cancellation, HistoryCounter,
    HistoryPoint, HistorySpan, Inspect, Operate, Priority, QueueKeys, QueueName, QueueStats,
    TaskAction, TaskEdit, TaskFilter, TaskPage, TaskRecord, TaskState, GROUP,
};

/// How long a cancel request is kept: a worker polls several times a second, so a request
/// older than this has been seen, or its task has ended.
const CANCEL_KEEP: Duration = Duration::from_secs(60);

/// Largest chunk one script call takes.
const MAX_CHUNK: usize = 5_000;

/// Keys of a deleted queue (besides its sets and streams) one queue-delete call removes.
const QUEUE_KEYS_PER_CALL: usize = 500;

/// How long one bulk script call should hold Redis at most: chunks shrink when a call takes
/// longer (see [`RedisBroker::bulk`]).
const CALL_BUDGET: Duration = Duration::from_millis(5);

/// First chunk of a bulk action, and the smallest.
const START_CHUNK: usize = 250;
const MIN_CHUNK: usize = 25;

/// Most tasks one listing call reads, per task asked for (and at least [`MIN_SCAN`]).
const SCAN_FACTOR: usize = 10;
const MIN_SCAN: usize = 1_000;

/// Stream entries as XRANGE returns them: id and fields (values as bytes: envelopes are
/// binary).
type Entries = Vec<(String, Vec<(String, Bytes)>)>;

/// One task as a scan read it: enough to filter it, show it and act on it.
struct Item {
    id: String,
    /// Where it sits in its state's order: the cursor after it.
    cursor: String,
    /// The hash's fields `s`, `u`, `r`, `err`, `f`.
    state: Option<String>,
    unique: Option<String>,
    retried: i64,
    error: Option<String>,
    failed_at: i64,
    /// The hash's `sn` (snoozes), 0 when absent.
    snoozes: i64,
    /// The hash's `p`, or the default.
    priority: Priority,
    /// The envelope bytes (from the stream entry, or the hash's `e`), when read.
    env: Value,
    /// The hash's `cr` and `ca` (a cancelled task's reason and time).
    cancelled: Option<Cancellation>,
    /// Its score in its state's sorted set (see [`TaskRecord::state_time_ms`]).
    at_ms: Option<i64>,
}

impl Item {
    fn record(&self) -> Option<TaskRecord> {
        let state = TaskState::parse(self.state.as_deref()?)?;
        let envelope = decode_envelope(self.env.clone()).map(|mut e| {
            // A plain task's envelope leaves its id out (see lib.lua).
            if e.id.is_empty() {
                e.id = self.id.clone();
            }
            e.retried = u32::try_from(self.retried).unwrap_or(u32::MAX);
            e.last_error = self.error.clone();
            e.last_failed_at_ms = (self.failed_at > 0).then_some(self.failed_at);
            e
        });
        Some(TaskRecord {
            id: self.id.clone(),
            state,
            priority: self.priority,
            snoozes: u32::try_from(self.snoozes).unwrap_or(0),
            envelope,
            cancelled: self.cancelled.clone(),
            progress: None,
            attempts: Vec::new(),
            state_time_ms: self.at_ms,
        })
    }
}

/// One chunk read by [`RedisBroker::scan`].
struct Chunk {
    /// Tasks now in the state, in order.
    items: Vec<Item>,
    /// The cursor after the last position read (also past entries skipped for another state).
    end: Option<String>,
    /// Fewer positions than asked for were left: the state is exhausted.
    exhausted: bool,
    /// Positions read.
    read: u64,
}

impl Operate for RedisBroker {
    async fn act(
        &self,
        queue: &QueueName,
        id: &str,
        action: TaskAction,
    ) -> Result<ActionOutcome, BrokerError> {
        crate::keys::check_task_id(id)?;
        let keys = self.queue_keys(queue);
        let unique = if matches!(action, TaskAction::Archive | TaskAction::Delete) {
            Record::read(&self.inner.client, keys.task(id), &[UNIQUE])
                .await
                .ok()
                .and_then(|r| r.text(UNIQUE, "act").ok().flatten())
        } else {
            None
        };
        let (codes, states) = self
            .run_action(&keys, action, &[(id.to_string(), unique)], false)
            .await?;
        let code = codes.first().copied().unwrap_or(0);
        let state = states.into_iter().next().unwrap_or_default();
        Ok(outcome(code, &state))
    }

    /// The tasks' unique locks are read first (one pipelined read per task, for an archive or
    /// a delete, which release them), then the actions go in calls that adapt their size as
    /// [`Operate::act_all`]'s do: no call holds Redis much longer than 5 ms.
    async fn act_many(
        &self,
        queue: &QueueName,
        ids: &[String],
        action: TaskAction,
    ) -> Result<Vec<ActionOutcome>, BrokerError> {
        for id in ids {
            crate::keys::check_task_id(id)?;
        }
        let keys = self.queue_keys(queue);
        let uniques: Vec<Option<String>> =
            if matches!(action, TaskAction::Archive | TaskAction::Delete) {
                futures::future::join_all(ids.iter().map(|id| async {
                    Record::read(&self.inner.client, keys.task(id), &[UNIQUE])
                        .await
                        .ok()
                        .and_then(|r| r.text(UNIQUE, "act").ok().flatten())
                }))
                .await
            } else {
                vec![None; ids.len()]
            };
        let tasks: Vec<(String, Option<String>)> = ids.iter().cloned().zip(uniques).collect();
        let mut out = Vec::with_capacity(tasks.len());
        let mut chunk = START_CHUNK;
        let mut rest = tasks.as_slice();
        while !rest.is_empty() {
            let (part, tail) = rest.split_at(chunk.min(rest.len()));
            let t = std::time::Instant::now();
            let (codes, states) = self.run_action(&keys, action, part, false).await?;
            chunk = adapt(chunk, t.elapsed(), MAX_CHUNK);
            for i in 0..part.len() {
                let code = codes.get(i).copied().unwrap_or(0);
                let state = states.get(i).map(String::as_str).unwrap_or_default();
                out.push(outcome(code, state));
            }
            rest = tail;
        }
        Ok(out)
    }

    async fn act_all(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
        chunk: usize,
    ) -> Result<BulkReport, BrokerError> {
        if !action.sources().contains(&state) {
            return Err(BrokerError::InvalidOption(format!(
                "{action:?} does not take tasks in state {}",
                state.as_str()
            )));
        }
        self.bulk(queue, state, filter, action, chunk, false).await
    }

    async fn list_page(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, BrokerError> {
        let keys = self.queue_keys(queue);
        let limit = limit.clamp(1, MAX_CHUNK);
        let budget = (limit * SCAN_FACTOR).max(MIN_SCAN) as u64;
        let mut page = TaskPage::default();
        let mut cursor = cursor.map(str::to_string);
        loop {
            let want = limit - page.tasks.len();
            // Without a filter every task read is shown: read exactly what is missing.
            let n = if filter.is_empty() {
                want
            } else {
                want.max(100)
            };
            let chunk = self.scan(&keys, state, cursor.as_deref(), n, true).await?;
            page.scanned += chunk.read;
            let mut full = false;
            for item in &chunk.items {
                if full {
                    break;
                }
                let Some(rec) = item.record() else { continue };
                cursor = Some(item.cursor.clone());
                if filter.matches(&rec.envelope) {
                    page.tasks.push(rec);
                    full = page.tasks.len() >= limit;
                }
            }
            if full {
                page.next = cursor;
                return Ok(page);
            }
            if chunk.end.is_some() {
                cursor = chunk.end;
            }
            if chunk.exhausted {
                page.next = None;
                return Ok(page);
            }
            if page.scanned >= budget {
                page.next = cursor;
                return Ok(page);
            }
        }
    }

    async fn delete_queue(&self, queue: &QueueName, force: bool) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut deleted = 0;
        // A few rounds: producers may still be writing while a forced delete runs.
        for _ in 0..3 {
            if force {
                for state in [
                    TaskState::Active,
                    TaskState::Pending,
                    TaskState::Scheduled,
                    TaskState::Retry,
                    TaskState::Archived,
                    TaskState::Completed,
                    TaskState::Cancelled,
                ] {
                    let r = self
                        .bulk(
                            queue,
                            state,
                            &TaskFilter::default(),
                            TaskAction::Delete,
                            1000,
                            true,
                        )
                        .await?;
                    deleted += r.done;
                }
                deleted += self.delete_stray_entries(&keys).await?;
            }
            let declared = keys.state_keys();
            // Every other key of the queue goes with it, in calls of bounded size that each
            // check again that no task arrived meanwhile.
            let others = self.other_queue_keys(&keys, &declared).await?;
            let mut held = 0;
            for part in others.chunks(QUEUE_KEYS_PER_CALL).chain(
                // One call even when there is nothing else to delete.
                others.is_empty().then_some(&[][..]),
            ) {
                let mut all = declared.clone();
                all.extend(part.iter().cloned());
                all.push(keys.events());
                held = reply::int(
                    &self.run(|s| &s.admin_queue_delete, all, Vec::new()).await?,
                    "queue delete",
                )?;
                if held != 0 {
                    break;
                }
            }
            if held == 0 {
                // Outside the queue's slot: plain commands after the queue's own keys are gone.
                let _: i64 = self
                    .inner
                    .client
                    .srem(self.inner.keys.queues(), queue.as_str())
                    .await
                    .map_err(store)?;
                let _: i64 = self
                    .inner
                    .client
                    .srem(self.inner.keys.paused(), queue.as_str())
                    .await
                    .map_err(store)?;
                // Servers of a queue created again under this name must not keep it paused.
                self.signal_paused().await?;
                self.forget_queues();
                return Ok(deleted);
            }
            if !force {
                return Err(BrokerError::QueueNotEmpty {
                    queue: queue.to_string(),
                    tasks: held.max(0) as u64,
                });
            }
        }
        Err(BrokerError::QueueNotEmpty {
            queue: queue.to_string(),
            tasks: self.queue_stats(queue).await.map(total).unwrap_or(0),
        })
    }

    async fn history(
        &self,
        queue: &QueueName,
        span: HistorySpan,
    ) -> Result<Vec<HistoryPoint>, BrokerError> {
        let keys = self.queue_keys(queue);
        let now = now_ms();
        let today = now.div_euclid(DAY_MS);
        match span {
            HistorySpan::Minutes => {
                let minute = now.div_euclid(60_000);
                let first = minute - 1439;
                let mut points: Vec<HistoryPoint> = (first..=minute)
                    .map(|m| HistoryPoint {
                        start_ms: m * 60_000,
                        ..Default::default()
                    })
                    .collect();
                // Two days' hashes cover the last 24 hours (more when clocks differ a little).
                for counter in [HistoryCounter::Processed, HistoryCounter::Failed] {
                    for day in [today - 1, today, today + 1] {
                        let all: HashMap<String, i64> = self
                            .inner
                            .client
                            .hgetall(keys.history_minutes(counter, day))
                            .await
                            .map_err(store)?;
                        for (field, n) in all {
                            let Ok(m) = field.parse::<i64>() else {
                                continue;
                            };
                            let Some(p) = usize::try_from(m - first)
                                .ok()
                                .and_then(|i| points.get_mut(i))
                            else {
                                continue;
                            };
                            let n = n.max(0) as u64;
                            match counter {
                                HistoryCounter::Processed => p.processed += n,
                                HistoryCounter::Failed => p.failed += n,
                            }
                        }
                    }
                }
                Ok(points)
            }
            HistorySpan::Days => {
                let days: Vec<i64> = (today - 89..=today).collect();
                let mut out: Vec<HistoryPoint> = days
                    .iter()
                    .map(|d| HistoryPoint {
                        start_ms: d * DAY_MS,
                        ..Default::default()
                    })
                    .collect();
                for counter in [HistoryCounter::Processed, HistoryCounter::Failed] {
                    let names: Vec<String> =
                        days.iter().map(|d| keys.history_day(counter, *d)).collect();
                    // One slot (the queue's tag), so one MGET is valid on a cluster too.
                    let values: Vec<Option<i64>> =
                        self.inner.client.mget(names).await.map_err(store)?;
                    for (p, v) in out.iter_mut().zip(values) {
                        let n = v.unwrap_or(0).max(0) as u64;
                        match counter {
                            HistoryCounter::Processed => p.processed = n,
                            HistoryCounter::Failed => p.failed = n,
                        }
                    }
                }
                Ok(out)
            }
        }
    }

    async fn all_queue_stats(&self) -> Result<Vec<(QueueName, QueueStats)>, BrokerError> {
        let queues = self.queues().await?;
        let stats = futures::future::join_all(
            queues
                .iter()
                .map(|q| async move { self.queue_stats(q).await }),
        )
        .await;
        queues
            .into_iter()
            .zip(stats)
            .map(|(q, s)| s.map(|s| (q, s)))
            .collect()
    }

    async fn prioritize(
        &self,
        queue: &QueueName,
        id: &str,
        priority: Priority,
    ) -> Result<ActionOutcome, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut declared = vec![keys.stream(), keys.task(id)];
        declared.extend(keys.lanes());
        declared.push(keys.settings());
        declared.extend(keys.tenants());
        declared.extend(self.event_stream(&keys).await?);
        let args: Vec<Value> = vec![GROUP.into(), id.into(), priority.to_string().into()];
        let res = self.run(|s| &s.prioritize, declared, args).await?;
        let mut cols = reply::array(res, "prioritize")?.into_iter();
        let code = reply::int(&cols.next().unwrap_or(Value::Null), "prioritize")?;
        let state =
            reply::string(cols.next().unwrap_or(Value::Null), "prioritize").unwrap_or_default();
        Ok(outcome(code, &state))
    }

    async fn edit(
        &self,
        queue: &QueueName,
        id: &str,
        edit: &TaskEdit,
    ) -> Result<ActionOutcome, BrokerError> {
        crate::keys::check_task_id(id)?;
        if edit.is_empty() {
            return Err(BrokerError::InvalidOption(
                "an edit needs a payload, a run time or a level".into(),
            ));
        }
        if let Some(p) = edit.new_payload() {
            if p.len() > self.inner.max_payload {
                return Err(BrokerError::PayloadTooLarge {
                    size: p.len(),
                    limit: self.inner.max_payload,
                });
            }
        }
        // The run time is made absolute here, once: a call the client re-sends after a lost
        // reply carries the same time, so it finds the task already as asked.
        let change = Change {
            payload: edit.new_payload(),
            kind: edit.kind(),
            run_at_ms: edit.run_at_ms(now_ms()),
            level: edit.new_priority(),
        };
        let (code, said, _) = self.edit_script(queue, id, &change, "").await?;
        Ok(match EditCode::from_reply(code) {
            Some(EditCode::Done) => ActionOutcome::Done,
            Some(EditCode::Already) => ActionOutcome::Already,
            Some(EditCode::NotFound) => ActionOutcome::NotFound,
            Some(EditCode::Refused) => ActionOutcome::Refused(TaskState::parse(&said)),
            Some(EditCode::OtherKind) => {
                return Err(BrokerError::InvalidOption(format!(
                    "task {id:?} is of kind {said:?}, not {:?}",
                    edit.kind().unwrap_or_default()
                )))
            }
            Some(EditCode::Corrupt) | None => ActionOutcome::Corrupt,
        })
    }
}

/// What one edit.lua call changes (None: unchanged).
pub(super) struct Change<'a> {
    /// The new payload.
    pub payload: Option<&'a [u8]>,
    /// The kind the payload is for (None: any).
    pub kind: Option<&'a str>,
    /// The new run time, absolute.
    pub run_at_ms: Option<i64>,
    /// The new level.
    pub level: Option<chronos_core::Priority>,
}

impl RedisBroker {
    /// One edit.lua call: its code, the state it names, and the task's run time (codes 1 and
    /// 2). `rule` is the deduplication asking ('' for an operator; see edit.lua).
    pub(super) async fn edit_script(
        &self,
        queue: &QueueName,
        id: &str,
        change: &Change<'_>,
        rule: &str,
    ) -> Result<(i64, String, i64), BrokerError> {
        let keys = self.queue_keys(queue);
        let mut declared = vec![
            keys.stream(),
            keys.task(id),
            keys.scheduled(),
            keys.retry(),
            keys.deduplicated(),
        ];
        declared.extend(keys.lanes());
        declared.push(keys.settings());
        declared.extend(keys.tenants());
        let payload = change.payload;
        let args: Vec<Value> = vec![
            GROUP.into(),
            id.into(),
            reply::flag(payload.is_some()),
            Value::Bytes(Bytes::copy_from_slice(payload.unwrap_or_default())),
            change.kind.unwrap_or_default().into(),
            change
                .run_at_ms
                .map(|ms| ms.to_string())
                .unwrap_or_default()
                .into(),
            change
                .level
                .map(|p| p.to_string())
                .unwrap_or_default()
                .into(),
            rule.into(),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let res = self.run(|s| &s.edit, declared, args).await?;
        let mut cols = reply::array(res, "edit")?.into_iter();
        let code = reply::int(&cols.next().unwrap_or(Value::Null), "edit")?;
        let said = reply::string(cols.next().unwrap_or(Value::Null), "edit").unwrap_or_default();
        let at = reply::int(&cols.next().unwrap_or(Value::Null), "edit").unwrap_or(0);
        Ok((code, said, at))
    }
}

/// Tasks a queue holds, in every state.
fn total(s: QueueStats) -> u64 {
    s.pending + s.active + s.scheduled + s.retry + s.archived + s.completed
}

/// Reads one script code with the state it names.
/// The next chunk size after a call of `chunk` tasks took `took`: halved (not below
/// MIN_CHUNK) when over the call budget, doubled (not above `max`) when well under it.
fn adapt(chunk: usize, took: Duration, max: usize) -> usize {
    if took > CALL_BUDGET {
        (chunk / 2).max(MIN_CHUNK).min(max)
    } else if took < CALL_BUDGET / 4 {
        (chunk * 2).min(max)
    } else {
        chunk
    }
}

fn outcome(code: i64, state: &str) -> ActionOutcome {
    match ActionCode::from_reply(code) {
        Some(ActionCode::Done) => ActionOutcome::Done,
        Some(ActionCode::Already) => ActionOutcome::Already,
        Some(ActionCode::NotFound) => ActionOutcome::NotFound,
        Some(ActionCode::Refused) => ActionOutcome::Refused(TaskState::parse(state)),
        Some(ActionCode::Corrupt) | None => ActionOutcome::Corrupt,
    }
}

/// The exclusive XRANGE / XPENDING start after a stream cursor (`-` without one). A cursor is
/// an entry id `<ms>-<seq>` or `<ms>` in decimal digits; anything else, or the last possible
/// id (nothing can follow it), is the caller's mistake and an [`BrokerError::InvalidOption`],
/// not a server error.
fn stream_start(cursor: Option<&str>) -> Result<String, BrokerError> {
    let Some(c) = cursor else {
        return Ok("-".to_string());
    };
    let part = |p: &str| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u64>().ok())
            .flatten()
    };
    let (ms, seq) = match c.split_once('-') {
        Some((ms, seq)) => (part(ms), part(seq)),
        None => (part(c), Some(0)),
    };
    match (ms, seq) {
        (Some(ms), Some(seq)) if (ms, seq) != (u64::MAX, u64::MAX) => Ok(format!("({c}")),
        _ => Err(BrokerError::InvalidOption(format!("bad cursor {c:?}"))),
    }
}

/// Splits a zset cursor `<score>:<member>`; NaN is no score (Redis refuses it as a bound).
fn zset_cursor(cursor: &str) -> Option<(f64, &str)> {
    let (score, member) = cursor.split_once(':')?;
    let score: f64 = score.parse().ok()?;
    (!score.is_nan()).then_some((score, member))
}

impl RedisBroker {
    /// When the oldest task waiting for a worker in `queue` became ready (unix ms: the time part
    /// of its stream entry id, written when it was enqueued, came due or was retried), or None
    /// when none waits. Two reads whatever the queue holds: the group's last-delivered id, then
    /// the entry after it (delivered entries sit before it and are never read).
    pub async fn oldest_ready_ms(&self, queue: &QueueName) -> Result<Option<i64>, BrokerError> {
        let client = &self.inner.client;
        let stream = self.queue_keys(queue).stream();
        let groups: Value = match client.xinfo_groups(stream.as_str()).await {
            Ok(v) => v,
            // No stream yet: nothing waits.
            Err(e) if e.details().contains("no such key") => return Ok(None),
            Err(e) => return Err(store(e)),
        };
        let mut last = None;
        for g in reply::array(groups, "xinfo groups")? {
            let Ok(fields) = g.into_map() else { continue };
            let fields = fields.inner();
            let name = fields.iter().find(|(k, _)| k.as_str() == Some("name"));
            if name.and_then(|(_, v)| v.as_str()).as_deref() != Some(GROUP) {
                continue;
            }
            last = fields
                .iter()
                .find(|(k, _)| k.as_str() == Some("last-delivered-id"))
                .and_then(|(_, v)| v.as_string());
        }
        let start = last.map_or("-".to_string(), |id| format!("({id}"));
        let next: Entries = client
            .xrange(stream.as_str(), start.as_str(), "+", Some(1))
            .await
            .map_err(store)?;
        Ok(next
            .first()
            .and_then(|(mid, _)| mid.split_once('-'))
            .and_then(|(ms, _)| ms.parse().ok()))
    }

    /// The requests of [`crate::Maintain::cancel_requested`]: one ZMSCORE.
    pub(super) async fn cancel_requests(
        &self,
        queue: &QueueName,
        msg_ids: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        if msg_ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.queue_keys(queue).cancel();
        let scores: Vec<Option<f64>> = self
            .inner
            .client
            .zmscore(key, msg_ids.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .map_err(store)?;
        Ok(msg_ids
            .iter()
            .zip(scores)
            .filter(|(_, s)| s.is_some())
            .map(|(m, _)| m.clone())
            .collect())
    }

    /// The bulk loop behind [`Operate::act_all`] (`force`: delete active tasks too, for a
    /// forced queue delete).
    async fn bulk(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
        chunk: usize,
        force: bool,
    ) -> Result<BulkReport, BrokerError> {
        let keys = self.queue_keys(queue);
        let max = chunk.clamp(1, MAX_CHUNK);
        // Chunks adapt to the server's speed: a script call that took longer than the budget
        // (round trip, an upper bound of the time Redis spent in it) halves the next chunk, a
        // quick one doubles it, up to the caller's size. So no call holds Redis for long even
        // where a task's transition costs more than usual (a slow or busy host).
        let mut chunk = max.min(START_CHUNK);
        let need_env = !filter.is_empty();
        let mut report = BulkReport::default();
        let mut cursor: Option<String> = None;
        loop {
            let read = self
                .scan(&keys, state, cursor.as_deref(), chunk, need_env)
                .await?;
            report.scanned += read.items.len() as u64;
            let mut picked = Vec::new();
            for item in &read.items {
                let pass = !need_env
                    || item
                        .record()
                        .is_some_and(|rec| filter.matches(&rec.envelope));
                if pass {
                    picked.push((item.id.clone(), item.unique.clone()));
                }
            }
            report.matched += picked.len() as u64;
            if !picked.is_empty() {
                let t = std::time::Instant::now();
                let (codes, states) = self.run_action(&keys, action, &picked, force).await?;
                chunk = adapt(chunk, t.elapsed(), max);
                report.calls += 1;
                for (c, s) in codes.iter().zip(&states) {
                    match outcome(*c, s) {
                        ActionOutcome::Done => report.done += 1,
                        ActionOutcome::Refused(Some(TaskState::Active)) => report.running += 1,
                        ActionOutcome::Corrupt => report.failed += 1,
                        _ => report.skipped += 1,
                    }
                }
            }
            // The next chunk starts after the last position read. Both kinds of cursor are
            // positions, valid whatever the action did to the tasks before them: an entry id,
            // and a sorted set's (score, member), which zset_page.lua resumes after also when
            // the member has left the set.
            if read.end.is_some() {
                cursor = read.end;
            }
            if read.exhausted {
                return Ok(report);
            }
        }
    }

    /// Calls the action's script on `tasks` (id, unique lock key as the hash names it).
    /// Returns the script's codes and states, one per task.
    async fn run_action(
        &self,
        keys: &QueueKeys,
        action: TaskAction,
        tasks: &[(String, Option<String>)],
        force: bool,
    ) -> Result<(Vec<i64>, Vec<String>), BrokerError> {
        let mut args: Vec<Value> = Vec::with_capacity(tasks.len() + 2);
        let mut declared: Vec<String> = Vec::with_capacity(2 * tasks.len() + 5);
        let with_lock = |declared: &mut Vec<String>| {
            for (id, u) in tasks {
                let tkey = keys.task(id);
                let lock = u.clone().filter(|k| keys.owns(k)).unwrap_or(tkey.clone());
                declared.push(tkey);
                declared.push(lock);
            }
        };
        // Each action writes its tasks' events (lib.lua `transition`).
        let events = self.event_stream(keys).await?;
        let res = match action {
            TaskAction::RunNow => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                ]);
                declared.extend(tasks.iter().map(|(id, _)| keys.task(id)));
                declared.extend(keys.lanes());
                declared.push(keys.settings());
                declared.extend(keys.tenants());
                declared.push(keys.cancelled());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_run, declared, args).await?
            }
            TaskAction::Archive => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                ]);
                with_lock(&mut declared);
                declared.extend(keys.lanes());
                declared.extend(keys.tenants());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_archive, declared, args).await?
            }
            TaskAction::Delete => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                    keys.completed(),
                ]);
                with_lock(&mut declared);
                declared.extend(keys.lanes());
                declared.extend(keys.tenants());
                declared.push(keys.cancelled());
                args.push(GROUP.into());
                args.push(reply::flag(force));
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_delete, declared, args).await?
            }
            TaskAction::Cancel => {
                declared.push(keys.cancel());
                declared.push(keys.stream());
                declared.extend(tasks.iter().map(|(id, _)| keys.task(id)));
                args.push(duration_ms(CANCEL_KEEP).into());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_cancel, declared, args).await?
            }
        };
        let mut parts = reply::array(res, "admin")?.into_iter();
        let codes = reply::array(parts.next().unwrap_or(Value::Null), "admin")?
            .iter()
            .map(|v| reply::int(v, "admin"))
            .collect::<Result<Vec<_>, _>>()?;
        let states = reply::array(parts.next().unwrap_or(Value::Null), "admin")?
            .into_iter()
            .map(|v| reply::string(v, "admin").unwrap_or_default())
            .collect();
        if codes.len() != tasks.len() {
            return Err(reply::bad(
                "admin",
                format!("{} codes for {} tasks", codes.len(), tasks.len()),
            ));
        }
        Ok((codes, states))
    }

    /// Reads up to `n` positions of `state` after `cursor`, keeping the tasks that are in that
    /// state now. Costs one range read plus one hash read per task (sent together).
    ///
    /// Pending and active tasks are read stream by stream, the most urgent level first (the
    /// order a worker takes them in); their cursors are entry ids qualified by level as lease
    /// ids are (lane.rs), and the end of one level's stream is a cursor at the start of the
    /// next one's.
    async fn scan(
        &self,
        keys: &QueueKeys,
        state: TaskState,
        cursor: Option<&str>,
        n: usize,
        need_env: bool,
    ) -> Result<Chunk, BrokerError> {
        if !matches!(state, TaskState::Pending | TaskState::Active) {
            return self.scan_lane(keys, None, state, cursor, n, need_env).await;
        }
        let order = self.lane_order(keys).await?;
        let (level, inner) = match cursor {
            None => (order[0], None),
            Some(c) => {
                let (l, mid) = lane::split(c);
                (l.filter(|&l| l != Priority::NORMAL.get()), Some(mid))
            }
        };
        let Some(pos) = order.iter().position(|&o| o == level) else {
            return Err(BrokerError::InvalidOption(format!(
                "bad cursor {cursor:?}: no such level"
            )));
        };
        let mut chunk = self
            .scan_lane(keys, level, state, inner, n, need_env)
            .await?;
        for item in &mut chunk.items {
            item.cursor = lane::qualify(level, std::mem::take(&mut item.cursor));
        }
        chunk.end = chunk.end.map(|e| lane::qualify(level, e));
        if chunk.exhausted {
            if let Some(&next) = order.get(pos + 1) {
                chunk.exhausted = false;
                chunk.end = Some(lane::qualify(next, "0-0".to_string()));
            }
        }
        Ok(chunk)
    }

    /// The lanes of a queue in the order workers take them: the levels that have a stream and
    /// the main stream (None) at the default level's place.
    pub(super) async fn lane_order(
        &self,
        keys: &QueueKeys,
    ) -> Result<Vec<Option<u8>>, BrokerError> {
        let levels: Vec<String> = self
            .inner
            .client
            .hkeys(keys.levels())
            .await
            .map_err(store)?;
        let mut order: Vec<u8> = levels
            .iter()
            .filter_map(|l| l.parse::<u8>().ok())
            .filter(|&l| l < Priority::LEVELS || l == super::TENANT_LANE)
            .chain(std::iter::once(Priority::NORMAL.get()))
            .collect();
        order.sort_unstable();
        order.dedup();
        Ok(order
            .into_iter()
            .map(|l| (l != Priority::NORMAL.get()).then_some(l))
            .collect())
    }

    /// [`RedisBroker::scan`] inside one lane (`level`'s stream; None: the main one, and the
    /// only one for states kept in sorted sets), with bare entry ids as cursors.
    async fn scan_lane(
        &self,
        keys: &QueueKeys,
        level: Option<u8>,
        state: TaskState,
        cursor: Option<&str>,
        n: usize,
        need_env: bool,
    ) -> Result<Chunk, BrokerError> {
        let stream = keys.lane(level);
        let client = &self.inner.client;
        // (task id, cursor, envelope from the stream entry)
        let mut listed: Vec<(String, String, Option<Bytes>)> = Vec::new();
        // The sorted-set score of each task listed from one.
        let mut scores: HashMap<String, i64> = HashMap::new();
        let read;
        let exhausted;
        let end;
        match state {
            TaskState::Pending => {
                let start = stream_start(cursor)?;
                let page: Entries = client
                    .xrange(stream.as_str(), start.as_str(), "+", Some(n as u64))
                    .await
                    .map_err(store)?;
                read = page.len() as u64;
                exhausted = page.len() < n;
                end = page.last().map(|(mid, _)| mid.clone());
                for (mid, fields) in page {
                    let entry = Entry::of(&fields);
                    if let Some(id) = entry.task(&mid) {
                        listed.push((id, mid, entry.envelope.cloned()));
                    }
                }
            }
            TaskState::Active => {
                // The group's pending entries list holds exactly the delivered entries.
                let start = stream_start(cursor)?;
                let pel: Value = match client
                    .xpending(stream.as_str(), GROUP, (start.as_str(), "+", n as u64))
                    .await
                {
                    Ok(v) => v,
                    Err(e) if e.details().contains("NOGROUP") => Value::Null,
                    Err(e) => return Err(store(e)),
                };
                let rows = reply::array(pel, "xpending")?;
                read = rows.len() as u64;
                exhausted = rows.len() < n;
                let mids: Vec<String> = rows
                    .into_iter()
                    .filter_map(|r| {
                        reply::array(r, "xpending")
                            .ok()?
                            .into_iter()
                            .next()
                            .and_then(|v| reply::string(v, "xpending").ok())
                    })
                    .collect();
                end = mids.last().cloned();
                let stream = stream.as_str();
                let entries = futures::future::join_all(mids.iter().map(|mid| async move {
                    let e: Result<Entries, _> = client
                        .xrange(stream, mid.as_str(), mid.as_str(), Some(1))
                        .await;
                    e
                }))
                .await;
                for (mid, entry) in mids.into_iter().zip(entries) {
                    let fields = entry
                        .map_err(store)?
                        .into_iter()
                        .next()
                        .map(|(_, f)| f)
                        .unwrap_or_default();
                    let entry = Entry::of(&fields);
                    if let Some(id) = entry.task(&mid) {
                        listed.push((id, mid, entry.envelope.cloned()));
                    }
                }
            }
            _ => {
                let z = match state {
                    TaskState::Scheduled => keys.scheduled(),
                    TaskState::Retry => keys.retry(),
                    TaskState::Archived => keys.archived(),
                    TaskState::Cancelled => keys.cancelled(),
                    _ => keys.completed(),
                };
                // Ended tasks newest first (what an operator looks for); due ones soonest first.
                let newest_first = matches!(
                    state,
                    TaskState::Archived | TaskState::Completed | TaskState::Cancelled
                );
                let page = self.zset_page(&z, cursor, n, newest_first).await?;
                read = page.len() as u64;
                exhausted = page.len() < n;
                end = page.last().map(|(id, score)| format!("{score}:{id}"));
                for (id, score) in page {
                    let c = format!("{score}:{id}");
                    if score.is_finite() {
                        scores.insert(id.clone(), score as i64);
                    }
                    listed.push((id, c, None));
                }
            }
        }
        // A task a worker holds is active, its start marked or not (lib.lua `held_by_worker`),
        // and so is a plain task (an entry whose id is the task's, no hash): one XPENDING over
        // the page's range tells them all.
        let held = match (state, listed.first(), listed.last()) {
            (TaskState::Pending | TaskState::Active, Some(first), Some(last)) => {
                let n = 2 * (read as usize).max(listed.len()) + 16;
                self.held_in(&stream, &first.1, &last.1, n).await?
            }
            _ => HashSet::new(),
        };
        let zset = !matches!(state, TaskState::Pending | TaskState::Active);
        // The envelope only where it lives in the hash (out of the stream) and is wanted.
        let fields: &'static [&'static str] = if zset && need_env {
            &[
                STATE,
                UNIQUE,
                RETRIED,
                ERROR,
                FAILED_AT,
                PRIORITY,
                SNOOZES,
                CANCEL_REASON,
                CANCELLED_AT,
                ENVELOPE,
            ]
        } else {
            &[
                STATE,
                UNIQUE,
                RETRIED,
                ERROR,
                FAILED_AT,
                PRIORITY,
                SNOOZES,
                CANCEL_REASON,
                CANCELLED_AT,
            ]
        };
        let hashes = futures::future::join_all(
            listed
                .iter()
                .map(|(id, _, _)| Record::read(client, keys.task(id), fields)),
        )
        .await;
        let mut items = Vec::with_capacity(listed.len());
        for ((id, cursor, entry_env), h) in listed.into_iter().zip(hashes) {
            // A key of another type where the hash belongs: that task alone is skipped.
            let mut rec = match h {
                Ok(rec) => rec,
                Err(e) if e.details().starts_with("WRONGTYPE") => continue,
                Err(e) => return Err(store(e)),
            };
            let mut s = rec.text(STATE, "scan").ok().flatten();
            if !zset {
                let held = held.contains(&cursor);
                if s.is_none() && id == cursor {
                    s = Some(if held { "active" } else { "pending" }.to_string());
                } else if held && s.as_deref() == Some("pending") {
                    s = Some("active".to_string());
                }
            }
            if s.as_deref() != Some(state.as_str()) {
                continue;
            }
            let unique = rec.text(UNIQUE, "scan").ok().flatten();
            let retried = rec.int(RETRIED);
            let error = rec.text(ERROR, "scan").ok().flatten();
            let failed_at = rec.int(FAILED_AT);
            let snoozes = rec.int(SNOOZES);
            let priority = rec
                .text(PRIORITY, "scan")
                .ok()
                .flatten()
                .and_then(|p| p.parse::<u8>().ok())
                .and_then(|l| Priority::level(l).ok())
                .unwrap_or_default();
            let cancelled = rec.cancellation();
            let env = match entry_env {
                Some(b) => Value::Bytes(b),
                None => rec.take(ENVELOPE),
            };
            items.push(Item {
                at_ms: scores.get(&id).copied(),
                id,
                cursor,
                state: s,
                unique,
                retried,
                error,
                failed_at,
                snoozes,
                priority,
                env,
                cancelled,
            });
        }
        Ok(Chunk {
            items,
            end,
            exhausted,
            read,
        })
    }

    /// The entries of `stream` between `first` and `last` (inclusive) that a worker holds: in
    /// the group's pending list under a consumer other than the one tenant tasks wait under.
    /// Such a task is active for an operator whether or not its start was marked (a handler
    /// that ends within the mark's delay is never marked, and a plain task's completion may
    /// wait for the worker's next fetch): see lib.lua `held_by_worker`.
    pub(super) async fn held_in(
        &self,
        stream: &str,
        first: &str,
        last: &str,
        n: usize,
    ) -> Result<HashSet<String>, BrokerError> {
        let pel: Value = match self
            .inner
            .client
            .xpending(stream, GROUP, (first, last, n as u64))
            .await
        {
            Ok(v) => v,
            Err(e) if e.details().contains("NOGROUP") => return Ok(HashSet::new()),
            Err(e) => return Err(store(e)),
        };
        Ok(reply::array(pel, "xpending")?
            .into_iter()
            .filter_map(|row| {
                let mut cols = reply::array(row, "xpending").ok()?.into_iter();
                let mid = reply::string(cols.next()?, "xpending").ok()?;
                let owner = reply::string(cols.next()?, "xpending").ok()?;
                (owner != super::protocol::TENANT_PARK).then_some(mid)
            })
            .collect())
    }

    /// Up to `n` members of zset `z` after `cursor` (`<score>:<member>`), with their scores,
    /// lowest score first or (`newest_first`) highest first. The cursor is a position, found in
    /// one atomic call (zset_page.lua): it holds when its member has left the set, without
    /// skipping the members that share its score (tasks settled in one millisecond).
    async fn zset_page(
        &self,
        z: &str,
        cursor: Option<&str>,
        n: usize,
        newest_first: bool,
    ) -> Result<Vec<(String, f64)>, BrokerError> {
        let client = &self.inner.client;
        let Some(c) = cursor else {
            return client
                .zrange(z, 0, n as i64 - 1, None, newest_first, None, true)
                .await
                .map_err(store);
        };
        let Some((score, member)) = zset_cursor(c) else {
            return Err(BrokerError::InvalidOption(format!("bad cursor {c:?}")));
        };
        let args: Vec<Value> = vec![
            score.to_string().into(),
            member.into(),
            (n as i64).into(),
            reply::flag(newest_first),
        ];
        let res = self
            .run(|s| &s.zset_page, vec![z.to_string()], args)
            .await?;
        let flat = reply::array(res, "zset page")?;
        let mut out = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(m), Some(s)) = (it.next(), it.next()) {
            let m = reply::string(m, "zset page")?;
            let s = reply::string(s, "zset page")?;
            let s = match s.as_str() {
                "inf" | "+inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => other
                    .parse()
                    .map_err(|_| reply::bad("zset page", format!("score {other:?}")))?,
            };
            out.push((m, s));
        }
        Ok(out)
    }

    /// The keys of a queue being deleted that `declared` (its sets, streams, counters and
    /// settings) leaves out: one SCAN over the queue's prefix (on a cluster, on the node of its
    /// slot). Leaves out the event stream (every call declares it) and the scheduler's keys
    /// (`sched:*`: its fences and fire state guard the schedules that still feed the queue).
    async fn other_queue_keys(
        &self,
        keys: &QueueKeys,
        declared: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        let prefix = keys.prefix();
        let pattern = format!("{}*", super::locks::glob_escape(prefix));
        let scheduler = format!("{prefix}sched:");
        let events = keys.events();
        let mut found = HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, page): (String, Vec<String>) = self
                .inner
                .client
                .scan_page(cursor, pattern.clone(), Some(1_000), None)
                .await
                .map_err(store)?;
            found.extend(page.into_iter().filter(|k| {
                k.starts_with(prefix)
                    && !k.starts_with(&scheduler)
                    && *k != events
                    && !declared.contains(k)
            }));
            if next == "0" {
                break;
            }
            cursor = next;
        }
        let mut out: Vec<String> = found.into_iter().collect();
        out.sort();
        Ok(out)
    }

    /// Stream entries no state listing reaches (an entry whose task hash is gone or names
    /// another delivery): removed before a forced queue delete, a page at a time. An entry of a
    /// live task (enqueued meanwhile) is left for the next round of the delete. Returns 0:
    /// these entries held no task.
    async fn delete_stray_entries(&self, keys: &QueueKeys) -> Result<u64, BrokerError> {
        // Every level's stream too (the default level's is the main one).
        let mut streams = keys.lanes();
        streams.pop();
        for stream in streams {
            self.delete_stray_entries_of(keys, &stream).await?;
        }
        Ok(0)
    }

    /// [`RedisBroker::delete_stray_entries`] on one stream of the queue.
    async fn delete_stray_entries_of(
        &self,
        keys: &QueueKeys,
        stream: &str,
    ) -> Result<u64, BrokerError> {
        let client = &self.inner.client;
        let mut start = "-".to_string();
        loop {
            let page: Entries = client
                .xrange(stream, start.as_str(), "+", Some(1000))
                .await
                .map_err(store)?;
            let Some((last, _)) = page.last() else {
                return Ok(0);
            };
            let next = format!("({last}");
            let full = page.len() == 1000;
            let owners = futures::future::join_all(page.iter().map(|(mid, fields)| async move {
                let entry = Entry::of(fields);
                let Some(id) = entry.task_id.and_then(|v| std::str::from_utf8(v).ok()) else {
                    // A plain task's entry (no `i`, its id its own) is its whole record.
                    return entry.envelope.map(|_| mid.clone());
                };
                let m: Option<String> = client.hget(keys.task(id), DELIVERY).await.ok().flatten();
                m
            }))
            .await;
            let stray: Vec<&str> = page
                .iter()
                .zip(owners)
                .filter(|((mid, _), owner)| owner.as_deref() != Some(mid.as_str()))
                .map(|((mid, _), _)| mid.as_str())
                .collect();
            if !stray.is_empty() {
                // One key: the stream. A re-sent XDEL deletes nothing twice.
                let _: i64 = client.xdel(stream, stray).await.map_err(store)?;
            }
            if !full {
                return Ok(0);
            }
            start = next;
        }
    }
}

/// Cursors the listing property once failed on: each reached Redis and came back as a server
/// error instead of the caller's [`BrokerError::InvalidOption`].
#[cfg(test)]
mod regressions {
    use super::{stream_start, zset_cursor};
    use crate::BrokerError;

    #[test]
    fn stream_cursors_are_entry_ids() {
        assert_eq!(stream_start(None).ok().as_deref(), Some("-"));
        assert_eq!(stream_start(Some("5-1")).ok().as_deref(), Some("(5-1"));
        assert_eq!(stream_start(Some("7")).ok().as_deref(), Some("(7"));
        for bad in [
            "20000000000000000000",
            "18446744073709551615-18446744073709551615",
            "+5",
            "5-",
            "-1",
            "",
        ] {
            assert!(
                matches!(stream_start(Some(bad)), Err(BrokerError::InvalidOption(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn zset_cursor_refuses_nan() {
        assert_eq!(zset_cursor("nan:"), None);
        assert_eq!(zset_cursor("NaN:x"), None);
        assert_eq!(zset_cursor("inf:x"), Some((f64::INFINITY, "x")));
        assert_eq!(zset_cursor("1.5:a:b"), Some((1.5, "a:b")));
    }
}
