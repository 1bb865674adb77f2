//! Batches acknowledgements: one script call per queue for every completion waiting, so the
//! ack costs one round trip per batch, not per task.

use std::sync::Arc;
use std::time::Duration;

use chronos_core::{Completion, QueueName};
use tokio::sync::mpsc;
use tracing::{error, warn};

use crate::backoff::Backoff;
use crate::loops::batches;
use crate::runtime::Runtime;
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;
/// The waits between tries of a failing ack: 50 ms, doubling up to 2 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));

pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    rx: mpsc::UnboundedReceiver<(usize, Completion)>,
) {
    // Shutdown: take no more, flush what is queued. Later completions ack directly.
    batches(
        &rt,
        rx,
        MAX_BATCH,
        |(_, c)| &c.lease.queue,
        |queue, done| {
            let rt = &rt;
            async move { ack(rt, &queue, done).await }
        },
    )
    .await
}

/// Acks, then lets the leases go. A re-sent ack is a no-op, so retrying is always safe: while
/// the server runs, a transient error (a failover, a cut connection) is retried for as long as
/// it lasts, the heartbeat keeping the leases meanwhile, so a succeeded task is not re-run and
/// charged an attempt by the recoverer. Once shutdown has begun it tries a few times only; then
/// the tasks are re-delivered after recovery (at-least-once).
async fn ack<B: WorkerBroker>(rt: &Runtime<B>, queue: &QueueName, done: Vec<(usize, Completion)>) {
    let (slots, done): (Vec<usize>, Vec<Completion>) = done.into_iter().unzip();
    let mut backoff = RETRY;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match rt.broker.complete(queue, &done).await {
            Ok(_) => break,
            Err(e) => {
                let stopping = rt.stop_maintenance.is_cancelled();
                warn!(queue = %queue, n = done.len(), attempt, error = %e, "ack failed");
                if !e.is_transient() || (stopping && attempt >= 5) {
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next()) => {}
                    _ = rt.stop_maintenance.cancelled() => {}
                }
            }
        }
    }
    for (q, c) in slots.into_iter().zip(&done) {
        rt.release(q, &c.lease.msg_id);
    }
}

/// Gives completions of queue `q` to the acker, or acks them here once it is gone (shutdown).
pub(crate) async fn hand_over<B: WorkerBroker>(rt: &Runtime<B>, q: usize, done: Vec<Completion>) {
    for c in done {
        if let Err(back) = rt.acks.send((q, c)) {
            let c = (back.0).1;
            if let Err(e) = rt
                .broker
                .complete(&c.lease.queue, std::slice::from_ref(&c))
                .await
            {
                error!(queue = %c.lease.queue, task_id = %c.lease.task_id, error = %e, "ack failed; the task will run again after recovery");
            }
            rt.release(q, &c.lease.msg_id);
        }
    }
}
