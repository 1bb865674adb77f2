use fred::bytes::Bytes;
use fred::prelude::*;

use super::lease::decode_envelope;
use super::protocol::{
    ATTEMPTS, CANCELLED_AT, CANCEL_REASON, DELIVERY, ENVELOPE, ERROR, FAILED_AT, PRIORITY, RETRIED,
    SNOOZES, STATE, TENANT, TENANT_LANE,
};
use super::record::{Entry, Record};
use super::scan::Entries;
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    now_ms, AttemptRow, BrokerError, DedupCounts, Inspect, LeaderInfo, LevelStats, Priority,
    QueueKeys, QueueName, QueueStats, Schedules, ServerRecord, TaskRecord, TaskState, GROUP,
};
use std::collections::HashMap;

/// Stream entries read per page when listing pending or active tasks.
const PAGE: u64 = 500;

impl Inspect for RedisBroker {
    async fn queues(&self) -> Result<Vec<QueueName>, BrokerError> {
        let names: Vec<String> = self
            .inner
            .client
            .smembers(self.inner.keys.queues())
            .await
            .map_err(store)?;
        let mut out: Vec<QueueName> = names
            .into_iter()
            .filter_map(|n| QueueName::new(n).ok())
            .collect();
        out.sort();
        Ok(out)
    }

    async fn queue_stats(&self, queue: &QueueName) -> Result<QueueStats, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut declared = vec![
            keys.stream(),
            keys.scheduled(),
            keys.retry(),
            keys.archived(),
            keys.completed(),
            keys.processed(),
            keys.failed(),
        ];
        declared.extend(keys.lanes());
        declared.extend(keys.tenants());
        let args: Vec<Value> = vec![GROUP.into()];
        let mut v = reply::array(self.run(|s| &s.stats, declared, args).await?, "stats")?;
        let rows = if v.len() > 8 { v.pop() } else { None };
        let n: Vec<u64> = v
            .iter()
            .map(|x| reply::int(x, "stats").map(|i| i.max(0) as u64))
            .collect::<Result<_, _>>()?;
        let mut levels = Vec::new();
        for row in rows
            .map(|r| reply::array(r, "stats"))
            .transpose()?
            .unwrap_or_default()
        {
            let cols: Vec<i64> = reply::array(row, "stats")?
                .iter()
                .map(|x| reply::int(x, "stats"))
                .collect::<Result<_, _>>()?;
            let col = |i: usize| cols.get(i).copied().unwrap_or(0);
            let Ok(priority) = u8::try_from(col(0))
                .map_err(|_| ())
                .and_then(|l| Priority::level(l).map_err(|_| ()))
            else {
                continue;
            };
            levels.push(LevelStats {
                priority,
                pending: (col(1) - col(2)).max(0) as u64,
                active: col(2).max(0) as u64,
                oldest_pending_ms: (col(3) >= 0).then_some(col(3) as u64),
            });
        }
        let get = |i: usize| n.get(i).copied().unwrap_or(0);
        // A second read in one round trip (the stats script's keys are fixed): the
        // deduplication counters and the cancelled set's size.
        let pipe = self.inner.client.pipeline();
        let _: () = pipe.hgetall(keys.deduplicated()).await.map_err(store)?;
        let _: () = pipe.zcard(keys.cancelled()).await.map_err(store)?;
        let (counts, cancelled): (HashMap<String, String>, u64) =
            pipe.all().await.map_err(store)?;
        let count = |m: &str| counts.get(m).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(QueueStats {
            pending: get(0).saturating_sub(get(1)),
            active: get(1),
            scheduled: get(2),
            retry: get(3),
            archived: get(4),
            completed: get(5),
            processed: get(6),
            failed: get(7),
            levels,
            deduplicated: DedupCounts {
                reject: count("reject"),
                throttle: count("throttle"),
                replace: count("replace"),
                debounce: count("debounce"),
            },
            cancelled,
        })
    }

    async fn task(&self, queue: &QueueName, id: &str) -> Result<Option<TaskRecord>, BrokerError> {
        let keys = self.queue_keys(queue);
        let Some(mut rec) = self.record(&keys, id, None).await? else {
            return Ok(None);
        };
        let history: Option<Bytes> = self
            .inner
            .client
            .hget(keys.task(id), ATTEMPTS)
            .await
            .map_err(store)?;
        rec.attempts = history
            .map(|h| AttemptRow::decode_all(&h))
            .unwrap_or_default();
        rec.progress = match self.read_progress(&keys, id).await {
            Ok(p) => p,
            // A damaged progress value must not hide its task from the inspector.
            Err(BrokerError::Decode(_)) => None,
            Err(e) => return Err(e),
        };
        Ok(Some(rec))
    }

    async fn list_tasks(
        &self,
        queue: &QueueName,
        state: TaskState,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, BrokerError> {
        let keys = self.queue_keys(queue);
        let zset = match state {
            TaskState::Scheduled => Some(keys.scheduled()),
            TaskState::Retry => Some(keys.retry()),
            TaskState::Archived => Some(keys.archived()),
            TaskState::Completed => Some(keys.completed()),
            TaskState::Cancelled => Some(keys.cancelled()),
            _ => None,
        };
        // Task ids, with the envelope of their stream entry when listed from the stream.
        let ids: Vec<(String, Option<Bytes>)> = match zset {
            Some(z) => {
                let stop = (offset + limit).saturating_sub(1) as i64;
                let ids: Vec<String> = self
                    .inner
                    .client
                    .zrange(z, offset as i64, stop, None, false, None, false)
                    .await
                    .map_err(store)?;
                ids.into_iter().map(|id| (id, None)).collect()
            }
            None => self.stream_ids(queue, state, offset, limit).await?,
        };
        let keys = &keys;
        let records = futures::future::join_all(
            ids.into_iter()
                .map(|(id, env)| async move { self.record(keys, &id, env).await }),
        )
        .await;
        let mut out = Vec::new();
        for r in records {
            if let Some(rec) = r? {
                if rec.state == state {
                    out.push(rec);
                }
            }
        }
        Ok(out)
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<(), BrokerError> {
        let key = self.inner.keys.paused();
        let _: i64 = if paused {
            self.inner
                .client
                .sadd(key, queue.as_str())
                .await
                .map_err(store)?
        } else {
            self.inner
                .client
                .srem(key, queue.as_str())
                .await
                .map_err(store)?
        };
        // After the write, so that a server woken by it reads the new set. A lost message
        // delays the change only until the servers' safety poll.
        self.signal_paused().await
    }

    async fn paused_queues(&self) -> Result<Vec<QueueName>, BrokerError> {
        let names: Vec<String> = self
            .inner
            .client
            .smembers(self.inner.keys.paused())
            .await
            .map_err(store)?;
        Ok(names
            .into_iter()
            .filter_map(|n| QueueName::new(n).ok())
            .collect())
    }

    async fn servers(&self) -> Result<Vec<ServerRecord>, BrokerError> {
        let keys = &self.inner.keys;
        let now = now_ms() as f64;
        // Drop ids whose records expired, so the index stays as small as the live fleet.
        let _: i64 = self
            .inner
            .client
            .zremrangebyscore(keys.servers(), f64::NEG_INFINITY, now)
            .await
            .map_err(store)?;
        let ids: Vec<String> = self
            .inner
            .client
            .zrange(keys.servers(), 0, -1, None, false, None, false)
            .await
            .map_err(store)?;
        let mut out = Vec::new();
        for id in ids {
            let raw: Option<Vec<u8>> = self
                .inner
                .client
                .get(keys.server(&id))
                .await
                .map_err(store)?;
            if let Some(Ok(rec)) = raw.map(|b| ServerRecord::decode(&b)) {
                out.push(rec);
            }
        }
        Ok(out)
    }

    async fn live_servers(&self) -> Result<Vec<String>, BrokerError> {
        // One read: the index scores each id with its record's expiry.
        let now = now_ms() as f64;
        self.inner
            .client
            .zrangebyscore(self.inner.keys.servers(), now, f64::INFINITY, false, None)
            .await
            .map_err(store)
    }

    async fn timings(
        &self,
        queue: &QueueName,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<crate::TimingMinute>, BrokerError> {
        self.read_timings(queue, from_ms, to_ms).await
    }

    async fn scheduler_leader(&self) -> Result<Option<LeaderInfo>, BrokerError> {
        Schedules::leader(self).await
    }
}

impl RedisBroker {
    /// One task as the inspector sees it, or None. A pending or active task's envelope is the
    /// `e` field of its stream entry (`entry_env` when the caller already read the entry, else
    /// the entry at the hash's `m`); any other task's envelope is the hash's `e`.
    async fn record(
        &self,
        keys: &QueueKeys,
        id: &str,
        mut entry_env: Option<Bytes>,
    ) -> Result<Option<TaskRecord>, BrokerError> {
        // The hash and the entry are two reads: a task that leaves the stream between them (its
        // envelope moves into the hash) is read again, a bounded number of times.
        let mut attempts = 0;
        loop {
            attempts += 1;
            const FIELDS: &[&str] = &[
                STATE,
                ENVELOPE,
                RETRIED,
                ERROR,
                FAILED_AT,
                DELIVERY,
                PRIORITY,
                TENANT,
                SNOOZES,
                CANCEL_REASON,
                CANCELLED_AT,
            ];
            let mut rec = Record::read(&self.inner.client, keys.task(id), FIELDS)
                .await
                .map_err(store)?;
            if !rec.exists() {
                let rec = self.plain_record(keys, id, entry_env.take()).await?;
                // A plain task that left its entry between the two reads has a hash now.
                if rec.is_none() && attempts < 3 && crate::keys::is_plain_id(id) {
                    continue;
                }
                return Ok(rec);
            }
            let state_name = reply::string(rec.take(STATE), "task")?;
            let state = TaskState::parse(&state_name)
                .ok_or_else(|| reply::bad("task", format!("unknown state {state_name:?}")))?;
            let hash_env = rec.take(ENVELOPE);
            let retried = rec.int(RETRIED);
            let err = rec.text(ERROR, "task")?;
            let failed = rec.int(FAILED_AT);
            let mid = rec.text(DELIVERY, "task")?;
            let snoozes = u32::try_from(rec.int(SNOOZES)).unwrap_or(0);
            let cancelled = rec.cancellation();
            let level = rec
                .text(PRIORITY, "task")?
                .and_then(|p| p.parse::<u8>().ok());
            let priority = level
                .and_then(|l| Priority::level(l).ok())
                .unwrap_or_default();
            // A tenant task's deliveries are in the tenant stream, whatever its level.
            let lane = if rec.text(TENANT, "task")?.is_some() {
                keys.lane(Some(TENANT_LANE))
            } else {
                keys.lane(level)
            };
            // Fetched by a worker, marked started or not: active (RedisBroker::held_in).
            let state = match mid.as_deref() {
                Some(m)
                    if state == TaskState::Pending
                        && self.held_in(&lane, m, m, 1).await?.contains(m) =>
                {
                    TaskState::Active
                }
                _ => state,
            };
            let env = if matches!(state, TaskState::Pending | TaskState::Active) {
                match (entry_env.take(), mid) {
                    (Some(e), _) => Value::Bytes(e),
                    (None, Some(mid)) => {
                        let env = self.entry_envelope(&lane, &mid).await?;
                        if env.is_null() && attempts < 3 {
                            continue;
                        }
                        env
                    }
                    (None, None) => Value::Null,
                }
            } else {
                hash_env
            };
            let envelope = decode_envelope(env).map(|mut e| {
                if e.id.is_empty() {
                    e.id = id.to_string();
                }
                e.retried = u32::try_from(retried).unwrap_or(u32::MAX);
                e.last_error = err;
                e.last_failed_at_ms = (failed > 0).then_some(failed);
                e
            });
            return Ok(Some(TaskRecord {
                id: id.to_string(),
                state,
                priority,
                snoozes,
                envelope,
                cancelled,
                progress: None,
                attempts: Vec::new(),
                state_time_ms: None,
            }));
        }
    }

    /// A plain task (no hash: its id is its entry's id) as the inspector sees it: pending, or
    /// active once a worker holds its delivery (its entry is in the group's pending list). None
    /// when `id` names no live plain task.
    async fn plain_record(
        &self,
        keys: &QueueKeys,
        id: &str,
        entry_env: Option<Bytes>,
    ) -> Result<Option<TaskRecord>, BrokerError> {
        if !crate::keys::is_plain_id(id) {
            return Ok(None);
        }
        let env = match entry_env {
            Some(e) => Value::Bytes(e),
            None => {
                let entries: Vec<(String, Vec<(String, Bytes)>)> = self
                    .inner
                    .client
                    .xrange(keys.stream(), id, id, Some(1))
                    .await
                    .map_err(store)?;
                let Some((_, fields)) = entries.first() else {
                    return Ok(None);
                };
                let entry = Entry::of(fields);
                if entry.task_id.is_some() {
                    return Ok(None);
                }
                match entry.envelope {
                    Some(e) => Value::Bytes(e.clone()),
                    None => return Ok(None),
                }
            }
        };
        let state = if self.plain_held(keys, id).await? {
            TaskState::Active
        } else {
            TaskState::Pending
        };
        let envelope = decode_envelope(env).map(|mut e| {
            e.id = id.to_string();
            e
        });
        Ok(Some(TaskRecord {
            id: id.to_string(),
            state,
            priority: Priority::NORMAL,
            snoozes: 0,
            envelope,
            cancelled: None,
            progress: None,
            attempts: Vec::new(),
            state_time_ms: None,
        }))
    }

    /// Pending or active while `id` names a live plain task, else None.
    pub(super) async fn plain_state(
        &self,
        keys: &QueueKeys,
        id: &str,
    ) -> Result<Option<TaskState>, BrokerError> {
        Ok(self.plain_record(keys, id, None).await?.map(|r| r.state))
    }

    /// Whether a worker holds plain task `id`'s delivery (started or not: see
    /// [`RedisBroker::held_in`]).
    async fn plain_held(&self, keys: &QueueKeys, id: &str) -> Result<bool, BrokerError> {
        Ok(self.held_in(&keys.stream(), id, id, 1).await?.contains(id))
    }

    /// The `e` field of one stream entry, or nil when the entry or the field is gone.
    async fn entry_envelope(&self, stream: &str, mid: &str) -> Result<Value, BrokerError> {
        let entries: Vec<(String, Vec<(String, Bytes)>)> = self
            .inner
            .client
            .xrange(stream, mid, mid, Some(1))
            .await
            .map_err(store)?;
        Ok(entries
            .iter()
            .find_map(|(_, fields)| Entry::of(fields).envelope.cloned())
            .map_or(Value::Null, Value::Bytes))
    }

    /// Task ids in the stream whose hash says `state` (pending or active), in stream order, each
    /// with the envelope its entry carries.
    async fn stream_ids(
        &self,
        queue: &QueueName,
        state: TaskState,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<(String, Option<Bytes>)>, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut seen = 0usize;
        let mut out = Vec::new();
        // The most urgent level's stream first, the order workers take them in.
        let lanes = self.lane_order(&keys).await?;
        let mut lanes = lanes.into_iter();
        let Some(mut level) = lanes.next() else {
            return Ok(out);
        };
        let mut start = "-".to_string();
        // Bounded: an inspector page never reads more than 20 pages of the streams.
        for _ in 0..20 {
            // Field values as bytes: the envelope is binary.
            let page: Vec<(String, Vec<(String, Bytes)>)> = self
                .inner
                .client
                .xrange(keys.lane(level), start.as_str(), "+", Some(PAGE))
                .await
                .map_err(store)?;
            let full = page.len() as u64 == PAGE;
            // The page's states in two round trips whatever its length: one pipelined HGET
            // for the entries that name their task, one XPENDING for what workers hold.
            let named: Vec<Option<&str>> = page
                .iter()
                .map(|(_, fields)| std::str::from_utf8(Entry::of(fields).task_id?).ok())
                .collect();
            let pipe = self.inner.client.pipeline();
            for id in named.iter().flatten() {
                let _: () = pipe.hget(keys.task(id), STATE).await.map_err(store)?;
            }
            let hashed: Vec<Value> = if named.iter().any(Option::is_some) {
                pipe.all().await.map_err(store)?
            } else {
                Vec::new()
            };
            let mut hashed = hashed.into_iter();
            // What workers hold is active, marked started or not (RedisBroker::held_in).
            let held = match (page.first(), page.last()) {
                (Some((first, _)), Some((last, _))) => {
                    self.held_in(&keys.lane(level), first, last, 2 * page.len() + 16)
                        .await?
                }
                _ => Default::default(),
            };
            for ((mid, fields), id) in page.iter().zip(&named) {
                let entry = Entry::of(fields);
                let (id, s) = match (id, entry.task_id) {
                    (Some(id), _) => {
                        let mut s =
                            reply::opt_string(hashed.next().unwrap_or(Value::Null), "hget")?;
                        if s.as_deref() == Some("pending") && held.contains(mid) {
                            s = Some("active".to_string());
                        }
                        (*id, s)
                    }
                    // An `i` that is not UTF-8 names no task we could read.
                    (None, Some(_)) => continue,
                    // A plain task's entry: no `i`, no hash; its id is the entry's.
                    (None, None) if entry.envelope.is_some() => {
                        let s = if held.contains(mid) {
                            "active"
                        } else {
                            "pending"
                        };
                        (mid.as_str(), Some(s.to_string()))
                    }
                    (None, None) => continue,
                };
                if s.as_deref() == Some(state.as_str()) {
                    if seen >= offset {
                        out.push((id.to_string(), entry.envelope.cloned()));
                        if out.len() >= limit {
                            return Ok(out);
                        }
                    }
                    seen += 1;
                }
            }
            // The next page starts after this one's last entry, whatever that entry was (a
            // foreign entry at the end of a page must not make the next page read it again).
            if let Some((last, _)) = page.last() {
                start = format!("({last}");
            }
            if !full {
                match lanes.next() {
                    Some(next) => {
                        level = next;
                        start = "-".to_string();
                    }
                    None => break,
                }
            }
        }
        Ok(out)
    }

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
}
