//! What a task carries: its model key and what its handler will do, attempt by attempt. The
//! generator decides it, the handler obeys it, and the model predicts from it, so the three can
//! never disagree about a task's behaviour.

use chronos::TaskArgs;
use serde::{Deserialize, Serialize};

/// The queues of a run. Each has a concern of its own, so that one feature's stall does not
/// hide another's.
pub(crate) mod queue {
    /// Plain, explicit-id, delayed, priority, LIFO, dedup, unique tasks; the events toggle.
    pub(crate) const PLAIN: &str = "tt-plain";
    /// Tenant tasks (weights, caps, backlog caps, pause and resume), some of them LIFO.
    pub(crate) const TENANT: &str = "tt-tenant";
    /// A queue with a cluster-wide concurrency limit, a rate and a per-key rate; keyed
    /// `rate_limited` signals.
    pub(crate) const LIMIT: &str = "tt-limit";
    /// Chains and groups.
    pub(crate) const FLOW: &str = "tt-flow";
    /// The runtime schedule's ticks.
    pub(crate) const TICK: &str = "tt-tick";
    /// A queue-wide `rate_limited` block and the operator's unblock.
    pub(crate) const BLOCK: &str = "tt-block";

    /// Every queue, with the weight the workers serve it with.
    pub(crate) const ALL: [(&str, u32); 6] = [
        (PLAIN, 3),
        (TENANT, 2),
        (LIMIT, 1),
        (FLOW, 1),
        (TICK, 1),
        (BLOCK, 1),
    ];
}

/// What a handler does on each attempt. Counted in attempts as the handler's `Context` reports
/// them (1 for the first), so a retried task knows where it is without any state of its own;
/// the two behaviours that do not spend an attempt (snooze, `rate_limited`) keep a marker file
/// per task so that they signal once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Act {
    /// Sleep, succeed.
    Ok { ms: u32 },
    /// Fail (retryably) on attempts `1..=times`, then succeed.
    Fail { times: u32, ms: u32 },
    /// Panic on attempts `1..=times`, then succeed.
    Panic { times: u32 },
    /// Outlive the task's timeout on attempts `1..=times` (sleeping `ms`), then succeed at once.
    Slow { times: u32, ms: u32 },
    /// Fail for good at once (`TaskError::skip_retry`).
    SkipRetry,
    /// Snooze once for `ms`, then succeed.
    Snooze { ms: u32 },
    /// Signal `rate_limited(ms)` once (its rate key, or its whole queue), then succeed.
    RateLimited { ms: u32, queue_wide: bool },
    /// End as cancelled by the handler itself (`TaskError::cancel`).
    Cancel,
    /// Run for `ms` watching the context: an operator's cancel ends it as cancelled.
    Long { ms: u32 },
    /// A group's callback: records the counts its context carries, succeeds.
    Callback,
}

impl Act {
    /// Attempts that fail before the one that succeeds (None: it never succeeds by failing
    /// out, see [`Act::ends`]).
    pub(crate) fn failures(self) -> u32 {
        match self {
            Act::Fail { times, .. } | Act::Panic { times } | Act::Slow { times, .. } => times,
            _ => 0,
        }
    }

    /// The error text a dead letter of this behaviour records (a part of it).
    pub(crate) fn dead_reason(self) -> &'static str {
        match self {
            Act::Fail { .. } => "torture fail",
            Act::Panic { .. } => "panicked",
            Act::Slow { .. } => "timed out",
            Act::SkipRetry => "torture skip",
            _ => "",
        }
    }
}

/// The task every generated enqueue sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    /// The model's key of this task: unique per enqueue call of the run (a replaced or
    /// debounced payload has a key of its own, so the journal says which payload ran).
    pub(crate) key: u64,
    /// Bumped by each operator edit of the payload: a start after the edit was acknowledged
    /// must carry the new one.
    pub(crate) gen: u32,
    pub(crate) act: Act,
}

impl TaskArgs for Job {
    const KIND: &'static str = "torture:job";
}

/// What the runtime schedule fires.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tick {}

impl TaskArgs for Tick {
    const KIND: &'static str = "torture:tick";
}

/// The journal's key for ticks (generated keys start at 1).
pub(crate) const TICK_KEY: u64 = 0;
