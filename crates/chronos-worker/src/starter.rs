//! Marks deliveries as started right before their handlers run. Every task starting at the same
//! moment shares one script call per queue, so the mark costs one round trip per batch.
//!
//! Why a mark at all: a delivery becomes an attempt only when marked, so a lost worker costs an
//! attempt exactly when a handler may have run (a task that keeps killing its workers still ends
//! in the dead letters), while deliveries that were fetched but never started (a lost fetch
//! reply, a crash with tasks waiting in the buffer) are re-delivered for free.

use std::sync::Arc;

use chronos_broker::{LeaseId, QueueName, StartOutcome};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use crate::runtime::{batches, Runtime};
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;

/// One delivery about to start, and where its outcome goes (None: Redis could not be reached).
#[derive(Debug)]
pub(crate) struct StartRequest {
    pub(crate) lease: LeaseId,
    pub(crate) reply: oneshot::Sender<Option<StartOutcome>>,
}

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
    let leases: Vec<LeaseId> = requests.iter().map(|r| r.lease.clone()).collect();
    let outcomes = match rt.broker.start(queue, &leases).await {
        Ok(o) => o.into_iter().map(Some).collect(),
        Err(e) => {
            warn!(queue = %queue, n = leases.len(), error = %e, "could not mark tasks started");
            vec![None; leases.len()]
        }
    };
    for (r, outcome) in requests.into_iter().zip(outcomes) {
        let _ = r.reply.send(outcome);
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
        reply: tx,
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
