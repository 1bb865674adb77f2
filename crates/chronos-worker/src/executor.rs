//! Runs one task and settles its outcome: ack, retry, or dead letter.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos_broker::{now_ms, Completion, DeadOutcome, Lease, LeaseId, StartOutcome, TaskEnvelope};
use futures::FutureExt;
use tracing::{error, info_span, warn, Instrument, Span};

use crate::config::{DeadLetterEvent, TaskFailure, UnrunnablePolicy};
use crate::metrics::{self, Ended, KindMetrics};
use crate::mux::Unrunnable;
use crate::runtime::Runtime;
use crate::starter;
use crate::WorkerBroker;
use crate::{Context, FailureKind, TaskError};

/// How an attempt ended, before it is settled.
enum Outcome {
    /// With the handler's encoded result, if it returned one.
    Succeeded(Option<Vec<u8>>),
    Failed(TaskError),
    /// Dead-letter without running (deadline passed, unrunnable under the dead-letter policy).
    Dead(String),
    /// The lease was lost (reclaimed by the recoverer): someone else owns the task now.
    LeaseLost,
    /// Cancelled by a shutdown past its grace period: back to the queue, no attempt spent (the
    /// task did nothing wrong, and counting it could dead-letter a task on its last attempt).
    Requeue,
}

/// Attempts so far and allowed, from the task record (known even when the envelope does not
/// decode).
#[derive(Debug, Clone, Copy)]
struct Tries {
    retried: u32,
    max_retry: u32,
}

pub(crate) async fn run<B: WorkerBroker>(rt: &Runtime<B>, q: usize, mut lease: Lease) {
    let span = task_span(&lease);
    let m = metrics::task(
        lease.id.queue.as_str(),
        lease.envelope.as_ref().ok().map(|e| e.kind.as_str()),
    );
    async {
        let decoded = lease.envelope.as_ref().ok().map(|e| Tries {
            retried: e.retried,
            max_retry: e.max_retry,
        });
        let ended = Arc::new(AtomicBool::new(false));
        let tries = match decoded {
            // The entry told the attempt count and the envelope the rest: mark the start without
            // waiting for the reply, so starting costs no round trip.
            Some(tries) => {
                starter::request(rt, &lease.id, ended.clone());
                tries
            }
            // An envelope that does not decode: only the record knows its max retry.
            None => match start_with_retries(rt, &lease.id).await {
                Some(StartOutcome::Started(a)) => {
                    lease.id.unique_key = a.unique_key.clone();
                    if let Ok(env) = &mut lease.envelope {
                        env.retried = a.retried;
                        env.max_retry = a.max_retry;
                        env.last_error = a.last_error.clone();
                        env.last_failed_at_ms = a.last_failed_at_ms;
                    }
                    Tries {
                        retried: a.retried,
                        max_retry: a.max_retry,
                    }
                }
                Some(StartOutcome::Lost) => {
                    rt.release(q, &lease.id.msg_id);
                    warn!("delivery no longer current (task deleted or settled); not running it");
                    return;
                }
                Some(StartOutcome::Corrupt(reason)) => {
                    rt.release(q, &lease.id.msg_id);
                    rt.counters.failed.fetch_add(1, Ordering::Relaxed);
                    // The record's attempt count is unreadable; the envelope's is the best guess.
                    let attempt = lease
                        .envelope
                        .as_ref()
                        .map_or(1, |e| e.retried.saturating_add(1));
                    m.ended(Ended::DeadLettered);
                    report_failure(rt, &lease, attempt, &reason);
                    dead_letter(rt, &lease, &reason, false).await;
                    return;
                }
                None => {
                    // Whether the mark took effect is unknown (a reply that never came): put the
                    // delivery back unstarted, so that a lost worker is not charged an attempt for a
                    // run that never happened. If even that fails, the recoverer re-delivers it.
                    let back = rt
                        .broker
                        .requeue(&lease.id.queue, std::slice::from_ref(&lease.id))
                        .await;
                    rt.release(q, &lease.id.msg_id);
                    match back {
                        Ok(_) => warn!("could not mark the task started; returned it to its queue"),
                        Err(e) => warn!(error = %e, "could not mark the task started nor return it; the recoverer will re-deliver it"),
                    }
                    return;
                }
            },
        };
        // As i64: an OpenTelemetry exporter keeps it a number (a u64 would become text).
        Span::current().record("attempt", i64::from(tries.retried) + 1);
        rt.counters.running.fetch_add(1, Ordering::Relaxed);
        let outcome = attempt(rt, q, &lease, &m).await;
        ended.store(true, std::sync::atomic::Ordering::Release);
        rt.counters.running.fetch_sub(1, Ordering::Relaxed);
        rt.release(q, &lease.id.msg_id);
        settle(rt, &lease, tries, outcome, &m).await;
    }
    .instrument(span)
    .await
}

/// Marks the delivery started, trying again on a Redis error (the mark is idempotent) while the
/// lease stays held and refreshed. None when Redis did not answer in three tries.
async fn start_with_retries<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &LeaseId,
) -> Option<StartOutcome> {
    let mut delay = Duration::from_millis(100);
    for last in [false, false, true] {
        if let Some(outcome) = starter::start(rt, lease).await {
            return Some(outcome);
        }
        if !last {
            tokio::time::sleep(delay).await;
            delay *= 4;
        }
    }
    None
}

/// The span every attempt runs in. Its fields are the log's; with the `opentelemetry` feature
/// it is also exported as an OpenTelemetry consumer span named `process <queue>` with the
/// messaging attributes, linked (not parented) to the producer's trace context.
fn task_span(lease: &Lease) -> Span {
    let kind = lease
        .envelope
        .as_ref()
        .map(|e| e.kind.as_str())
        .unwrap_or("<undecodable>");
    #[cfg(not(feature = "opentelemetry"))]
    let span = info_span!(
        "task",
        task_id = %lease.id.task_id,
        queue = %lease.id.queue,
        kind,
        attempt = tracing::field::Empty,
    );
    #[cfg(feature = "opentelemetry")]
    let span = {
        let span = info_span!(
            "task",
            task_id = %lease.id.task_id,
            queue = %lease.id.queue,
            kind,
            attempt = tracing::field::Empty,
            otel.name = %format_args!("process {}", lease.id.queue),
            otel.kind = "consumer",
        );
        crate::trace::decorate(&span, lease);
        span
    };
    span
}

async fn attempt<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    m: &KindMetrics,
) -> Outcome {
    let env = match &lease.envelope {
        Ok(env) => env,
        Err(e) => return unrunnable(rt, format!("payload does not decode: {e}")),
    };
    let now = now_ms();
    if env.deadline_ms.is_some_and(|d| d <= now) {
        return Outcome::Dead("deadline exceeded before the task could run".into());
    }
    let start = match rt.mux.prepare(env) {
        Ok(start) => start,
        Err(Unrunnable::NoHandler(kind)) => {
            return unrunnable(rt, format!("no handler for kind {kind:?}"))
        }
        Err(Unrunnable::Decode(e)) => return unrunnable(rt, e.to_string()),
    };
    let limit = time_limit(env, now);
    let cancel = rt.hard_cancel.child_token();
    // The handler sees `signal`: it fires with `cancel`, and alone on an operator's cancel
    // (which must not abort the handler, so the select below watches `cancel` only).
    let signal = cancel.child_token();
    rt.mark_running(q, &lease.id.msg_id, cancel.clone(), signal.clone());
    let ctx = Context::for_attempt(env, limit.map(|d| Instant::now() + d), signal);
    let output = ctx.output_slot();
    // Catch a panic where it happens, so it becomes a retryable failure of this task only.
    let handler = AssertUnwindSafe(start(ctx)).catch_unwind();
    let timer = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let began = Instant::now();
    let outcome = tokio::select! {
        r = handler => match r {
            Ok(Ok(())) => Outcome::Succeeded(output.take()),
            Ok(Err(e)) => Outcome::Failed(e),
            Err(panic) => Outcome::Failed(TaskError::retry(format!("handler panicked: {}", panic_message(&panic)))),
        },
        _ = timer => Outcome::Failed(TaskError::retry(format!("timed out after {:?}", limit.unwrap_or_default()))),
        _ = cancel.cancelled() => {
            if rt.hard_cancel.is_cancelled() {
                Outcome::Requeue
            } else {
                Outcome::LeaseLost
            }
        }
    };
    m.ran(began.elapsed());
    cancel.cancel();
    outcome
}

/// The attempt's time limit: the earlier of its timeout and its deadline.
pub(crate) fn time_limit(env: &TaskEnvelope, now: i64) -> Option<Duration> {
    let timeout = env.timeout_ms.map(Duration::from_millis);
    let deadline = env
        .deadline_ms
        .map(|d| Duration::from_millis(u64::try_from(d.saturating_sub(now)).unwrap_or(0)));
    match (timeout, deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn unrunnable<B: WorkerBroker>(rt: &Runtime<B>, reason: String) -> Outcome {
    match rt.config.unrunnable {
        UnrunnablePolicy::DeadLetter => Outcome::Dead(reason),
        UnrunnablePolicy::Retry => Outcome::Failed(TaskError::retry(reason)),
    }
}

pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

async fn settle<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &Lease,
    tries: Tries,
    outcome: Outcome,
    m: &KindMetrics,
) {
    let env = lease.envelope.as_ref().ok();
    match outcome {
        Outcome::LeaseLost => {
            m.ended(Ended::LeaseLost);
            warn!("lease lost to the recoverer; this attempt's result is dropped")
        }
        Outcome::Requeue => {
            m.ended(Ended::Requeued);
            warn!("cancelled by shutdown; returning the task to its queue");
            if let Err(e) = rt
                .broker
                .requeue(&lease.id.queue, std::slice::from_ref(&lease.id))
                .await
            {
                error!(error = %e, "could not requeue; the recoverer will re-deliver the task");
            }
        }
        Outcome::Succeeded(output) => {
            rt.counters.succeeded.fetch_add(1, Ordering::Relaxed);
            m.ended(Ended::Succeeded);
            let retention = env.and_then(|e| e.retention_ms).map(Duration::from_millis);
            // The acker batches completions; if it is gone (shutdown finished), ack directly.
            let completion = Completion {
                lease: lease.id.clone(),
                // Only a retained task keeps its result: send none that would be dropped.
                result: retention.and(output),
                retention,
            };
            if let Err(back) = rt.acks.send(completion) {
                let c = back.0;
                if let Err(e) = rt
                    .broker
                    .complete(&c.lease.queue, std::slice::from_ref(&c))
                    .await
                {
                    error!(error = %e, "ack failed; the task will run again after recovery");
                }
            }
        }
        Outcome::Dead(reason) => {
            rt.counters.failed.fetch_add(1, Ordering::Relaxed);
            m.ended(Ended::DeadLettered);
            report_failure(rt, lease, tries.retried.saturating_add(1), &reason);
            dead_letter(rt, lease, &reason, false).await;
        }
        Outcome::Failed(err) => {
            rt.counters.failed.fetch_add(1, Ordering::Relaxed);
            report_failure(rt, lease, tries.retried.saturating_add(1), err.message());
            let retried = tries.retried.saturating_add(1);
            let max_retry = tries.max_retry;
            let delay = match err.kind() {
                FailureKind::SkipRetry => {
                    m.ended(Ended::DeadLettered);
                    return dead_letter(rt, lease, err.message(), true).await;
                }
                _ if retried > max_retry => {
                    m.ended(Ended::DeadLettered);
                    return dead_letter(rt, lease, err.message(), true).await;
                }
                FailureKind::RetryAfter(d) => d,
                _ => (rt.config.retry_delay)(retried, &err),
            };
            m.ended(Ended::Retried);
            if let Err(e) = rt.broker.retry(&lease.id, delay, err.message()).await {
                error!(error = %e, "could not schedule the retry; the recoverer will re-deliver the task");
            }
        }
    }
}

/// Reports a failed attempt. `attempt` comes from the task record (1 for the first), so it is
/// right even for a task whose envelope does not decode.
fn report_failure<B: WorkerBroker>(rt: &Runtime<B>, lease: &Lease, attempt: u32, message: &str) {
    warn!(error = message, "task failed");
    if let Some(hook) = &rt.config.on_error {
        let env = lease.envelope.as_ref().ok();
        hook(&TaskFailure {
            task_id: lease.id.task_id.clone(),
            queue: lease.id.queue.to_string(),
            kind: env.map(|e| e.kind.clone()).unwrap_or_default(),
            attempt,
            message: message.to_string(),
        });
    }
}

async fn dead_letter<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &Lease,
    reason: &str,
    count_attempt: bool,
) {
    match rt
        .broker
        .dead_letter(&lease.id, reason, count_attempt)
        .await
    {
        Ok(DeadOutcome::Stale) => {}
        Ok(outcome) => {
            let discarded = outcome == DeadOutcome::Discarded;
            notify_dead(
                rt,
                &lease.id,
                lease.envelope.as_ref().ok().cloned(),
                reason,
                discarded,
            )
            .await;
        }
        Err(e) => {
            error!(error = %e, "could not dead-letter; the recoverer will re-deliver the task")
        }
    }
}

/// Counts a dead task and awaits the server's hook, for at most its timeout.
pub(crate) async fn notify_dead<B: WorkerBroker>(
    rt: &Runtime<B>,
    id: &LeaseId,
    envelope: Option<TaskEnvelope>,
    reason: &str,
    discarded: bool,
) {
    rt.counters.dead.fetch_add(1, Ordering::Relaxed);
    metrics::dead_lettered(
        id.queue.as_str(),
        envelope.as_ref().map(|e| e.kind.as_str()),
        discarded,
    );
    warn!(task_id = %id.task_id, queue = %id.queue, reason, discarded, "task dead-lettered");
    if let Some(hook) = &rt.config.on_dead_letter {
        let event = DeadLetterEvent {
            task_id: id.task_id.clone(),
            queue: id.queue.to_string(),
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
