//! Runs one task and settles its outcome: ack, retry, or dead letter.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos_core::{
    now_ms, BackoffOutcome, BackoffScope, CancelOutcome, Completion, DeadOutcome, Lease, LeaseId,
    SnoozeOutcome, StartOutcome, TaskEnvelope,
};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, info_span, warn, Instrument, Span};

use crate::backoff::Backoff;
use crate::config::UnrunnablePolicy;
use crate::ended::{self, End, Failure};
use crate::metrics::{self, KindMetrics};
use crate::mux::Unrunnable;
use crate::runtime::Runtime;
use crate::starter;
use crate::WorkerBroker;
use crate::{logs, progress, progress_writer};
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

/// A delivery that waited in the buffer longer than this is confirmed (its start mark awaited)
/// before its handler runs, so a task made stale meanwhile (an operator's edit, a forced queue
/// delete) does not run. One fetched moments ago starts at once, its mark sent behind it: the
/// change and the start are then concurrent, and a `Lost` answer cancels the handler. (An
/// operator's delete or archive refuses a task a worker holds, marked or not.)
pub(crate) const CONFIRM_AFTER: Duration = Duration::from_millis(50);

/// Runs one delivery taken from the buffer after it waited there for `waited`.
pub(crate) async fn run<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    mut lease: Lease,
    waited: Duration,
) {
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
        let cancel = rt.hard_cancel.child_token();
        let tries = match decoded {
            // The entry told the attempt count and the envelope the rest: mark the start without
            // waiting for the reply, so starting costs no round trip.
            Some(tries) if waited < CONFIRM_AFTER => {
                starter::request(rt, &lease.id, ended.clone(), cancel.clone());
                tries
            }
            // It waited in the buffer: confirm that it is still current. The envelope's counts
            // stand (a plain task's row carries no max retry of its own).
            Some(tries) => match confirm(rt, q, &lease, &m).await {
                Some(_) => tries,
                None => return,
            },
            // An envelope that does not decode: only the record knows its max retry.
            None => match confirm(rt, q, &lease, &m).await {
                Some(a) => {
                    lease.id.unique_key = a.unique_key.clone();
                    Tries {
                        retried: a.retried,
                        max_retry: a.max_retry,
                    }
                }
                None => return,
            },
        };
        // As i64: an OpenTelemetry exporter keeps it a number (a u64 would become text).
        Span::current().record("attempt", i64::from(tries.retried) + 1);
        rt.counters.running.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let began_ms = now_ms();
        // One allocation per attempt: its progress and its log lines.
        let cell = Arc::new(progress::Cell::new(&rt.config.task_logs));
        let outcome = attempt(rt, q, &lease, &m, cancel, &cell).await;
        // For the task's attempt history: the settling script records how long it ran and
        // what it logged.
        let ran_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        lease.id.ran_ms = Some(ran_ms);
        let waited_ms = crate::timing::ready_ms(&lease.id.msg_id)
            .map_or(0, |ready| u64::try_from(began_ms - ready).unwrap_or(0));
        rt.queues[q].timings.record(
            lease
                .envelope
                .as_ref()
                .map_or("unknown", |e| e.kind.as_str()),
            began_ms.saturating_add(i64::try_from(ran_ms).unwrap_or(0)),
            ran_ms,
            waited_ms,
        );
        lease.id.logs = cell.lines.take(rt.config.task_logs.redact.as_ref());
        ended.store(true, std::sync::atomic::Ordering::Release);
        rt.counters.running.fetch_sub(1, Ordering::Relaxed);
        // The lease stays held (the heartbeat keeps it) until the outcome is settled, so a
        // settlement slowed by a failover is not taken for a lost worker.
        if settle(rt, q, &lease, tries, outcome, &m).await {
            rt.release(q, &lease.id.msg_id);
        }
    }
    .instrument(span)
    .await
}

/// Marks the delivery started and waits for the answer. The attempt as recorded when it was
/// started, or None when it must not run: gone (deleted, archived or settled), corrupt
/// (dead-lettered here) or unreachable (handed back to its queue unstarted).
async fn confirm<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    m: &KindMetrics,
) -> Option<chronos_core::Attempt> {
    match start_with_retries(rt, &lease.id).await {
        Some(StartOutcome::Started(a)) => Some(a),
        Some(StartOutcome::Lost) => {
            rt.release(q, &lease.id.msg_id);
            warn!("delivery no longer current (task deleted, archived or settled); not running it");
            None
        }
        Some(StartOutcome::Corrupt(reason)) => {
            rt.release(q, &lease.id.msg_id);
            // The record's attempt count is unreadable; the envelope's is the best guess.
            let attempt = lease
                .envelope
                .as_ref()
                .map_or(1, |e| e.retried.saturating_add(1));
            let failure = Failure {
                attempt,
                message: &reason,
            };
            ended::attempt(rt, lease, m, End::DeadLettered(failure));
            dead_letter(rt, lease, &reason, false).await;
            None
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
                Err(e) => {
                    warn!(error = %e, "could not mark the task started nor return it; the recoverer will re-deliver it")
                }
            }
            None
        }
    }
}

/// The waits between the three tries of [`start_with_retries`]: 100 ms, then 400 ms.
const START_RETRY: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_millis(400)).growing(4);

/// Marks the delivery started, trying again on a Redis error (the mark is idempotent) while the
/// lease stays held and refreshed. None when Redis did not answer in three tries (100 ms, then
/// 400 ms apart).
async fn start_with_retries<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &LeaseId,
) -> Option<StartOutcome> {
    let mut backoff = START_RETRY;
    for last in [false, false, true] {
        if let Some(outcome) = starter::start(rt, lease).await {
            return Some(outcome);
        }
        if !last {
            tokio::time::sleep(backoff.next()).await;
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
    cancel: CancellationToken,
    cell: &Arc<progress::Cell>,
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
    // The handler sees `signal`: it fires with `cancel`, and alone on an operator's cancel
    // (which must not abort the handler, so the select below watches `cancel` only).
    let signal = cancel.child_token();
    rt.mark_running(
        q,
        &lease.id.msg_id,
        cancel.clone(),
        signal.clone(),
        cell.clone(),
        (lease.id.task_id.clone(), env.kind.clone(), now),
    );
    let ctx = Context::for_attempt(env, limit.map(|d| Instant::now() + d), signal).with_progress(
        progress::Reporter::new(cell.clone(), rt.progress_wake.clone()),
    );
    let output = ctx.output_slot();
    // Catch a panic where it happens, so it becomes a retryable failure of this task only.
    // The handler's own `tracing` events go to its attempt's log (LogCapture).
    let handler = logs::scope(cell.clone(), AssertUnwindSafe(start(ctx)).catch_unwind());
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
    // The last progress the handler reported is stored before its task is settled (a task
    // that never reported pays nothing here).
    if let (Some(pending), false) = (
        cell.unwritten(&lease.id.msg_id),
        matches!(outcome, Outcome::LeaseLost),
    ) {
        let ids = [lease.id.msg_id.clone()];
        progress_writer::write(rt, q, &ids, vec![(pending.0, cell.clone(), pending.1)]).await;
    }
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

/// Settles the attempt's outcome. True when the lease can be let go now; false when the acker
/// took the delivery over (it lets go once the ack landed).
async fn settle<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    tries: Tries,
    outcome: Outcome,
    m: &KindMetrics,
) -> bool {
    let env = lease.envelope.as_ref().ok();
    match outcome {
        Outcome::LeaseLost => {
            ended::attempt(rt, lease, m, End::LeaseLost);
            warn!("lease lost (reclaimed, or the task was deleted or archived by an operator); this attempt's result is dropped")
        }
        Outcome::Requeue => {
            ended::attempt(rt, lease, m, End::Requeued);
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
            ended::attempt(rt, lease, m, End::Succeeded);
            // A chain step or group member: its bookkeeping goes before the ack, so a crash in
            // between re-runs it instead of losing it. Not acked when it failed: the recoverer
            // delivers the task again.
            if let Some(env) = env.filter(|e| e.flow.is_some()) {
                let done = persist(rt, q, &lease.id.msg_id, "workflow bookkeeping", || {
                    crate::flow::succeeded(&rt.broker, env, output.as_deref())
                })
                .await;
                if let Err(e) = done {
                    error!(error = %e, "could not advance the workflow; the task will run again after recovery");
                    return true;
                }
            }
            let retention = env.and_then(|e| e.retention_ms).map(Duration::from_millis);
            let completion = Completion {
                lease: lease.id.clone(),
                // Only a retained task keeps its result: send none that would be dropped.
                result: retention.and(output),
                retention,
            };
            // The fetcher's next read carries a plain task's ack when it reads again soon
            // (carry.rs); else the acker batches completions and lets the lease go once acked;
            // if it is gone (shutdown finished), ack directly.
            let Some(completion) = rt.queues[q].carry.offer(completion) else {
                return false;
            };
            match rt.acks.send((q, completion)) {
                Ok(()) => return false,
                Err(back) => {
                    let c = (back.0).1;
                    if let Err(e) = rt
                        .broker
                        .complete(&c.lease.queue, std::slice::from_ref(&c))
                        .await
                    {
                        error!(error = %e, "ack failed; the task will run again after recovery");
                    }
                }
            }
        }
        Outcome::Dead(reason) => {
            let failure = Failure {
                attempt: tries.retried.saturating_add(1),
                message: &reason,
            };
            ended::attempt(rt, lease, m, End::DeadLettered(failure));
            dead_letter(rt, lease, &reason, false).await;
        }
        Outcome::Failed(err) => {
            if let FailureKind::Snooze(delay) = err.kind() {
                snooze(rt, q, lease, tries, delay, m).await;
                return true;
            }
            if let FailureKind::RateLimited { delay, queue_wide } = err.kind() {
                back_off(rt, q, lease, delay, queue_wide, m).await;
                return true;
            }
            if err.kind() == FailureKind::Cancel {
                cancel(rt, q, lease, err.message(), m).await;
                return true;
            }
            let retried = tries.retried.saturating_add(1);
            let failure = Failure {
                attempt: retried,
                message: err.message(),
            };
            if err.kind() == FailureKind::SkipRetry || retried > tries.max_retry {
                ended::attempt(rt, lease, m, End::DeadLettered(failure));
                dead_letter(rt, lease, err.message(), true).await;
                return true;
            }
            // Recorded before the retry delay is asked for: the error hook runs first.
            ended::attempt(rt, lease, m, End::Retried(failure));
            let delay = match err.kind() {
                FailureKind::RetryAfter(d) => d,
                _ => (rt.config.retry_delay)(retried, &err),
            };
            let scheduled = persist(rt, q, &lease.id.msg_id, "retry", || {
                rt.broker.retry(&lease.id, delay, err.message())
            })
            .await;
            if let Err(e) = scheduled {
                error!(error = %e, "could not schedule the retry; the recoverer will re-deliver the task");
            }
        }
    }
    true
}

/// Puts the task back for `delay` without spending an attempt, or dead-letters it when it has
/// snoozed the most it may.
async fn snooze<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    tries: Tries,
    delay: Duration,
    m: &KindMetrics,
) {
    let most = rt.config.max_snoozes;
    let done = persist(rt, q, &lease.id.msg_id, "snooze", || {
        rt.broker.snooze(&lease.id, delay, most)
    })
    .await;
    match done {
        Ok(SnoozeOutcome::Snoozed { snoozes }) => {
            ended::attempt(rt, lease, m, End::Snoozed);
            debug!(?delay, snoozes, "task snoozed");
        }
        Ok(SnoozeOutcome::TooMany { snoozes }) => {
            let reason = format!(
                "snoozed {snoozes} times, the most a task may (max_snoozes); not run again"
            );
            let failure = Failure {
                attempt: tries.retried.saturating_add(1),
                message: &reason,
            };
            ended::attempt(rt, lease, m, End::DeadLettered(failure));
            dead_letter(rt, lease, &reason, false).await;
        }
        Ok(SnoozeOutcome::Stale) => {
            ended::attempt(rt, lease, m, End::LeaseLost);
            warn!("lease lost before the snooze (reclaimed, or deleted by an operator)");
        }
        Err(e) => {
            error!(error = %e, "could not snooze the task; the recoverer will re-deliver it");
        }
    }
}

/// Ends the task as cancelled with `reason`: a group member is reported to its group as not
/// succeeded first (uncounted, its group would never fire), as for a dead letter.
async fn cancel<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    reason: &str,
    m: &KindMetrics,
) {
    let msg_id = lease.id.msg_id.as_str();
    if let Some(env) = lease.envelope.as_ref().ok().filter(|e| e.flow.is_some()) {
        let note = format!("cancelled: {reason}");
        let counted = persist(rt, q, msg_id, "group report", || {
            crate::flow::failed(&rt.broker, env, &note)
        })
        .await;
        if let Err(e) = counted {
            error!(error = %e, "could not report the cancel to its group; the task will be delivered again after recovery");
            return;
        }
    }
    let done = persist(rt, q, msg_id, "cancel", || {
        rt.broker.cancel(&lease.id, reason)
    })
    .await;
    match done {
        Ok(CancelOutcome::Cancelled) => {
            ended::attempt(rt, lease, m, End::Cancelled);
            info!(reason, "task cancelled by its handler");
        }
        Ok(CancelOutcome::Stale) => {
            ended::attempt(rt, lease, m, End::LeaseLost);
            warn!("lease lost before the cancel (reclaimed, or deleted by an operator)");
        }
        Err(e) => {
            error!(error = %e, "could not cancel the task; the recoverer will re-deliver it");
        }
    }
}

/// Blocks the task's rate key (or its queue: `queue_wide`, or a task without a key) for `delay`
/// and puts the task back for the block's end, without spending an attempt.
async fn back_off<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    delay: Duration,
    queue_wide: bool,
    m: &KindMetrics,
) {
    let key = lease
        .envelope
        .as_ref()
        .ok()
        .and_then(|e| e.rate_key.clone());
    // A key enqueue would refuse (an older producer's) cannot name a block: the queue's then,
    // rather than a call that fails for good and leaves the task to the recoverer.
    let scope = match key {
        Some(k) if !queue_wide && chronos_core::names::check_rate_key(&k).is_ok() => {
            BackoffScope::Key(k)
        }
        _ => BackoffScope::Queue,
    };
    let done = persist(rt, q, &lease.id.msg_id, "backoff", || {
        rt.broker.back_off(&lease.id, &scope, delay)
    })
    .await;
    match done {
        Ok(BackoffOutcome::Blocked { until_ms, due_ms }) => {
            ended::attempt(rt, lease, m, End::Throttled);
            debug!(
                ?scope,
                until_ms, due_ms, "rate limited; blocked until the end"
            );
        }
        Ok(BackoffOutcome::Stale) => {
            ended::attempt(rt, lease, m, End::LeaseLost);
            warn!("lease lost before the backoff (reclaimed, or deleted by an operator)");
        }
        Err(e) => {
            error!(error = %e, "could not block for the rate limit; the recoverer will re-deliver the task");
        }
    }
}

/// The waits before a failed settlement step is tried again: 100 ms, doubling up to 2 s.
const SETTLE_BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));

/// Runs an idempotent settlement step again while its error is transient (a failover, a cut
/// connection) and the delivery is still held here: the heartbeat keeps the lease meanwhile, so
/// the recoverer does not take a settled attempt for a lost worker and charge it another.
/// Gives up on a permanent error, when the lease was lost, or when shutdown cancels handlers.
pub(crate) async fn persist<B, T, F, Fut>(
    rt: &Runtime<B>,
    q: usize,
    msg_id: &str,
    what: &str,
    mut call: F,
) -> Result<T, chronos_core::BrokerError>
where
    B: WorkerBroker,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, chronos_core::BrokerError>>,
{
    let mut backoff = SETTLE_BACKOFF;
    loop {
        match call().await {
            Err(e) if e.is_transient() && rt.holds(q, msg_id) && !rt.hard_cancel.is_cancelled() => {
                let delay = backoff.next();
                warn!(error = %e, ?delay, "{what} failed; trying again while the lease is held");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = rt.hard_cancel.cancelled() => {}
                }
            }
            r => return r,
        }
    }
}

async fn dead_letter<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &Lease,
    reason: &str,
    count_attempt: bool,
) {
    // A group member is counted as failed first: dead-lettered uncounted, its group would never
    // fire.
    let q = rt.queue_index(&lease.id.queue);
    let msg_id = lease.id.msg_id.as_str();
    if let Some(env) = lease.envelope.as_ref().ok().filter(|e| e.flow.is_some()) {
        let counted = match q {
            Some(q) => {
                persist(rt, q, msg_id, "group report", || {
                    crate::flow::failed(&rt.broker, env, reason)
                })
                .await
            }
            None => crate::flow::failed(&rt.broker, env, reason).await,
        };
        if let Err(e) = counted {
            error!(error = %e, "could not report the failure to its group; the task will be delivered again after recovery");
            return;
        }
    }
    let dead = match q {
        Some(q) => {
            persist(rt, q, msg_id, "dead letter", || {
                rt.broker.dead_letter(&lease.id, reason, count_attempt)
            })
            .await
        }
        None => {
            rt.broker
                .dead_letter(&lease.id, reason, count_attempt)
                .await
        }
    };
    match dead {
        Ok(DeadOutcome::Stale) => {}
        Ok(outcome) => {
            let discarded = outcome == DeadOutcome::Discarded;
            ended::dead_lettered(
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
