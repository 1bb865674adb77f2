//! The books: what every scenario checks once its faults are over.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::HashesInterface;
use chronos::prelude::*;
use chronos::{Clock as _, QueueName, QueueStats, Schedules, TaskState, TRIGGER_HEADER};

use crate::procs::{runs_key, TICK_QUEUE, WORK_QUEUE};

/// What the runs hash and the queue say about a set of tasks.
#[derive(Debug, Default)]
pub(crate) struct TaskBooks {
    /// Ids expected that never ran to completion.
    pub(crate) lost: Vec<String>,
    /// Runs beyond the first, summed over tasks.
    pub(crate) duplicated: u64,
    /// Runs of ids nobody enqueued (must be none).
    pub(crate) unknown: u64,
    /// The queue's counts at the end.
    pub(crate) stats: QueueStats,
}

impl TaskBooks {
    /// The promises these books break, given how many duplicates the faults allow and how
    /// many lost tasks (none but where a setting says it may lose acknowledged writes).
    pub(crate) fn broken(&self, dup_bound: u64, lost_allowed: u64) -> Vec<String> {
        let mut out = Vec::new();
        if self.lost.len() as u64 > lost_allowed {
            let some: Vec<&String> = self.lost.iter().take(5).collect();
            out.push(format!(
                "{} tasks lost (allowed {lost_allowed}), e.g. {some:?}",
                self.lost.len()
            ));
        }
        if self.duplicated > dup_bound {
            out.push(format!(
                "{} duplicate runs, more than the {dup_bound} tasks in flight at the faults",
                self.duplicated
            ));
        }
        if self.unknown > 0 {
            out.push(format!("{} runs of tasks never enqueued", self.unknown));
        }
        let s = &self.stats;
        if (s.pending, s.active, s.scheduled, s.retry, s.archived) != (0, 0, 0, 0, 0) {
            out.push(format!(
                "left behind: pending {} active {} scheduled {} retry {} archived {}",
                s.pending, s.active, s.scheduled, s.retry, s.archived
            ));
        }
        out
    }
}

/// Counts of the work queue.
pub(crate) async fn work_stats(broker: &RedisBroker) -> Result<QueueStats> {
    Ok(broker.queue_stats(&QueueName::new(WORK_QUEUE)?).await?)
}

/// Waits until nothing is pending, running, delayed or waiting for a retry in the work queue,
/// polling for up to `within`; returns when that was first seen.
pub(crate) async fn wait_drained(broker: &RedisBroker, within: Duration) -> Result<Instant> {
    let start = Instant::now();
    loop {
        if let Ok(s) = work_stats(broker).await {
            if s.pending + s.active + s.scheduled + s.retry == 0 {
                return Ok(Instant::now());
            }
        }
        if start.elapsed() > within {
            // The books say what is left; the caller reports it.
            return Ok(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many runs each task had, by the runs hash.
pub(crate) async fn runs(broker: &RedisBroker, ns: &str) -> Result<HashMap<String, u64>> {
    let fields: Vec<String> = broker
        .client()
        .hkeys(runs_key(ns))
        .await
        .context("read the runs hash")?;
    let mut out: HashMap<String, u64> = HashMap::with_capacity(fields.len());
    for f in fields {
        let id = f.rsplit_once('/').map(|(id, _)| id).unwrap_or(&f);
        *out.entry(id.to_string()).or_default() += 1;
    }
    Ok(out)
}

/// The books of the tasks `expected`, once the queue has drained.
pub(crate) async fn tasks(
    broker: &RedisBroker,
    ns: &str,
    expected: &[String],
) -> Result<TaskBooks> {
    let runs = runs(broker, ns).await?;
    let want: HashSet<&str> = expected.iter().map(String::as_str).collect();
    let mut books = TaskBooks {
        stats: work_stats(broker).await?,
        ..TaskBooks::default()
    };
    for id in expected {
        match runs.get(id) {
            None => books.lost.push(id.clone()),
            Some(n) => books.duplicated += n.saturating_sub(1),
        }
    }
    books.unknown = runs
        .iter()
        .filter(|(id, _)| !want.contains(id.as_str()))
        .map(|(_, n)| n)
        .sum();
    Ok(books)
}

/// What the tick queue says about trigger seconds.
#[derive(Debug, Default)]
pub(crate) struct TriggerBooks {
    /// Seconds of the window with no enqueued trigger.
    pub(crate) missing: Vec<i64>,
    /// Enqueues beyond one per trigger second (by header, by stream entries, by the fire
    /// counter, whichever shows most).
    pub(crate) duplicated: u64,
    /// Trigger seconds found in all.
    pub(crate) triggers: u64,
    /// The window checked, unix seconds, inclusive.
    pub(crate) window: (i64, i64),
}

impl TriggerBooks {
    /// The promises these books break.
    pub(crate) fn broken(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.missing.is_empty() {
            out.push(format!(
                "{} trigger seconds of the window {:?} never enqueued: {:?}",
                self.missing.len(),
                self.window,
                self.missing
            ));
        }
        if self.duplicated > 0 {
            out.push(format!(
                "{} trigger seconds enqueued twice",
                self.duplicated
            ));
        }
        if self.window.1 - self.window.0 < 5 {
            out.push(format!(
                "window {:?} too short to mean anything",
                self.window
            ));
        }
        out
    }
}

/// Every trigger second in `window` (unix seconds, inclusive) must have been enqueued once,
/// and no trigger second (in the window or not) twice. Reads the trigger time each task carries
/// in [`TRIGGER_HEADER`].
pub(crate) async fn triggers(broker: &RedisBroker, window: (i64, i64)) -> Result<TriggerBooks> {
    let q = QueueName::new(TICK_QUEUE)?;
    let per_sec = trigger_counts(broker).await?;
    let by_header: u64 = per_sec.values().map(|n| n - 1).sum();
    let entries = broker.queue_stats(&q).await?.pending;
    let fired = broker.scheduler_metrics().await?.fired;
    let distinct = per_sec.len() as u64;
    Ok(TriggerBooks {
        missing: (window.0..=window.1)
            .filter(|s| !per_sec.contains_key(s))
            .collect(),
        duplicated: by_header
            .max(entries.saturating_sub(distinct))
            .max(fired.saturating_sub(distinct)),
        triggers: distinct,
        window,
    })
}

/// How many enqueued ticks carry each trigger second (by [`TRIGGER_HEADER`]).
pub(crate) async fn trigger_counts(broker: &RedisBroker) -> Result<BTreeMap<i64, u64>> {
    let q = QueueName::new(TICK_QUEUE)?;
    let tasks = broker
        .list_tasks(&q, TaskState::Pending, 0, 1_000_000)
        .await?;
    let mut per_sec: BTreeMap<i64, u64> = BTreeMap::new();
    for t in &tasks {
        let env = t
            .envelope
            .as_ref()
            .map_err(|e| anyhow::anyhow!("tick {} does not decode: {e}", t.id))?;
        let ms: i64 = env
            .headers
            .get(TRIGGER_HEADER)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("tick {} has no {TRIGGER_HEADER}", t.id))?;
        *per_sec.entry(ms.div_euclid(1000)).or_default() += 1;
    }
    Ok(per_sec)
}

/// Now, in unix seconds by this machine's clock.
pub(crate) fn now_secs() -> i64 {
    chronos::SystemClock.now_ms().div_euclid(1000)
}
