//! Reading a state's tasks in order, by cursor: the listing behind
//! [`crate::Operate::list_page`] and the reader of the bulk actions. A cursor is a position, not a rank (an entry id, or a
//! sorted set's score and member), so it holds whatever an action did to the tasks before it.

use std::collections::{HashMap, HashSet};

use fred::bytes::Bytes;
use fred::prelude::*;

use super::actions::MAX_CHUNK;
use super::lease::decode_envelope;
use super::protocol::{
    CANCELLED_AT, CANCEL_REASON, ENVELOPE, ERROR, FAILED_AT, PRIORITY, RETRIED, SNOOZES, STATE,
    UNIQUE,
};
use super::record::{Entry, Record};
use super::{lane, reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    BrokerError, Cancellation, Priority, QueueKeys, QueueName, TaskFilter, TaskPage, TaskRecord,
    TaskState, GROUP,
};

/// Most tasks one listing call reads, per task asked for (and at least [`MIN_SCAN`]).
const SCAN_FACTOR: usize = 10;
const MIN_SCAN: usize = 1_000;

/// Stream entries as XRANGE returns them: id and fields (values as bytes: envelopes are
/// binary).
pub(super) type Entries = Vec<(String, Vec<(String, Bytes)>)>;

/// One task as a scan read it: enough to filter it, show it and act on it.
pub(super) struct Item {
    pub(super) id: String,
    /// Where it sits in its state's order: the cursor after it.
    cursor: String,
    /// The hash's fields `s`, `u`, `r`, `err`, `f`.
    state: Option<String>,
    pub(super) unique: Option<String>,
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
    pub(super) fn record(&self) -> Option<TaskRecord> {
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
pub(super) struct Chunk {
    /// Tasks now in the state, in order.
    pub(super) items: Vec<Item>,
    /// The cursor after the last position read (also past entries skipped for another state).
    pub(super) end: Option<String>,
    /// Fewer positions than asked for were left: the state is exhausted.
    pub(super) exhausted: bool,
    /// Positions read.
    read: u64,
}

/// What one read of a lane's positions found, before the tasks' hashes are read.
#[derive(Default)]
struct Positions {
    /// `(task id, cursor, envelope from the stream entry)`, in the state's order.
    listed: Vec<(String, String, Option<Bytes>)>,
    /// The sorted-set score of each task listed from one.
    scores: HashMap<String, i64>,
    /// Positions read.
    read: u64,
    /// Fewer positions than asked for were left.
    exhausted: bool,
    /// The cursor after the last position read.
    end: Option<String>,
}

/// The hash fields a scan reads, the envelope last: it is read only where it lives in the hash
/// (a task out of the stream) and a filter needs it.
const ITEM_FIELDS_AND_ENVELOPE: &[&str] = &[
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
];

impl RedisBroker {
    /// [`crate::Operate::list_page`]: chunks of the state read until the page is full, the state
    /// ends or the read budget is spent.
    pub(super) async fn task_page(
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

    /// Reads up to `n` positions of `state` after `cursor`, keeping the tasks that are in that
    /// state now. Costs one range read plus one hash read per task (sent together).
    ///
    /// Pending and active tasks are read stream by stream, the most urgent level first (the
    /// order a worker takes them in); their cursors are entry ids qualified by level as lease
    /// ids are (lane.rs), and the end of one level's stream is a cursor at the start of the
    /// next one's.
    pub(super) async fn scan(
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
        let Positions {
            listed,
            scores,
            read,
            exhausted,
            end,
        } = match state {
            TaskState::Pending => self.stream_positions(&stream, cursor, n).await?,
            TaskState::Active => self.delivered_positions(&stream, cursor, n).await?,
            _ => self.zset_positions(keys, state, cursor, n).await?,
        };
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
        let items = self
            .read_items(keys, state, listed, &scores, &held, need_env)
            .await?;
        Ok(Chunk {
            items,
            end,
            exhausted,
            read,
        })
    }

    /// The entries of `stream` after `cursor`: pending tasks, in the stream's order.
    async fn stream_positions(
        &self,
        stream: &str,
        cursor: Option<&str>,
        n: usize,
    ) -> Result<Positions, BrokerError> {
        let start = stream_start(cursor)?;
        let page: Entries = self
            .inner
            .client
            .xrange(stream, start.as_str(), "+", Some(n as u64))
            .await
            .map_err(store)?;
        let mut found = Positions {
            read: page.len() as u64,
            exhausted: page.len() < n,
            end: page.last().map(|(mid, _)| mid.clone()),
            ..Positions::default()
        };
        for (mid, fields) in page {
            let entry = Entry::of(&fields);
            if let Some(id) = entry.task(&mid) {
                found.listed.push((id, mid, entry.envelope.cloned()));
            }
        }
        Ok(found)
    }

    /// The delivered entries of `stream` after `cursor` (the group's pending entries list holds
    /// exactly those): active tasks, in the stream's order.
    async fn delivered_positions(
        &self,
        stream: &str,
        cursor: Option<&str>,
        n: usize,
    ) -> Result<Positions, BrokerError> {
        let client = &self.inner.client;
        let start = stream_start(cursor)?;
        let pel: Value = match client
            .xpending(stream, GROUP, (start.as_str(), "+", n as u64))
            .await
        {
            Ok(v) => v,
            Err(e) if e.details().contains("NOGROUP") => Value::Null,
            Err(e) => return Err(store(e)),
        };
        let rows = reply::array(pel, "xpending")?;
        let mut found = Positions {
            read: rows.len() as u64,
            exhausted: rows.len() < n,
            ..Positions::default()
        };
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
        found.end = mids.last().cloned();
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
                found.listed.push((id, mid, entry.envelope.cloned()));
            }
        }
        Ok(found)
    }

    /// The members of `state`'s sorted set after `cursor`, with their scores.
    async fn zset_positions(
        &self,
        keys: &QueueKeys,
        state: TaskState,
        cursor: Option<&str>,
        n: usize,
    ) -> Result<Positions, BrokerError> {
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
        let mut found = Positions {
            read: page.len() as u64,
            exhausted: page.len() < n,
            end: page.last().map(|(id, score)| format!("{score}:{id}")),
            ..Positions::default()
        };
        for (id, score) in page {
            let c = format!("{score}:{id}");
            if score.is_finite() {
                found.scores.insert(id.clone(), score as i64);
            }
            found.listed.push((id, c, None));
        }
        Ok(found)
    }

    /// The tasks at the positions `listed`, from their hashes (sent together), keeping those in
    /// `state` now. A stream's task that a worker holds (`held`: its entry id) is active, its
    /// start marked or not; a plain one (no hash) is pending or active by the same test.
    async fn read_items(
        &self,
        keys: &QueueKeys,
        state: TaskState,
        listed: Vec<(String, String, Option<Bytes>)>,
        scores: &HashMap<String, i64>,
        held: &HashSet<String>,
        need_env: bool,
    ) -> Result<Vec<Item>, BrokerError> {
        let zset = !matches!(state, TaskState::Pending | TaskState::Active);
        // The envelope only where it lives in the hash (out of the stream) and is wanted.
        let fields = if zset && need_env {
            ITEM_FIELDS_AND_ENVELOPE
        } else {
            &ITEM_FIELDS_AND_ENVELOPE[..ITEM_FIELDS_AND_ENVELOPE.len() - 1]
        };
        let client = &self.inner.client;
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
        Ok(items)
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
