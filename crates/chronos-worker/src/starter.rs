//! Marks deliveries as started as their handlers start. Every task starting at the same moment
//! shares one script call per queue, and a handler whose envelope decoded does not wait for the
//! reply (the entry already told it the attempt count), so the mark costs no latency; a mark is
//! sent a couple of milliseconds late and dropped if its attempt has ended by then, so quick
//! tasks cost no start call at all.
//!
//! Why a mark at all: a delivery becomes an attempt only when marked, so a lost worker costs an
//! attempt when a handler may have run, while deliveries that were fetched but never started (a
//! lost fetch reply, a crash with tasks waiting in the buffer) are re-delivered for free. A
//! handler that kills its process before its mark reached Redis gets at most three free
//! re-deliveries before the next counts (see reclaim.lua), so it still ends in the dead letters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{LeaseId, QueueName, StartOutcome};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use crate::runtime::{batches, Runtime};
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;

/// One delivery about to start, and where its outcome goes (None: Redis could not be reached).
/// Without a reply channel the loop only logs an outcome other than `Started`.
#[derive(Debug)]
pub(crate) struct StartRequest {
    pub(crate) lease: LeaseId,
    pub(crate) reply: Option<oneshot::Sender<Option<StartOutcome>>>,
    /// Set by the executor when the attempt has ended: a mark not sent by then is not needed.
    pub(crate) ended: Option<Arc<AtomicBool>>,
}

/// How long an unawaited mark waits before it is sent. A handler that ends sooner is settled
/// without one (its settlement says everything a mark would), so quick tasks cost no start call
/// at all; a crash inside this window costs the task one of its free re-deliveries.
const MARK_DELAY: Duration = Duration::from_millis(2);

pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    rx: mpsc::UnboundedReceiver<StartRequest>,
) {
    batches(
        &rt,
        rx,
        MAX_BATCH,
        |r| &r.lease.queue,
        |queue, requests| {
            let rt = &rt;
            async move { start_batch(rt, &queue, requests).await }
        },
    )
    .await
}

/// One start call for every delivery of `queue` starting now; each requester gets its outcome.
async fn start_batch<B: WorkerBroker>(
    rt: &Runtime<B>,
    queue: &QueueName,
    requests: Vec<StartRequest>,
) {
    let mut requests = requests;
    if requests.iter().all(|r| r.reply.is_none()) {
        tokio::time::sleep(MARK_DELAY).await;
        requests.retain(|r| !r.ended.as_ref().is_some_and(|e| e.load(Ordering::Acquire)));
        if requests.is_empty() {
            return;
        }
    }
    let leases: Vec<LeaseId> = requests.iter().map(|r| r.lease.clone()).collect();
    let outcomes = match rt.broker.start(queue, &leases).await {
        Ok(o) => o.into_iter().map(Some).collect(),
        Err(e) => {
            warn!(queue = %queue, n = leases.len(), error = %e, "could not mark tasks started");
            vec![None; leases.len()]
        }
    };
    for (r, outcome) in requests.into_iter().zip(outcomes) {
        match (r.reply, outcome) {
            (Some(reply), outcome) => {
                let _ = reply.send(outcome);
            }
            (None, Some(StartOutcome::Started(_))) | (None, None) => {}
            (None, Some(StartOutcome::Lost)) => {
                debug!(task_id = %r.lease.task_id, "started a delivery that was no longer current")
            }
            (None, Some(StartOutcome::Corrupt(reason))) => {
                warn!(task_id = %r.lease.task_id, reason, "started a task whose record is corrupt")
            }
        }
    }
}

/// Asks for one delivery to be marked started, without waiting (the handler runs meanwhile).
/// `ended` is set once the attempt is over; a mark still unsent then is dropped.
pub(crate) fn request<B: WorkerBroker>(rt: &Runtime<B>, lease: &LeaseId, ended: Arc<AtomicBool>) {
    let request = StartRequest {
        lease: lease.clone(),
        reply: None,
        ended: Some(ended),
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
