//! Marks deliveries as started as their handlers start. Every task starting at the same moment
//! shares one script call per queue, and a handler whose envelope decoded does not wait for the
//! reply (the entry already told it the attempt count), so the mark costs no latency; a mark is
//! sent a couple of milliseconds late and dropped if its attempt has ended by then, so quick
//! tasks cost no start call at all.
//!
//! Not waiting is safe only for a delivery fetched moments ago: whatever makes it stale (an
//! operator's edit or re-prioritization, a deduplication's replace, a forced queue delete; an
//! operator's delete or archive refuses a task a worker holds) and the start are then
//! concurrent, and an answer `Lost` cancels the handler at once. A
//! delivery that waited in the buffer is confirmed before its handler runs (executor.rs), and a
//! mark that could not be sent is sent again until it lands or its attempt ends.
//!
//! Why a mark at all: a delivery becomes an attempt only when marked, so a lost worker costs an
//! attempt when a handler may have run, while deliveries that were fetched but never started (a
//! lost fetch reply, a crash with tasks waiting in the buffer) are re-delivered for free. A
//! handler that kills its process before its mark reached Redis gets at most three free
//! re-deliveries before the next counts (see reclaim.lua), so it still ends in the dead letters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{LeaseId, QueueName, StartOutcome};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::mark::{StartRequest, RESEND};
use crate::runtime::Runtime;
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;

/// How long an unawaited mark waits before it is sent. A handler that ends sooner is settled
/// without one (its settlement says everything a mark would), so quick tasks cost no start call
/// at all; a crash inside this window costs the task one of its free re-deliveries.
const MARK_DELAY: Duration = Duration::from_millis(2);

/// Sends marks in batches until the maintenance loops stop (after every handler has finished),
/// then sends what is still queued and returns. Requests that arrive together share one delay
/// and one script call per queue.
pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    mut rx: mpsc::UnboundedReceiver<StartRequest>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, MAX_BATCH) => n,
            _ = rt.stop_maintenance.cancelled() => {
                rx.close();
                while let Ok(r) = rx.try_recv() {
                    batch.push(r);
                }
                batch.len()
            }
        };
        if n == 0 {
            return;
        }
        // One delay for the whole batch, whatever the number of queues in it.
        if batch.iter().any(|r| r.reply.is_none()) {
            tokio::time::sleep(MARK_DELAY).await;
            batch.retain(|r| !r.ended.as_ref().is_some_and(|e| e.load(Ordering::Acquire)));
        }
        let mut by_queue: BTreeMap<QueueName, Vec<StartRequest>> = BTreeMap::new();
        for r in batch.drain(..) {
            by_queue.entry(r.lease.queue.clone()).or_default().push(r);
        }
        for (queue, requests) in by_queue {
            start_batch(&rt, &queue, requests).await;
        }
        if rt.stop_maintenance.is_cancelled() && rx.is_closed() {
            return;
        }
    }
}

/// One start call for every delivery of `queue` starting now; each requester gets its outcome.
async fn start_batch<B: WorkerBroker>(
    rt: &Runtime<B>,
    queue: &QueueName,
    requests: Vec<StartRequest>,
) {
    if requests.is_empty() {
        return;
    }
    let leases: Vec<LeaseId> = requests.iter().map(|r| r.lease.clone()).collect();
    let outcomes = match rt.broker.start(queue, &leases).await {
        Ok(o) => o.into_iter().map(Some).collect(),
        Err(e) => {
            warn!(queue = %queue, n = leases.len(), error = %e, "could not mark tasks started");
            vec![None; leases.len()]
        }
    };
    let mut resend = Vec::new();
    for (r, outcome) in requests.into_iter().zip(outcomes) {
        match (r.reply, outcome) {
            (Some(reply), outcome) => {
                let _ = reply.send(outcome);
            }
            (None, Some(StartOutcome::Started(_))) => {}
            (None, None) => resend.push(StartRequest { reply: None, ..r }),
            (None, Some(StartOutcome::Lost)) => {
                info!(task_id = %r.lease.task_id, "delivery gone when marked started (deleted, archived or settled); cancelling its handler");
                if let Some(lost) = &r.lost {
                    lost.cancel();
                }
            }
            (None, Some(StartOutcome::Corrupt(reason))) => {
                warn!(task_id = %r.lease.task_id, reason, "started a task whose record is corrupt")
            }
        }
    }
    if !resend.is_empty() {
        schedule_resend(rt, resend);
    }
}

/// Sends failed marks again after their backoff, unless their attempt ended meanwhile: until
/// its mark lands, a running task lists as pending, can be deleted under its handler and
/// cannot be cancelled.
fn schedule_resend<B: WorkerBroker>(rt: &Runtime<B>, mut requests: Vec<StartRequest>) {
    let starts = rt.starts.clone();
    // Each mark's waits grow on their own; the batch goes again after the shortest (never
    // empty: only failed marks come here).
    let wait = requests
        .iter_mut()
        .map(|r| r.backoff.next())
        .min()
        .unwrap_or_default();
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        for r in requests {
            if r.ended.as_ref().is_some_and(|e| e.load(Ordering::Acquire)) {
                continue;
            }
            if starts.send(r).is_err() {
                // The loop stopped: every handler has finished, no mark is needed.
                return;
            }
        }
    });
}

/// Asks for one delivery to be marked started, without waiting (the handler runs meanwhile).
/// `ended` is set once the attempt is over; a mark still unsent then is dropped. `lost` is
/// cancelled if the mark finds the delivery gone.
pub(crate) fn request<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &LeaseId,
    ended: Arc<AtomicBool>,
    lost: CancellationToken,
) {
    let request = StartRequest {
        lease: lease.clone(),
        reply: None,
        ended: Some(ended),
        lost: Some(lost),
        backoff: RESEND,
    };
    // The loop stops only after every handler has finished (the last step of shutdown), so a
    // send fails only for a task that will not run; without the mark it costs no attempt.
    if rt.starts.send(request).is_err() {
        debug!(task_id = %lease.task_id, "start loop stopped; delivery left unmarked");
    }
}

/// Marks one delivery started through the batching loop (or directly once it has stopped).
pub(crate) async fn start<B: WorkerBroker>(
    rt: &Runtime<B>,
    lease: &LeaseId,
) -> Option<StartOutcome> {
    let (tx, rx) = oneshot::channel();
    let request = StartRequest {
        lease: lease.clone(),
        reply: Some(tx),
        ended: None,
        lost: None,
        backoff: RESEND,
    };
    if rt.starts.send(request).is_ok() {
        if let Ok(outcome) = rx.await {
            return outcome;
        }
    }
    match rt
        .broker
        .start(&lease.queue, std::slice::from_ref(lease))
        .await
    {
        Ok(mut o) => o.pop(),
        Err(e) => {
            warn!(error = %e, "could not mark the task started");
            None
        }
    }
}
