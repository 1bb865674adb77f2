use serde::{Deserialize, Serialize};

use crate::{DecodeError, NewTask};

/// One trigger of a schedule, ready to be fired into its queue.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The schedule's id.
    pub schedule_id: String,
    /// The trigger time (unix ms); part of the dedup key `<schedule>:<trigger unix seconds>`.
    pub at_ms: i64,
    /// The task to enqueue. Its id should be deterministic (the scheduler uses
    /// `<schedule>:<trigger unix seconds>`), so that even the task is deduplicated.
    pub task: NewTask,
    /// Skip this trigger while the schedule's previous task is still pending or running.
    pub forbid_overlap: bool,
    /// The schedule's last task as the caller knows it (from [`FireState::last_task_id`] or
    /// an earlier fire). Only a hint for the overlap check: the fire call declares that task's
    /// key to Redis up front, and when the stored last task differs it looks the right one up
    /// and sends again, at the price of one more round trip.
    pub prev_task_id: Option<String>,
}

/// What firing one trigger did. A fire call whose reply was lost and that the client re-sent
/// answers the outcomes of its first run (and counts nothing again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireOutcome {
    /// The task was enqueued.
    Fired,
    /// Another leader (or an earlier call) already fired this trigger: nothing written.
    Duplicate,
    /// Skipped by the overlap policy; the trigger counts as handled.
    Overlap,
    /// Refused: the caller is no longer the leader (its epoch is older than the queue's fence).
    Stale,
    /// Never sent: the task cannot be stored (its payload is over the broker's limit). Permanent
    /// for this schedule's payload; the scheduler reports it and moves on.
    Invalid,
    /// Skipped: the task is unique and another task of the same kind and payload holds the
    /// lock. The trigger counts as handled (suppressed).
    Unique,
    /// Skipped: the task's deadline had passed when the trigger was fired (by Redis' clock).
    /// The trigger counts as handled (missed).
    Expired,
}

/// How many fires each schedule's history keeps ([`FireRecord`]): the newest ones.
pub const FIRES_KEPT: usize = 20;

/// One entry of a schedule's fire history ([`crate::Schedules::fire_history`]): a trigger that
/// was fired or skipped, or a run-now. Written by the script that fired it, in the same atomic
/// step; a trigger another leader had already fired ([`FireOutcome::Duplicate`]) and a refused
/// call ([`FireOutcome::Stale`]) write nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireRecord {
    /// The trigger time (unix ms); for a run-now, when it ran (Redis' clock).
    pub at_ms: i64,
    /// [`FireOutcome::Fired`], or why the trigger was skipped ([`FireOutcome::Overlap`],
    /// [`FireOutcome::Unique`], [`FireOutcome::Expired`]).
    pub outcome: FireOutcome,
    /// True for a task an operator ran now, outside the spec.
    pub run_now: bool,
    /// The task's id (for a skipped trigger, the id its task would have had).
    pub task_id: String,
}

/// What the fire state records for one schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FireState {
    /// The last trigger fired (unix ms); it only moves forward.
    pub last_fired_ms: Option<i64>,
    /// The id of the last task fired.
    pub last_task_id: Option<String>,
    /// When any instance first registered this schedule id (unix ms, Redis' clock): catch-up
    /// never reaches before it, so a new id (or one whose state was pruned) fires nothing from
    /// before it existed, and a trigger due during its first failover is still caught up.
    pub registered_ms: Option<i64>,
}

/// The current scheduler leader, as recorded when it took the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The leader instance's id.
    pub id: String,
    /// Its fencing epoch.
    pub epoch: u64,
    /// When it took the lock (unix ms).
    pub since_ms: i64,
}

/// A registered schedule as published for the inspector, CLI and console.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleEntry {
    /// Schedule id.
    pub id: String,
    /// Human-readable spec (`every 5s`, `0 0 * * *`).
    pub spec: String,
    /// IANA zone of a cron spec (`UTC` for intervals).
    pub zone: String,
    /// Queue the tasks go to.
    pub queue: String,
    /// Kind of the tasks.
    pub kind: String,
    /// Next trigger (unix ms). Publishers write an entry only when it changes, so the stored
    /// value can lie in the past; readers recompute it for intervals (from `every_ms`), and
    /// publishers rewrite a cron entry once its stored next run has passed.
    pub next_run_ms: Option<i64>,
    /// The period of an interval schedule (triggers at multiples of it since the unix epoch);
    /// None for cron.
    #[serde(default)]
    pub every_ms: Option<u64>,
    /// Last trigger fired (unix ms); filled in from the fire state when read.
    pub last_fired_ms: Option<i64>,
    /// Id of the last task fired; filled in when read.
    pub last_task_id: Option<String>,
    /// Instance that last wrote the entry.
    pub registered_by: String,
    /// When an instance that registers it last marked itself alive (unix ms, Redis' clock);
    /// filled in when read.
    pub last_seen_ms: i64,
    /// True when no instance that registers it marked itself alive recently; set when read.
    /// A runtime schedule is stale when no scheduler instance at all marked itself alive.
    #[serde(default)]
    pub stale: bool,
    /// Where it comes from: code (registered by running instances) or runtime (stored in
    /// Redis through the API or the CLI).
    #[serde(default)]
    pub source: ScheduleSource,
    /// True for a paused runtime schedule (it fires nothing until resumed).
    #[serde(default)]
    pub paused: bool,
}

impl ScheduleEntry {
    /// MessagePack with field names, so fields can be added compatibly.
    pub fn encode(&self) -> Result<Vec<u8>, rmp_serde::encode::Error> {
        rmp_serde::to_vec_named(self)
    }

    /// Decodes an entry; bad bytes give a [`DecodeError`], never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Malformed(e.to_string()))
    }
}

/// Scheduler counters, cluster-wide (the sum of every queue's counters, which the fire script
/// updates in the same atomic step as the triggers it counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerMetrics {
    /// Triggers enqueued.
    pub fired: u64,
    /// Triggers skipped by a misfire policy during catch-up.
    pub missed: u64,
    /// Triggers suppressed as duplicates or by the overlap policy.
    pub suppressed: u64,
}

/// Where a schedule in the registry comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleSource {
    /// Registered in code (`register_interval`, `register_cron`) by running instances.
    #[default]
    Code,
    /// Stored in Redis at run time (the API or `chronos schedule add`).
    Runtime,
}

impl ScheduleSource {
    /// `code` or `runtime`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleSource::Code => "code",
            ScheduleSource::Runtime => "runtime",
        }
    }
}
