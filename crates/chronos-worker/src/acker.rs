//! Batches acknowledgements: one script call per queue for every completion waiting, so the
//! ack costs one round trip per batch, not per task.

use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{Completion, QueueName};
use tokio::sync::mpsc;
use tracing::warn;

use crate::runtime::{batches, Runtime};
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;

pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    rx: mpsc::UnboundedReceiver<Completion>,
) {
    // Shutdown: take no more, flush what is queued. Later completions ack directly.
    batches(
        &rt,
        rx,
        MAX_BATCH,
        |c| &c.lease.queue,
        |queue, done| {
            let rt = &rt;
            async move { ack(rt, &queue, &done).await }
        },
    )
    .await
}

/// Acks with a few retries: a re-sent ack is a no-op, so retrying is always safe. If Redis stays
/// away, the tasks are re-delivered after recovery (at-least-once).
async fn ack<B: WorkerBroker>(rt: &Runtime<B>, queue: &QueueName, done: &[Completion]) {
    let mut delay = Duration::from_millis(50);
    for attempt in 1..=5 {
        match rt.broker.complete(queue, done).await {
            Ok(_) => return,
            Err(e) => {
                warn!(queue = %queue, n = done.len(), attempt, error = %e, "ack failed");
                if attempt < 5 {
                    tokio::time::sleep(delay).await;
                    delay *= 4;
                }
            }
        }
    }
}
