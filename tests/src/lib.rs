//! Shared pieces of the end-to-end tests and their helper binaries.

pub mod failover;
pub mod procs;

use chronos::TaskArgs;
use serde::{Deserialize, Serialize};

/// A task that records each run in Redis (`<ns>:runs:<id>`) and then sleeps `sleep_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Work {
    /// How long the handler works.
    pub sleep_ms: u64,
}

impl TaskArgs for Work {
    const KIND: &'static str = "e2e:work";
}

/// The key counting runs of one task.
pub fn runs_key(ns: &str, task_id: &str) -> String {
    format!("{ns}:runs:{task_id}")
}

/// The counter of [`Work`] handlers running now in the test worker processes.
pub fn live_key(ns: &str) -> String {
    format!("{ns}:live")
}

/// A sorted set whose member `most` scores the most [`Work`] handlers ever running at once.
pub fn most_live_key(ns: &str) -> String {
    format!("{ns}:most-live")
}

/// The task a test scheduler fires every second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tick {
    /// Free text.
    pub note: String,
}

impl TaskArgs for Tick {
    const KIND: &'static str = "e2e:tick";
}

/// A chain step of the workflow crash tests: records each run (`runs_key`), waits while
/// `block` is set until the test creates `release_key`, then returns the previous step's result
/// times ten plus `n`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowStep {
    /// This step's digit.
    pub n: u64,
    /// Wait for the release key before finishing.
    pub block: bool,
}

impl TaskArgs for FlowStep {
    const KIND: &'static str = "e2e:flow-step";
}

/// A group member of the workflow crash tests: records each run (`runs_key`) and returns `n`,
/// or fails without retry when `n % 5 == 4`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    /// The member's number.
    pub n: u64,
}

impl TaskArgs for Member {
    const KIND: &'static str = "e2e:member";
}

/// A group callback of the workflow crash tests: counts its runs (`callback_runs_key`) and
/// writes the group's counts (`callback_counts_key`, `<succeeded>:<failed>`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Collect;

impl TaskArgs for Collect {
    const KIND: &'static str = "e2e:collect";
}

/// The key a blocked [`FlowStep`] waits for.
pub fn release_key(ns: &str, task_id: &str) -> String {
    format!("{ns}:release:{task_id}")
}

/// The key counting runs of the group callback.
pub fn callback_runs_key(ns: &str) -> String {
    format!("{ns}:callback-runs")
}

/// The key holding the counts the group callback saw.
pub fn callback_counts_key(ns: &str) -> String {
    format!("{ns}:callback-counts")
}

/// The key where the fault-injecting worker writes which task it died on.
pub fn killed_key(ns: &str) -> String {
    format!("{ns}:killed-on")
}
