//! Shared pieces of the end-to-end tests and their helper binaries.
#![forbid(unsafe_code)]

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

/// The task a test scheduler fires every second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tick {
    /// Free text.
    pub note: String,
}

impl TaskArgs for Tick {
    const KIND: &'static str = "e2e:tick";
}
