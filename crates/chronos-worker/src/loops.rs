//! The two shapes of the server's background loops: a step run at a fixed period, and a
//! channel drained in batches grouped by queue. Both end when the maintenance loops stop.

use chronos_core::QueueName;
use tokio::sync::mpsc;

use crate::runtime::Runtime;
use crate::WorkerBroker;

/// Runs `step` every `period`, the first time at once, until the maintenance loops are stopped.
/// A slow step delays the next tick rather than bunching ticks up.
pub(crate) async fn every<B, F, Fut>(rt: &Runtime<B>, period: std::time::Duration, mut step: F)
where
    B: WorkerBroker,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => step().await,
            _ = rt.stop_maintenance.cancelled() => return,
        }
    }
}

/// Round-robin over a server's queues: a loop that would visit every queue each period visits
/// the next one instead, so what an idle server costs Redis does not grow with its queue count.
#[derive(Debug, Default)]
pub(crate) struct Turn(usize);

impl Turn {
    /// The next of `n` queues, or None when there are none.
    pub(crate) fn next(&mut self, n: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        let q = self.0 % n;
        self.0 = self.0.wrapping_add(1);
        Some(q)
    }
}

/// Takes what arrives on `rx` in batches of at most `max`, grouped by queue, and hands each
/// group to `handle` (one Redis call per queue per batch), until the maintenance loops stop;
/// then it closes the channel, handles what is still queued and returns. A sender that finds
/// the channel closed acts on its own.
pub(crate) async fn batches<B, T, Q, F, Fut>(
    rt: &Runtime<B>,
    mut rx: mpsc::UnboundedReceiver<T>,
    max: usize,
    queue_of: Q,
    mut handle: F,
) where
    B: WorkerBroker,
    Q: Fn(&T) -> &QueueName,
    F: FnMut(QueueName, Vec<T>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut batch = Vec::with_capacity(max);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, max) => n,
            _ = rt.stop_maintenance.cancelled() => {
                rx.close();
                while let Ok(item) = rx.try_recv() {
                    batch.push(item);
                }
                batch.len()
            }
        };
        if n == 0 {
            return;
        }
        let mut by_queue: std::collections::BTreeMap<QueueName, Vec<T>> = Default::default();
        for item in batch.drain(..) {
            by_queue
                .entry(queue_of(&item).clone())
                .or_default()
                .push(item);
        }
        for (queue, items) in by_queue {
            handle(queue, items).await;
        }
        if rt.stop_maintenance.is_cancelled() && rx.is_closed() {
            return;
        }
    }
}
