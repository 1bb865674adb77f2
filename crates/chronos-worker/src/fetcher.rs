//! One fetcher per queue fills that queue's prefetch buffer; it fetches only as many tasks as
//! there are free slots, so deliveries do not sit leased here while other servers are idle.
//! When its queue has nothing ready it parks, and the server's one shared blocking read waits
//! for all parked queues together (watcher.rs). Where the broker cannot read queues together
//! (Redis Cluster), and for limited queues, it blocks on its own reader connection instead.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn};

use crate::WorkerBroker;

use crate::backoff::Backoff;
use crate::limiter;
use crate::runtime::Runtime;
use crate::settler::{self, stop_carrying};
use crate::QueueLimit;

/// Longest wait of one blocking read. Short, because shutdown waits for the read in flight
/// (cancelling it mid-flight would strand entries in this consumer's PEL until reclaimed).
const BLOCK: Duration = Duration::from_millis(1000);
/// Most tasks taken by one read.
const MAX_BATCH: usize = 128;
/// The waits between tries of a failing open or read: 100 ms, doubling up to 2 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>, q: usize) {
    let queue = rt.queues[q].name.clone();
    let mut backoff = RETRY;
    let mut reader = loop {
        match rt.broker.open_reader().await {
            Ok(r) => break r,
            Err(e) => {
                warn!(queue = %queue, error = %e, "could not open a reader; retrying");
                if sleep_or_stop(&rt, backoff.next()).await {
                    return;
                }
            }
        }
    };
    if let Err(e) = rt.broker.ensure_queue(&queue).await {
        warn!(queue = %queue, error = %e, "could not register the queue; the first fetch will retry");
    }
    // Deliveries of a limited queue taken without a permit yet (see limiter.rs).
    let mut waiting = Vec::new();
    // A read that carried settlements took tasks: the counts of those completions may wait in
    // the store until a read takes nothing (Consume::fetch).
    let mut owes = false;
    while !rt.stop_fetch.is_cancelled() {
        if rt.is_paused(q) {
            stop_carrying(&rt, q).await;
            // Release a dispatcher that drew this queue before the pause.
            rt.mark_drained(q);
            if sleep_or_stop(&rt, Duration::from_millis(200)).await {
                break;
            }
            continue;
        }
        let free = rt.slots.available_permits().saturating_sub(rt.buffered());
        if free == 0 && rt.buffered_in(q) > 0 {
            // Every slot is busy or already has a task waiting: wait for one to free up.
            tokio::select! {
                _ = rt.space.notified() => {}
                // No slot for a while: the settlements waiting for a read go to the loop.
                _ = tokio::time::sleep(Duration::from_millis(50)) => {
                    settler::flush(&rt, q).await;
                }
                _ = rt.stop_fetch.cancelled() => break,
            }
            continue;
        }
        let count = free.clamp(1, MAX_BATCH);
        // Limited by config or stored settings, now or at start (a lifted limit finishes its
        // round there and hands back what waits); a queue limited at run time switches here.
        let limited = rt.queues[q].limit.or_else(|| {
            (rt.limit_of(q).is_some() || !waiting.is_empty()).then(QueueLimit::default)
        });
        if let Some(limit) = limited {
            stop_carrying(&rt, q).await;
            match limiter::round(&rt, &mut reader, q, limit, count, BLOCK, &mut waiting).await {
                Ok(()) => backoff.reset(),
                Err(e) => {
                    warn!(queue = %queue, error = %e, "fetch of a limited queue failed; retrying");
                    rt.mark_drained(q);
                    if sleep_or_stop(&rt, backoff.next()).await {
                        break;
                    }
                }
            }
            continue;
        }
        // Try a read that returns at once first, so "this queue is empty" is known without a
        // block (strict priority depends on it); block only when it found nothing. It carries
        // the settlements waiting for it.
        let (carried, mut result) = settler::read(&rt, &mut reader, q, count).await;
        if carried > 0 && matches!(&result, Ok(f) if !f.leases.is_empty()) {
            owes = true;
        }
        if matches!(&result, Ok(f) if f.leases.is_empty()) {
            owes = false;
        }
        if let Ok(f) = &result {
            if f.blocked_until_ms.is_some() {
                // Blocked by a handler (TaskError::rate_limited): neither read nor wait on it
                // (not parked either, so the shared read does not take its tasks) until then.
                rt.mark_drained(q);
                stop_carrying(&rt, q).await;
                limiter::blocked_wait(&rt, q, f.blocked_until_ms).await;
                continue;
            }
        }
        if matches!(&result, Ok(f) if f.leases.is_empty()) {
            // No read comes at once now: nothing waits for one.
            stop_carrying(&rt, q).await;
            rt.mark_drained(q);
            if rt.watching.load(Ordering::Relaxed) {
                // The shared read waits for this queue (with every other idle one) and puts
                // what it reads in this queue's buffer; then read on from here.
                rt.park.park(&rt.queues, q);
                tokio::select! {
                    _ = rt.queues[q].woken.notified() => {}
                    _ = rt.stop_fetch.cancelled() => break,
                }
                continue;
            }
            result = rt
                .broker
                .fetch(&mut reader, &queue, &rt.id, &[], count, BLOCK)
                .await;
        }
        match result {
            Ok(fetched) => {
                backoff.reset();
                if fetched.dropped > 0 {
                    // Wake-up entries and the entries of deleted tasks: normal operation.
                    debug!(queue = %queue, dropped = fetched.dropped, "dropped stream entries with no live task");
                }
                if fetched.blocked_until_ms.is_some() {
                    rt.mark_drained(q);
                    stop_carrying(&rt, q).await;
                    limiter::blocked_wait(&rt, q, fetched.blocked_until_ms).await;
                    continue;
                }
                let mut leases = fetched.leases;
                if fetched.key_blocks {
                    // Some rate keys are blocked: their deliveries wait for the block's end.
                    rt.hold(q, &leases);
                    leases = match limiter::check_keys(&rt, q, Some(limiter::BLOCKS_ONLY), leases)
                        .await
                    {
                        Ok(run) => run,
                        Err((e, all)) => {
                            warn!(queue = %queue, error = %e, "could not check blocked rate keys; running the tasks");
                            all
                        }
                    };
                }
                if !leases.is_empty() {
                    debug!(queue = %queue, n = leases.len(), "fetched");
                    rt.push(q, leases);
                }
            }
            Err(e) => {
                warn!(queue = %queue, error = %e, "fetch failed; retrying");
                stop_carrying(&rt, q).await;
                // Until a read succeeds this queue has nothing to offer: a dispatcher waiting
                // for it must draw another, or one unreachable queue would stall them all.
                rt.mark_drained(q);
                if sleep_or_stop(&rt, backoff.next()).await {
                    break;
                }
            }
        }
    }
    // The last read: it settles what still waits and pays the counts owed, taking nothing.
    settler::last_read(&rt, &mut reader, q, owes).await;
    limiter::hand_back(&rt, q, waiting).await;
    rt.broker.close_reader(reader).await;
}

/// Sleeps `d`; true when fetching was stopped meanwhile.
async fn sleep_or_stop<B: WorkerBroker>(rt: &Runtime<B>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = rt.stop_fetch.cancelled() => true,
    }
}
