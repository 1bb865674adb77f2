//! Runs one task and settles its outcome: the attempt's outcome becomes one `Settlement` (its
//! `End` and the attempt's report), which the settler batches (a success) or which is settled
//! at once (any other end, whose answer decides what is recorded).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos_core::{
    now_ms, AttemptReport, BackoffOutcome, BackoffScope, CancelOutcome, DeadOutcome, End, Lease,
    LeaseId, SettleExt, Settled, Settlement, SnoozeOutcome, StartOutcome, TaskEnvelope,
};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, info_span, warn, Instrument, Span};

use crate::backoff::Backoff;
use crate::config::UnrunnablePolicy;
use crate::ended::{self, AttemptEnd, Failure};
use crate::metrics::{self, KindMetrics};
use crate::mux::Unrunnable;
use crate::runtime::Runtime;
use crate::WorkerBroker;
use crate::{logs, progress, progress_writer};
use crate::{settler, starter};
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
        let ran_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
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
        // For the task's attempt history: the settling script records how long it ran and
        // what it logged.
        let report = AttemptReport {
            ran_ms: Some(ran_ms),
            logs: cell.lines.take(rt.config.task_logs.redact.as_ref()),
        };
        ended.store(true, std::sync::atomic::Ordering::Release);
        rt.counters.running.fetch_sub(1, Ordering::Relaxed);
        // The lease stays held (the heartbeat keeps it) until the outcome is settled, so a
        // settlement slowed by a failover is not taken for a lost worker.
        if settle(rt, q, &lease, tries, outcome, report, &m).await {
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
            ended::attempt(rt, lease, m, AttemptEnd::DeadLettered(failure));
            let settlement = Settlement::dead_lettered(lease.id.clone(), reason, false);
            dead_letter(rt, q, lease, settlement).await;
            None
        }
        None => {
            // Whether the mark took effect is unknown (a reply that never came): put the
            // delivery back unstarted, so that a lost worker is not charged an attempt for a
            // run that never happened. If even that fails, the recoverer re-delivers it.
            let back = settler::requeue(rt, [lease.id.clone()]).await;
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

/// Settles the attempt's outcome: one [`Settlement`] built from it and the attempt's `report`.
/// True when the lease can be let go now; false when the settler took the delivery over (it
/// lets go once the settlement landed).
async fn settle<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    tries: Tries,
    outcome: Outcome,
    report: AttemptReport,
    m: &KindMetrics,
) -> bool {
    let Some(end) = end_of(rt, q, lease, tries, outcome, m).await else {
        return true;
    };
    let settlement = Settlement {
        lease: lease.id.clone(),
        end,
        report,
    };
    match &settlement.end {
        // The fetcher's next read carries a plain task's ack when it reads again soon; else
        // the settler batches it and lets the lease go once settled.
        End::Completed { .. } => {
            settler::hand_over(rt, q, settlement).await;
            return false;
        }
        End::Requeued => {
            if let Err(e) = settler::requeue(rt, [settlement.lease]).await {
                error!(error = %e, "could not requeue; the recoverer will re-deliver the task");
            }
        }
        End::DeadLettered { .. } => dead_letter(rt, q, lease, settlement).await,
        _ => {
            if let Some(answer) = settle_now(rt, q, lease, &settlement).await {
                answered(rt, q, lease, tries, settlement, answer, m).await;
            }
        }
    }
    true
}

/// How the outcome ends the delivery, with what is recorded before it is settled: the
/// counters and hooks of an end known now (a success, a retry, a dead letter, a requeue), and
/// a workflow step's bookkeeping. None: there is nothing to settle (the lease was lost, or the
/// bookkeeping failed and the task is left to recovery).
async fn end_of<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    tries: Tries,
    outcome: Outcome,
    m: &KindMetrics,
) -> Option<End> {
    let env = lease.envelope.as_ref().ok();
    Some(match outcome {
        Outcome::LeaseLost => {
            ended::attempt(rt, lease, m, AttemptEnd::LeaseLost);
            warn!("lease lost (reclaimed, or the task was deleted or archived by an operator); this attempt's result is dropped");
            return None;
        }
        Outcome::Requeue => {
            ended::attempt(rt, lease, m, AttemptEnd::Requeued);
            warn!("cancelled by shutdown; returning the task to its queue");
            End::Requeued
        }
        Outcome::Succeeded(output) => {
            ended::attempt(rt, lease, m, AttemptEnd::Succeeded);
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
                    return None;
                }
            }
            let retention = env.and_then(|e| e.retention_ms).map(Duration::from_millis);
            End::Completed {
                // Only a retained task keeps its result: send none that would be dropped.
                result: retention.and(output),
                retention,
            }
        }
        Outcome::Dead(reason) => {
            let failure = Failure {
                attempt: tries.retried.saturating_add(1),
                message: &reason,
            };
            ended::attempt(rt, lease, m, AttemptEnd::DeadLettered(failure));
            End::DeadLettered {
                error: reason,
                count_attempt: false,
            }
        }
        Outcome::Failed(err) => match err.kind() {
            FailureKind::Snooze(delay) => End::Snoozed {
                delay,
                max_snoozes: rt.config.max_snoozes,
            },
            FailureKind::RateLimited { delay, queue_wide } => End::BackedOff {
                scope: backoff_scope(lease, queue_wide),
                delay,
            },
            FailureKind::Cancel => End::Cancelled {
                reason: err.message().to_string(),
            },
            kind => {
                let retried = tries.retried.saturating_add(1);
                let failure = Failure {
                    attempt: retried,
                    message: err.message(),
                };
                if kind == FailureKind::SkipRetry || retried > tries.max_retry {
                    ended::attempt(rt, lease, m, AttemptEnd::DeadLettered(failure));
                    End::DeadLettered {
                        error: err.message().to_string(),
                        count_attempt: true,
                    }
                } else {
                    // Recorded before the retry delay is asked for: the error hook runs first.
                    ended::attempt(rt, lease, m, AttemptEnd::Retried(failure));
                    let delay = match kind {
                        FailureKind::RetryAfter(d) => d,
                        _ => (rt.config.retry_delay)(retried, &err),
                    };
                    End::Retried {
                        delay,
                        error: err.message().to_string(),
                    }
                }
            }
        },
    })
}

/// What a handler-signalled backoff blocks: the task's rate key, or its queue (`queue_wide`, a
/// task without a key, or one whose key enqueue would refuse: an older producer's cannot name
/// a block, and a call that fails for good would leave the task to the recoverer).
fn backoff_scope(lease: &Lease, queue_wide: bool) -> BackoffScope {
    let key = lease
        .envelope
        .as_ref()
        .ok()
        .and_then(|e| e.rate_key.clone());
    match key {
        Some(k) if !queue_wide && chronos_core::names::check_rate_key(&k).is_ok() => {
            BackoffScope::Key(k)
        }
        _ => BackoffScope::Queue,
    }
}

/// Settles one settlement whose answer decides what is recorded, trying again while the lease
/// is held ([`persist`]). A group member is reported to its group as not succeeded first when
/// it is dead-lettered or cancelled (uncounted, its group would never fire). None when it could
/// not be settled (logged; the recoverer re-delivers the task).
async fn settle_now<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    settlement: &Settlement,
) -> Option<Settled> {
    let msg_id = lease.id.msg_id.as_str();
    let note = match &settlement.end {
        End::DeadLettered { error, .. } => Some(error.clone()),
        End::Cancelled { reason } => Some(format!("cancelled: {reason}")),
        _ => None,
    };
    if let (Some(note), Some(env)) = (note, lease.envelope.as_ref().ok()) {
        if env.flow.is_some() {
            let counted = persist(rt, q, msg_id, "group report", || {
                crate::flow::failed(&rt.broker, env, &note)
            })
            .await;
            if let Err(e) = counted {
                error!(error = %e, "could not report the end to its group; the task will be delivered again after recovery");
                return None;
            }
        }
    }
    let what = match &settlement.end {
        End::Retried { .. } => "retry",
        End::Snoozed { .. } => "snooze",
        End::BackedOff { .. } => "backoff",
        End::DeadLettered { .. } => "dead letter",
        End::Cancelled { .. } => "cancel",
        _ => "settlement",
    };
    let settled = persist(rt, q, msg_id, what, || {
        rt.broker.settle_one(settlement.clone())
    })
    .await;
    match settled {
        Ok(answer) => Some(answer),
        Err(e) => {
            error!(error = %e, "could not settle the task ({what}); the recoverer will re-deliver it");
            None
        }
    }
}

/// Records what the store answered to `settlement` (a retry, snooze, backoff or cancel): a
/// stale lease is a lost one, and a snooze refused past its limit becomes a dead letter.
async fn answered<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    tries: Tries,
    settlement: Settlement,
    answer: Settled,
    m: &KindMetrics,
) {
    match answer {
        Settled::Snoozed(SnoozeOutcome::Snoozed { snoozes }) => {
            ended::attempt(rt, lease, m, AttemptEnd::Snoozed);
            debug!(snoozes, "task snoozed");
        }
        Settled::Snoozed(SnoozeOutcome::TooMany { snoozes }) => {
            let reason = format!(
                "snoozed {snoozes} times, the most a task may (max_snoozes); not run again"
            );
            let failure = Failure {
                attempt: tries.retried.saturating_add(1),
                message: &reason,
            };
            ended::attempt(rt, lease, m, AttemptEnd::DeadLettered(failure));
            let settlement = Settlement::dead_lettered(settlement.lease, reason, false)
                .with_report(settlement.report);
            dead_letter(rt, q, lease, settlement).await;
        }
        Settled::BackedOff(BackoffOutcome::Blocked { until_ms, due_ms }) => {
            ended::attempt(rt, lease, m, AttemptEnd::Throttled);
            debug!(until_ms, due_ms, "rate limited; blocked until the end");
        }
        Settled::Cancelled(CancelOutcome::Cancelled) => {
            ended::attempt(rt, lease, m, AttemptEnd::Cancelled);
            if let End::Cancelled { reason } = &settlement.end {
                info!(reason, "task cancelled by its handler");
            }
        }
        // A retry was recorded before it was settled; a stale one was lost meanwhile.
        Settled::Retried { .. } => {}
        stale if stale.is_stale() => {
            ended::attempt(rt, lease, m, AttemptEnd::LeaseLost);
            warn!(
                ?settlement.end,
                "lease lost before it was settled (reclaimed, or deleted by an operator)"
            );
        }
        other => warn!(?other, "unexpected answer to a settlement"),
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

/// Dead-letters the task with `settlement` (an [`End::DeadLettered`]), and records it (the
/// counter, the metric, the log line, the dead-letter hook) unless the lease was stale.
async fn dead_letter<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    lease: &Lease,
    settlement: Settlement,
) {
    let answer = settle_now(rt, q, lease, &settlement).await;
    let (Some(Settled::DeadLettered(outcome)), End::DeadLettered { error, .. }) =
        (answer, &settlement.end)
    else {
        return;
    };
    if outcome == DeadOutcome::Stale {
        return;
    }
    ended::dead_lettered(
        rt,
        &lease.id,
        lease.envelope.as_ref().ok().cloned(),
        error,
        outcome == DeadOutcome::Discarded,
    )
    .await;
}
