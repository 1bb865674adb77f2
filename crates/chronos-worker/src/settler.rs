//! Sends settlements in batches: a settlement the executor hands over waits for its queue's
//! fetcher, whose next read carries it (`Consume::fetch` with it as `carry`), or goes to the
//! settling loop, which settles what waits in one `Consume::settle` per queue. Either way a
//! batch costs one round trip, not one per task, and at concurrency 1 the ack of a task and the
//! read of the next are one call.
//!
//! A settlement is carried only while the fetcher is about to read again (its queue busy, not
//! limited, not paused), and only when carrying costs the read nothing (a bare ack:
//! `Settlement::is_bare_ack`); the others go to the loop, so they never hold up a read.
//! Whenever the fetcher stops reading at once (it parks on the shared blocking read, blocks on
//! its own, waits for space longer than a moment, hands over to the limiter or exits), what it
//! carries goes to the loop, and so does every settlement until it reads again: a settlement
//! never waits for a read that is not coming.
//!
//! A settlement handed over here lets its lease go once it is settled (or given up on), so a
//! task is never fetched again by this server while its end is still on its way.

use std::sync::Arc;
use std::time::Duration;

use chronos_core::{BrokerError, Fetched, LeaseId, QueueName, Settlement};
use tokio::sync::mpsc;
use tracing::{error, warn};

use crate::backoff::Backoff;
use crate::loops::batches;
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// Most settlements per batch of the loop.
const MAX_BATCH: usize = 512;
/// The waits between tries of a failing batch: 50 ms, doubling up to 2 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));

/// Takes over the settlement of a delivery of queue `q`: carried by the fetcher's next read,
/// else batched by the loop, else (the loop is gone: shutdown finished) settled here at once.
/// The lease is let go once it is settled.
pub(crate) async fn hand_over<B: WorkerBroker>(rt: &Runtime<B>, q: usize, settlement: Settlement) {
    let Some(settlement) = rt.queues[q].carry.offer(settlement) else {
        return;
    };
    send(rt, q, vec![settlement]).await;
}

/// Gives the settlements carried for queue `q` to the loop (or settles them here once it is
/// gone); the fetcher stops reading at once.
pub(crate) async fn stop_carrying<B: WorkerBroker>(rt: &Runtime<B>, q: usize) {
    send(rt, q, rt.queues[q].carry.close()).await;
}

/// Gives what waits for the fetcher of queue `q` to the loop, carrying on: the read it waits
/// for is late.
pub(crate) async fn flush<B: WorkerBroker>(rt: &Runtime<B>, q: usize) {
    send(rt, q, rt.queues[q].carry.take()).await;
}

/// The fetcher's read of up to `count` tasks of queue `q` that returns at once, carrying what
/// waits for it; from now on settlements wait for its next read. The carried leases are let go
/// once settled; on an error they go to the loop, which tries again (settling twice is
/// harmless). Answers how many it carried, and what it read.
pub(crate) async fn read<B: WorkerBroker>(
    rt: &Runtime<B>,
    reader: &mut B::Reader,
    q: usize,
    count: usize,
) -> (usize, Result<Fetched, BrokerError>) {
    let carried = rt.queues[q].carry.open();
    let n = carried.len();
    (n, read_carrying(rt, reader, q, carried, count).await)
}

/// The fetcher's last read: it settles what still waits and pays the counts a store may owe
/// (`owes`: an earlier read carried settlements and took tasks), taking nothing.
pub(crate) async fn last_read<B: WorkerBroker>(
    rt: &Runtime<B>,
    reader: &mut B::Reader,
    q: usize,
    owes: bool,
) {
    let carried = rt.queues[q].carry.close();
    if !owes && carried.is_empty() {
        return;
    }
    if let Err(e) = read_carrying(rt, reader, q, carried, 0).await {
        warn!(queue = %rt.queues[q].name, error = %e, "last read failed; what it carried went to the settling loop");
    }
}

async fn read_carrying<B: WorkerBroker>(
    rt: &Runtime<B>,
    reader: &mut B::Reader,
    q: usize,
    carried: Vec<Settlement>,
    count: usize,
) -> Result<Fetched, BrokerError> {
    let queue = &rt.queues[q].name;
    match rt
        .broker
        .fetch(reader, queue, &rt.id, &carried, count, Duration::ZERO)
        .await
    {
        Ok(fetched) => {
            for s in &carried {
                rt.release(q, &s.lease.msg_id);
            }
            Ok(fetched)
        }
        Err(e) => {
            send(rt, q, carried).await;
            Err(e)
        }
    }
}

/// Gives settlements of queue `q` to the loop, or settles them here once it is gone.
async fn send<B: WorkerBroker>(rt: &Runtime<B>, q: usize, settlements: Vec<Settlement>) {
    for settlement in settlements {
        if let Err(back) = rt.settlements.send((q, settlement)) {
            let settlement = (back.0).1;
            if let Err(e) = rt.broker.settle(std::slice::from_ref(&settlement)).await {
                error!(queue = %settlement.lease.queue, task_id = %settlement.lease.task_id, error = %e, "could not settle; the task will run again after recovery");
            }
            rt.release(q, &settlement.lease.msg_id);
        }
    }
}

/// The settling loop: one `Consume::settle` per queue for every settlement waiting.
pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    rx: mpsc::UnboundedReceiver<(usize, Settlement)>,
) {
    // Shutdown: take no more, settle what is queued. Later settlements are settled directly.
    batches(
        &rt,
        rx,
        MAX_BATCH,
        |(_, s)| &s.lease.queue,
        |queue, batch| {
            let rt = &rt;
            async move { settle(rt, &queue, batch).await }
        },
    )
    .await
}

/// Settles, then lets the leases go. Settling again is a no-op, so retrying is always safe:
/// while the server runs, a transient error (a failover, a cut connection) is retried for as
/// long as it lasts, the heartbeat keeping the leases meanwhile, so a succeeded task is not
/// re-run and charged an attempt by the recoverer. Once shutdown has begun it tries a few times
/// only; then the tasks are re-delivered after recovery (at-least-once).
async fn settle<B: WorkerBroker>(
    rt: &Runtime<B>,
    queue: &QueueName,
    batch: Vec<(usize, Settlement)>,
) {
    let (slots, batch): (Vec<usize>, Vec<Settlement>) = batch.into_iter().unzip();
    let mut backoff = RETRY;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match rt.broker.settle(&batch).await {
            Ok(_) => break,
            Err(e) => {
                let stopping = rt.stop_maintenance.is_cancelled();
                warn!(queue = %queue, n = batch.len(), attempt, error = %e, "settling failed");
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
    for (q, s) in slots.into_iter().zip(&batch) {
        rt.release(q, &s.lease.msg_id);
    }
}

/// Hands deliveries back to their queue unstarted, without an attempt, in one call (they are
/// settled as [`End::Requeued`](chronos_core::End::Requeued)); how many went back. The caller
/// lets the leases go.
pub(crate) async fn requeue<B: WorkerBroker>(
    rt: &Runtime<B>,
    leases: impl IntoIterator<Item = LeaseId>,
) -> Result<u64, BrokerError> {
    let back: Vec<Settlement> = leases.into_iter().map(Settlement::requeued).collect();
    if back.is_empty() {
        return Ok(0);
    }
    let answers = rt.broker.settle(&back).await?;
    Ok(answers.iter().filter(|a| !a.is_stale()).count() as u64)
}
