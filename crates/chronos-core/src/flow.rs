//! Workflow data a task carries (its place in a chain or a group) and the [`Flows`] capability
//! that moves a workflow on: enqueue a chain's next step exactly once, count a group's members
//! and enqueue its callback exactly once (the callback then runs at least once, like any task).
//!
//! A plain task carries none of this (its envelope's `flow` is `None`, one nil byte) and no
//! worker calls any [`Flows`] method for it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{BrokerError, DeadLetter, QueueName, TaskState};

/// How long chain steps are kept after they completed when their options set no retention, so
/// that [`crate::Client::chain_status`] and the steps' results stay readable.
pub const DEFAULT_CHAIN_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How long a group's record and member results live: from its creation until the callback
/// fires, and again from then on (see [`crate::Group::ttl`]).
pub const DEFAULT_GROUP_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long the marker that a chain step's successor was enqueued lives. A step that succeeded
/// runs again only when its worker died before the ack (re-delivered after the recoverer's idle
/// time, or after its retries); a re-run later than this would enqueue the successor again.
pub const SUCCESSOR_MARKER_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Width of the counts text the group script writes into a callback's envelope: two 10-digit
/// numbers around a colon, so the script replaces bytes in place without re-encoding.
const COUNTS_LEN: usize = 21;
/// What the counts text holds until the callback fires.
pub const COUNTS_PLACEHOLDER: &str = "??????????:??????????";

/// A task's place in a workflow; `None` in a plain task's envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    /// Set on every step of a chain.
    pub chain: Option<ChainLink>,
    /// Set on every member of a group.
    pub member: Option<GroupLink>,
    /// The previous chain step's result (MessagePack); empty when it returned none or this is
    /// the first step.
    #[serde(with = "crate::bytes_field")]
    pub parent: Vec<u8>,
    /// Set on a group's callback.
    pub callback: Option<GroupCallback>,
}

/// One step of a chain: where it stands and what follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    /// The chain id; step `i` has task id `<id>:<i>`.
    pub id: String,
    /// This step's index, from 0.
    pub step: u32,
    /// Steps in the chain.
    pub total: u32,
    /// The steps after this one, in order.
    pub rest: Vec<StepSpec>,
}

/// A chain step not enqueued yet: what its producer chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSpec {
    /// Task kind.
    pub kind: String,
    /// Queue.
    pub queue: String,
    /// Encoded arguments.
    #[serde(with = "crate::bytes_field")]
    pub payload: Vec<u8>,
    /// Max retry.
    pub max_retry: u32,
    /// Per-attempt timeout (ms).
    pub timeout_ms: Option<u64>,
    /// Absolute deadline (unix ms).
    pub deadline_ms: Option<i64>,
    /// Retention (ms) once completed.
    pub retention_ms: Option<u64>,
    /// Dead-letter policy.
    pub dead_letter: DeadLetter,
    /// Delay (ms) from when the previous step succeeded.
    pub delay_ms: Option<i64>,
    /// Absolute run time (unix ms).
    pub run_at_ms: Option<i64>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// The rate key of the step's task ([`crate::EnqueueOptions::rate_key`]).
    #[serde(default)]
    pub rate_key: Option<String>,
}

/// A group member's link to its group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLink {
    /// The group id; member `i` has task id `<id>:<i>`.
    pub id: String,
    /// The callback's queue, which holds the group's record.
    pub queue: String,
    /// This member's index, from 0.
    pub index: u64,
    /// Whether the group keeps its members' results.
    pub collect: bool,
}

/// What a group's callback learns of its group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupCallback {
    /// The group id.
    pub id: String,
    /// Members in the group.
    pub total: u64,
    /// Whether the members' results were kept ([`crate::Client::group_results`]).
    pub collect: bool,
    /// `<succeeded>:<failed>`, each 10 digits, written by the script that fires the callback.
    /// Must stay the last field of [`Flow`] (see [`crate::Group`]).
    pub counts: String,
}

impl GroupCallback {
    /// Succeeded and failed members, once the callback fired (None in the stored template).
    pub fn counts(&self) -> Option<(u64, u64)> {
        let (ok, failed) = self.counts.split_once(':')?;
        Some((ok.parse().ok()?, failed.parse().ok()?))
    }
}

/// Where a chain step stands, as its handler sees it ([`Flow::chain`] without the rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPosition {
    /// The chain id.
    pub id: String,
    /// This step's index, from 0.
    pub step: u32,
    /// Steps in the chain.
    pub total: u32,
}

/// What a group's callback knows of the finished group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    /// The group id.
    pub id: String,
    /// The callback's queue (where [`crate::Client::group_results`] reads).
    pub queue: String,
    /// Members in the group.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members that were dead-lettered.
    pub failed: u64,
    /// Whether the members' results were kept.
    pub collected: bool,
}

impl GroupSummary {
    /// The group's [`GroupInfo`], to read its results with [`crate::Client::group_results`]
    /// from the callback. Fails only for a queue name that is not valid.
    pub fn info(&self) -> Result<GroupInfo, BrokerError> {
        Ok(GroupInfo {
            id: self.id.clone(),
            queue: QueueName::new(self.queue.as_str())?,
            callback_id: callback_task_id(&self.id),
            total: self.total,
        })
    }
}

/// The task id of step or member `index` of chain or group `id`.
pub fn flow_task_id(id: &str, index: u64) -> String {
    format!("{id}:{index}")
}

/// The task id of group `id`'s callback.
pub fn callback_task_id(id: &str) -> String {
    format!("{id}:cb")
}

/// What creating a group did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCreated {
    /// Created now.
    Created,
    /// A group of this id with the same definition exists (a producer's retry): unchanged.
    Exists,
}

/// One member's outcome, reported to its group before the member is acknowledged or
/// dead-lettered.
#[derive(Debug, Clone)]
pub struct MemberReport {
    /// The callback's queue (where the record lives).
    pub queue: QueueName,
    /// The group id.
    pub group: String,
    /// The member's index.
    pub index: u64,
    /// Succeeded (true) or dead-lettered (false).
    pub succeeded: bool,
    /// The member's result when it succeeded and the group collects, or the error when it
    /// failed.
    pub value: Vec<u8>,
}

/// What a member report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberOutcome {
    /// Counted now; `fired` when it was the last and the callback was enqueued by this call.
    Counted {
        /// The callback was enqueued.
        fired: bool,
    },
    /// This member was already counted (it ran twice, or the call was re-sent): nothing changed.
    Already,
    /// No such group (never created, or expired): nothing written.
    UnknownGroup,
}

/// A group's record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    /// Members in the group.
    pub total: u64,
    /// Members that succeeded so far.
    pub succeeded: u64,
    /// Members dead-lettered so far.
    pub failed: u64,
    /// Whether the callback was enqueued.
    pub fired: bool,
    /// The callback's task id.
    pub callback_id: String,
}

/// One member's outcome as kept by its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberResult {
    /// The member's index.
    pub index: u64,
    /// `Ok(result bytes, empty when none or not collected)` or `Err(error message)`.
    pub outcome: Result<Vec<u8>, String>,
}

/// One page of a group's member results.
#[derive(Debug, Clone, Default)]
pub struct MemberPage {
    /// The members of this page, in no particular order (Redis `HSCAN`).
    pub members: Vec<MemberResult>,
    /// Where the next page starts, or None at the end. A member may appear on two pages (HSCAN
    /// may repeat one while the hash grows).
    pub next: Option<u64>,
}

/// Where a chain stands, computed from its steps' records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainStatus {
    /// Step `step` is waiting or running (`state` says which).
    Running {
        /// The current step.
        step: u32,
        /// Its state.
        state: TaskState,
    },
    /// Every step succeeded; the last one's result (MessagePack, None when it returned none).
    Succeeded {
        /// The last step's result.
        result: Option<Vec<u8>>,
    },
    /// Step `step` was dead-lettered: the chain stopped there.
    Failed {
        /// The step that failed.
        step: u32,
        /// Its last error.
        error: String,
    },
    /// The records are gone (expired past their retention, deleted, or a dead-lettered step
    /// that was discarded), or the chain never existed.
    Unknown,
}

/// The steps of an enqueued chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainInfo {
    /// The chain id.
    pub id: String,
    /// Each step's queue and task id, in order.
    pub steps: Vec<(QueueName, String)>,
}

/// An enqueued group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group id.
    pub id: String,
    /// The callback's queue (the record's home).
    pub queue: QueueName,
    /// The callback's task id (`<id>:cb`).
    pub callback_id: String,
    /// Members in the group.
    pub total: u64,
}

/// Where the counts text starts in a group callback's encoded envelope, so the firing script
/// can overwrite it in place: the last occurrence of the placeholder (the counts are the
/// last field of the flow, after the payload and headers).
pub fn counts_offset(bytes: &[u8]) -> Option<usize> {
    let needle = COUNTS_PLACEHOLDER.as_bytes();
    debug_assert_eq!(needle.len(), COUNTS_LEN);
    bytes.windows(needle.len()).rposition(|w| w == needle)
}
