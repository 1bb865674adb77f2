//! Each queue's run times and queue waits, added up here per kind and minute and written by
//! the heartbeat (`heartbeat::flush_timings`): a task costs a lookup under a short lock, never a Redis command,
//! so tasks stay as cheap as before and the console still charts p50/p95/p99 per kind.

use std::collections::HashMap;
use std::sync::Mutex;

use chronos_core::TimingDelta;

/// Most kinds one queue counts apart; the rest count as `other`.
const MAX_KINDS: usize = 200;

const MINUTE: i64 = 60_000;

/// The counts of one queue not written yet.
#[derive(Debug, Default)]
pub(crate) struct Timings {
    by_kind: Mutex<HashMap<String, Vec<TimingDelta>>>,
}

impl Timings {
    /// Counts one attempt of `kind` that ended at `ended_ms` (unix ms), ran `run_ms` and had
    /// waited `wait_ms` before it started.
    pub(crate) fn record(&self, kind: &str, ended_ms: i64, run_ms: u64, wait_ms: u64) {
        let minute_ms = ended_ms - ended_ms.rem_euclid(MINUTE);
        let mut map = self.by_kind.lock().unwrap_or_else(|p| p.into_inner());
        let kind = if map.contains_key(kind) || map.len() < MAX_KINDS {
            kind
        } else {
            "other"
        };
        let deltas = match map.get_mut(kind) {
            Some(d) => d,
            None => map.entry(kind.to_string()).or_default(),
        };
        if deltas.last().is_none_or(|d| d.minute_ms != minute_ms) {
            deltas.push(TimingDelta {
                minute_ms,
                kind: kind.to_string(),
                ..TimingDelta::default()
            });
        }
        if let Some(d) = deltas.last_mut() {
            d.run.record(run_ms);
            d.wait.record(wait_ms);
        }
    }

    /// Everything counted since the last call.
    pub(crate) fn take(&self) -> Vec<TimingDelta> {
        let mut map = self.by_kind.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *map).into_values().flatten().collect()
    }
}

/// When a delivery's task became ready: the time part of its stream entry id (Redis' clock).
pub(crate) fn ready_ms(msg_id: &str) -> Option<i64> {
    msg_id.split('-').next()?.parse().ok()
}
