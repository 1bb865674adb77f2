//! A schedule stored in Redis (added at run time through the API or the CLI), as opposed to
//! one registered in code. The broker stores and versions it; the scheduler validates it
//! before it is written and fires it like a schedule registered in code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{DecodeError, ScheduleEntry, ScheduleSource};

/// When a stored schedule fires: an interval aligned to the unix epoch, or a cron expression
/// in an IANA zone. Validated by the scheduler before it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum DefSpec {
    /// Every `every_ms` milliseconds (at least 1000).
    Every {
        /// The period in milliseconds.
        every_ms: u64,
    },
    /// A cron expression evaluated in `zone`.
    Cron {
        /// The expression (5 or 6 fields, or an `@daily`-style alias).
        expr: String,
        /// The IANA zone (`UTC`, `Europe/Berlin`).
        zone: String,
    },
}

/// What a leader does with triggers missed while no leader ran (the scheduler's
/// `MisfirePolicy`, in stored form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum DefMisfire {
    /// Fire at most `max` missed triggers of the last `window_ms`.
    FireAll {
        /// How far back a missed trigger may lie, in milliseconds.
        window_ms: u64,
        /// The most missed triggers fired in one catch-up.
        max: u32,
    },
    /// Fire only the latest missed trigger.
    FireLatest,
    /// Fire no missed trigger.
    Skip,
}

/// A stored (runtime) schedule: what to enqueue, when, and with which options.
///
/// Encoded as MessagePack with field names, so later versions can add fields (with serde
/// defaults) and still read what earlier ones wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDef {
    /// The schedule id: names its fire state, dedup keys and task ids.
    pub id: String,
    /// The queue its tasks go to.
    pub queue: String,
    /// The task kind.
    pub kind: String,
    /// The task payload (MessagePack, as [`crate::encode_args`] writes it).
    pub payload: Vec<u8>,
    /// When it fires.
    pub spec: DefSpec,
    /// The spec as the scheduler describes it (`every 5s`, `0 3 * * * (UTC)`), for listings.
    #[serde(default)]
    pub describe: String,
    /// Retries of each task (None: the default, 25).
    #[serde(default)]
    pub max_retry: Option<u32>,
    /// Per-attempt timeout of each task, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Unique lock TTL of each task, in milliseconds.
    #[serde(default)]
    pub unique_ms: Option<u64>,
    /// Retention of each completed task, in milliseconds.
    #[serde(default)]
    pub retention_ms: Option<u64>,
    /// Each task must run within this many milliseconds of its trigger.
    #[serde(default)]
    pub deadline_after_ms: Option<u64>,
    /// Drop instead of archive when retries are exhausted.
    #[serde(default)]
    pub discard_on_dead_letter: bool,
    /// Headers of every task.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The misfire policy (None: the scheduler's default).
    #[serde(default)]
    pub misfire: Option<DefMisfire>,
    /// Skip a trigger while the previous task of the schedule is unfinished.
    #[serde(default)]
    pub forbid_overlap: bool,
    /// A paused schedule fires nothing (and catches nothing up when resumed).
    #[serde(default)]
    pub paused: bool,
    /// When it was added (unix ms, the caller's clock).
    #[serde(default)]
    pub created_ms: i64,
    /// When it was last changed (unix ms, the caller's clock).
    #[serde(default)]
    pub updated_ms: i64,
    /// Since when it is active (added or resumed; unix ms, the caller's clock): a leader never
    /// catches up on triggers before it.
    #[serde(default)]
    pub active_since_ms: i64,
    /// The deduplication of each task ([`crate::EnqueueOptions::dedup`]); when set, it holds
    /// the lock's TTL and `unique_ms` is None. Absent in definitions written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DefDedup>,
}

/// A stored schedule's deduplication: what [`crate::Dedup`] a fired task carries. A schedule
/// deduplicates by rejecting or throttling (a fired trigger is enqueued once or skipped, never
/// merged into a waiting task).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefDedup {
    /// The caller's key; None: the task's kind and payload.
    #[serde(default)]
    pub key: Option<String>,
    /// True for [`crate::DedupMode::Throttle`] (its window is `ttl_ms`), false for
    /// [`crate::DedupMode::Reject`].
    #[serde(default)]
    pub throttle: bool,
    /// The lock's TTL (a throttle's window), in milliseconds.
    pub ttl_ms: u64,
    /// When the lock is let go (ignored for a throttle, which lasts its window).
    pub release: DefRelease,
}

/// [`crate::Release`] as a stored schedule spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefRelease {
    /// When the task starts.
    OnStart,
    /// When the task ends.
    OnFinish,
    /// Only when the TTL runs out.
    AtExpiry,
}

impl DefDedup {
    /// The definition of `dedup`; None for a mode a schedule does not take (replace,
    /// debounce: a trigger is never merged into a waiting task).
    pub fn of(dedup: &crate::Dedup) -> Option<Self> {
        use crate::{DedupMode, Release};
        let throttle = match dedup.dedup_mode() {
            DedupMode::Reject => false,
            DedupMode::Throttle { .. } => true,
            _ => return None,
        };
        Some(Self {
            key: dedup.caller_key().map(str::to_string),
            throttle,
            ttl_ms: u64::try_from(dedup.lock_ttl().as_millis()).unwrap_or(u64::MAX),
            release: match dedup.release_point() {
                Release::OnStart => DefRelease::OnStart,
                Release::AtExpiry => DefRelease::AtExpiry,
                _ => DefRelease::OnFinish,
            },
        })
    }

    /// The [`crate::Dedup`] this definition stands for.
    pub fn dedup(&self) -> crate::Dedup {
        use crate::{Dedup, DedupMode, Release};
        let ttl = std::time::Duration::from_millis(self.ttl_ms);
        let d = match &self.key {
            Some(k) => Dedup::key(k.clone()),
            None => Dedup::payload(),
        };
        if self.throttle {
            return d.mode(DedupMode::Throttle { window: ttl });
        }
        d.ttl(ttl).release(match self.release {
            DefRelease::OnStart => Release::OnStart,
            DefRelease::OnFinish => Release::OnFinish,
            DefRelease::AtExpiry => Release::AtExpiry,
        })
    }
}

impl ScheduleDef {
    /// The registry entry listings show for it: source runtime, its paused flag, the next run
    /// of an interval (a cron's is left to the scheduler crate, which can evaluate it), and
    /// liveness as the caller knows it.
    pub fn entry(&self, now_ms: i64, last_seen_ms: i64, stale: bool) -> ScheduleEntry {
        let (zone, every_ms) = match &self.spec {
            DefSpec::Every { every_ms } => ("UTC".to_string(), Some(*every_ms)),
            DefSpec::Cron { zone, .. } => (zone.clone(), None),
        };
        let next_run_ms = match every_ms.filter(|&m| m > 0 && !self.paused) {
            Some(every) => {
                let every = i64::try_from(every).unwrap_or(i64::MAX);
                Some(
                    now_ms
                        .div_euclid(every)
                        .saturating_add(1)
                        .saturating_mul(every),
                )
            }
            None => None,
        };
        ScheduleEntry {
            id: self.id.clone(),
            spec: self.describe.clone(),
            zone,
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            next_run_ms,
            every_ms,
            last_fired_ms: None,
            last_task_id: None,
            registered_by: "runtime".into(),
            last_seen_ms,
            stale,
            source: ScheduleSource::Runtime,
            paused: self.paused,
        }
    }

    /// MessagePack with field names.
    pub fn encode(&self) -> Result<Vec<u8>, rmp_serde::encode::Error> {
        rmp_serde::to_vec_named(self)
    }

    /// Decodes a stored definition; bad bytes give a [`DecodeError`], never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Malformed(e.to_string()))
    }

    /// True when both define the same schedule, whatever their timestamps: an add re-sent by
    /// a user (a second `chronos schedule add` with the same arguments) is then a no-op.
    pub fn same_as(&self, other: &ScheduleDef) -> bool {
        let strip = |d: &ScheduleDef| ScheduleDef {
            created_ms: 0,
            updated_ms: 0,
            active_since_ms: 0,
            ..d.clone()
        };
        strip(self) == strip(other)
    }
}

/// A stored definition with the exact bytes it was read from: the compare-and-set of
/// [`crate::ManageSchedules::put_schedule_def`] compares those bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDef {
    /// The definition.
    pub def: ScheduleDef,
    /// Its stored bytes.
    pub raw: Vec<u8>,
}

/// What a compare-and-set of a stored definition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PutOutcome {
    /// Written (or deleted), and the revision bumped.
    Written,
    /// The store already held the new value (a re-sent call, or a change to the same value):
    /// nothing written, the revision not bumped.
    Unchanged,
    /// The stored value was not the expected one (a concurrent change): nothing written. Read
    /// again and retry.
    Conflict,
    /// A schedule registered in code uses this id: nothing written.
    CodeOwned,
}
