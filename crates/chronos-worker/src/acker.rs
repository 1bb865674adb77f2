//! Batches acknowledgements: one script call per queue for every completion waiting, so the
//! ack costs one round trip per batch, not per task.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{Completion, QueueName};
use tokio::sync::mpsc;
use tracing::warn;

use crate::runtime::Runtime;
use crate::WorkerBroker;

const MAX_BATCH: usize = 512;

pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    mut rx: mpsc::UnboundedReceiver<Completion>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, MAX_BATCH) => n,
            _ = rt.stop_maintenance.cancelled() => {
                // Shutdown: take no more, flush what is queued. Later completions ack directly.
                rx.close();
                while let Ok(c) = rx.try_recv() {
                    batch.push(c);
                }
                batch.len()
            }
        };
        if n == 0 {
            return;
        }
        let mut by_queue: BTreeMap<QueueName, Vec<Completion>> = BTreeMap::new();
        for c in batch.drain(..) {
            by_queue.entry(c.lease.queue.clone()).or_default().push(c);
        }
        for (queue, done) in by_queue {
            ack(&rt, &queue, &done).await;
        }
        if rt.stop_maintenance.is_cancelled() && rx.is_closed() {
            return;
        }
    }
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
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
        }
    }
}
