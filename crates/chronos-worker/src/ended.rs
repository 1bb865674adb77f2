//! What is recorded when an attempt ends and when a task is dead-lettered: the server's
//! counters, the metrics and the hooks, together in one call each, so that no outcome is
//! counted in one place and missed in another.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;

use chronos_core::{Lease, LeaseId, TaskEnvelope};
use futures::FutureExt;
use tracing::warn;

use crate::config::{DeadLetterEvent, TaskFailure};
use crate::metrics::{self, Ended, KindMetrics};
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// How an attempt ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AttemptEnd<'a> {
    /// The handler returned `Ok`.
    Succeeded,
    /// It failed and the task will be tried again.
    Retried(Failure<'a>),
    /// It failed for good, or the task could not run: it is dead-lettered.
    DeadLettered(Failure<'a>),
    /// The handler asked to run later (a snooze): no attempt spent, no error.
    Snoozed,
    /// The handler was rate limited: its key or queue is blocked and the task waits for the
    /// block's end; no attempt spent, no error.
    Throttled,
    /// The handler cancelled the task: it ended as cancelled, not failed.
    Cancelled,
    /// The lease was lost: someone else owns the task now.
    LeaseLost,
    /// Shutdown cancelled it: the task goes back to its queue, no attempt spent.
    Requeued,
}

/// A failed attempt, as the error hook is told it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure<'a> {
    /// From the task record (1 for the first), so it is right even for a task whose envelope
    /// does not decode.
    pub(crate) attempt: u32,
    /// The error, as recorded on the task.
    pub(crate) message: &'a str,
}

/// Records the end of an attempt of `lease`: the server's counters, the attempt's metrics `m`,
/// and for a failure the log line and the error hook.
pub(crate) fn attempt<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &Lease,
    m: &KindMetrics,
    end: AttemptEnd<'_>,
) {
    let c = &rt.counters;
    let (counter, ended, failure) = match end {
        AttemptEnd::Succeeded => (Some(&c.succeeded), Ended::Succeeded, None),
        AttemptEnd::Retried(f) => (Some(&c.failed), Ended::Retried, Some(f)),
        AttemptEnd::DeadLettered(f) => (Some(&c.failed), Ended::DeadLettered, Some(f)),
        AttemptEnd::Snoozed => (Some(&c.snoozed), Ended::Snoozed, None),
        AttemptEnd::Throttled => (Some(&c.throttled), Ended::Throttled, None),
        AttemptEnd::Cancelled => (Some(&c.cancelled), Ended::Cancelled, None),
        AttemptEnd::LeaseLost => (None, Ended::LeaseLost, None),
        AttemptEnd::Requeued => (None, Ended::Requeued, None),
    };
    if let Some(counter) = counter {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    m.ended(ended);
    if let Some(f) = failure {
        warn!(error = f.message, "task failed");
        if let Some(hook) = &rt.config.on_error {
            let env = lease.envelope.as_ref().ok();
            hook(&TaskFailure {
                task_id: lease.id.task_id.clone(),
                queue: lease.id.queue.to_string(),
                kind: env.map(|e| e.kind.clone()).unwrap_or_default(),
                attempt: f.attempt,
                message: f.message.to_string(),
            });
        }
    }
}

/// Records a task dead-lettered (by this server's executor or its recoverer): the server's
/// counter, the metric, the log line, and the dead-letter hook, awaited for at most its timeout.
pub(crate) async fn dead_lettered<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &LeaseId,
    envelope: Option<TaskEnvelope>,
    reason: &str,
    discarded: bool,
) {
    rt.counters.dead.fetch_add(1, Ordering::Relaxed);
    metrics::dead_lettered(
        lease.queue.as_str(),
        envelope.as_ref().map(|e| e.kind.as_str()),
        discarded,
    );
    warn!(task_id = %lease.task_id, queue = %lease.queue, reason, discarded, "task dead-lettered");
    if let Some(hook) = &rt.config.on_dead_letter {
        let event = DeadLetterEvent {
            task_id: lease.task_id.clone(),
            queue: lease.queue.to_string(),
            kind: envelope.as_ref().map(|e| e.kind.clone()),
            envelope,
            reason: reason.to_string(),
            discarded,
        };
        let limit = rt.config.dead_letter_hook_timeout;
        // A panicking hook must not take the worker's task (and its slot) down with it.
        let call = AssertUnwindSafe(async { hook(event).await }).catch_unwind();
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => warn!("the dead-letter hook panicked"),
            Err(_) => warn!(?limit, "the dead-letter hook timed out; it was dropped"),
        }
    }
}
