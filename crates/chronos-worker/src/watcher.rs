//! One blocking read for every idle queue of the server ([`chronos_core::Consume::watch`]):
//! a fetcher whose queue ran dry parks here instead of blocking on its own connection, so an
//! idle server costs one read per block time whatever the number of its queues.
//!
//! Entries the read returns go into their queue's buffer exactly as a fetcher's own blocking
//! read would put them, and the queue's fetcher resumes its non-blocking reads; the dispatcher
//! serves buffers by weight or strict priority as before. Limited queues keep their own path
//! (limiter.rs) and never park. When the set of parked queues changes (a queue runs dry, a
//! pause or resume) or the server stops, the read in flight is cut short through the broker's
//! [`chronos_core::Interrupt`], which ends it as a timeout would: no entry is taken, so none
//! is stranded. A broker without an interrupt gets no shared read: each queue blocks alone.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chronos_core::{Interrupt, QueueName};
use tracing::{debug, warn};

use crate::backoff::Backoff;
use crate::park::Park;
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// Longest wait of one shared read (the broker may cap it lower). Long, because changes and
/// shutdown cut it short; each expiry costs one read.
const BLOCK: Duration = Duration::from_secs(5);
/// Most tasks taken per queue by one read (and never more in all than the free slots).
const MAX_BATCH: usize = 128;
/// The waits between tries of a failing shared read: 100 ms, doubling up to 2 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
/// The pauses between tries of a cut the store did not accept yet: 2 ms, doubling up to 200 ms.
const CUT_RETRY: Backoff = Backoff::new(Duration::from_millis(2), Duration::from_millis(200));

/// Reads every parked queue's stream at once, until fetching stops or the broker turns out
/// unable to.
pub(crate) async fn run<B: WorkerBroker>(
    rt: std::sync::Arc<Runtime<B>>,
    (mut reader, interrupt): (B::Reader, Interrupt),
) {
    let park = &rt.park;
    let mut backoff = RETRY;
    while !rt.stop_fetch.is_cancelled() {
        let watched = park.begin(&rt.queues);
        if watched.is_empty() {
            tokio::select! {
                _ = park.changed.notified() => {}
                _ = rt.stop_fetch.cancelled() => break,
            }
            continue;
        }
        let budget = budget(&rt);
        if budget == 0 {
            // Every slot is busy or already has a task waiting: reading now would only lease
            // tasks that other servers could start at once.
            park.end();
            tokio::select! {
                _ = rt.space.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = rt.stop_fetch.cancelled() => break,
            }
            continue;
        }
        let queues: Vec<QueueName> = watched.iter().map(|&q| rt.queues[q].name.clone()).collect();
        // COUNT applies to each stream: share the budget out, at least one each.
        let count = (budget / watched.len()).clamp(1, MAX_BATCH);
        let result = read(&rt, park, &interrupt, &mut reader, &queues, count).await;
        park.end();
        match result {
            Ok(Some(mut got)) => {
                backoff.reset();
                hand_back_surplus(&rt, &watched, &mut got, budget).await;
                for (i, fetched) in got {
                    let Some(&q) = watched.get(i) else { continue };
                    if fetched.dropped > 0 {
                        // Wake-up entries and the entries of deleted tasks: normal operation.
                        debug!(queue = %rt.queues[q].name, dropped = fetched.dropped, "dropped stream entries with no live task");
                    }
                    if !fetched.leases.is_empty() {
                        debug!(queue = %rt.queues[q].name, n = fetched.leases.len(), "fetched by the shared read");
                        rt.push(q, fetched.leases);
                    }
                    park.unpark(&rt.queues, q);
                }
            }
            Ok(None) => {
                // The broker cannot read these together after all: every fetcher reads alone.
                warn!("the broker cannot watch queues together; each queue blocks on its own");
                rt.watching.store(false, Ordering::Relaxed);
                park.release_all(&rt.queues);
                break;
            }
            Err(e) => {
                warn!(error = %e, "shared read of idle queues failed; retrying");
                // Let the fetchers retry their own reads meanwhile (each backs off alone).
                park.release_all(&rt.queues);
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next()) => {}
                    _ = rt.stop_fetch.cancelled() => break,
                }
            }
        }
    }
    park.release_all(&rt.queues);
    rt.broker.close_reader(reader).await;
}

/// How many deliveries the next shared read may keep: the free slots not already promised to a
/// buffered task. The slot the dispatcher holds while it waits for a task counts as free.
fn budget<B: WorkerBroker>(rt: &Runtime<B>) -> usize {
    let waiting = usize::from(rt.awaiting_task.load(Ordering::Relaxed));
    (rt.slots.available_permits() + waiting).saturating_sub(rt.buffered())
}

/// With more queues watched than the budget, one read can take a delivery from each: what goes
/// past the budget is handed back to its queue at once (unstarted, so no attempt is spent), for
/// this or another server to take when it has a slot. The queues of least weight give back
/// first (so strict priority still starts the most urgent task), the largest batch among
/// equals. Returns with `got` holding only the queues that kept something.
async fn hand_back_surplus<B: WorkerBroker>(
    rt: &Runtime<B>,
    watched: &[usize],
    got: &mut Vec<(usize, chronos_core::Fetched)>,
    budget: usize,
) {
    let total: usize = got.iter().map(|(_, f)| f.leases.len()).sum();
    let mut surplus = total.saturating_sub(budget);
    while surplus > 0 {
        let weight = |i: usize| watched.get(i).map_or(0, |&q| rt.queues[q].weight);
        let Some((i, fetched)) = got
            .iter_mut()
            .filter(|(_, f)| !f.leases.is_empty())
            .min_by_key(|(i, f)| (weight(*i), std::cmp::Reverse(f.leases.len())))
        else {
            break;
        };
        let Some(&q) = watched.get(*i) else { break };
        let n = surplus.min(fetched.leases.len());
        let back: Vec<_> = fetched
            .leases
            .split_off(fetched.leases.len() - n)
            .into_iter()
            .map(|l| l.id)
            .collect();
        surplus -= n;
        let queue = &rt.queues[q].name;
        debug!(queue = %queue, n, "shared read took more than the free slots; handing the rest back");
        if let Err(e) = crate::settler::requeue(rt, back).await {
            // Held by no one here: the recoverer re-delivers them, without an attempt.
            warn!(queue = %queue, n, error = %e, "could not hand surplus deliveries back; they will be recovered");
        }
    }
    // A queue whose whole batch went back stays parked: waking its fetcher would only have it
    // read one for itself.
    got.retain(|(_, f)| !f.leases.is_empty() || f.dropped > 0);
}

/// One shared read, cut short on request. The read itself is never dropped mid-flight (that
/// would lose what it took): a cut only asks the store to end it, and the read's answer is
/// always awaited.
async fn read<B: WorkerBroker>(
    rt: &Runtime<B>,
    park: &Park,
    interrupt: &Interrupt,
    reader: &mut B::Reader,
    queues: &[QueueName],
    count: usize,
) -> Result<Option<Vec<(usize, chronos_core::Fetched)>>, chronos_core::BrokerError> {
    let read = rt.broker.watch(reader, queues, &rt.id, count, BLOCK);
    tokio::pin!(read);
    // The store accepts the cut only once the read has reached it, so a cut asked for early
    // is retried, with a growing pause, until it lands or the read ends on its own.
    let mut wanted = false;
    let mut backoff = CUT_RETRY;
    // Taken ahead: the sleep below is built on every turn, polled only once a cut is wanted.
    let mut retry = backoff.next();
    loop {
        tokio::select! {
            biased;
            r = &mut read => return r,
            _ = rt.stop_fetch.cancelled(), if !wanted => wanted = true,
            _ = park.cut.notified(), if !wanted => wanted = true,
            _ = tokio::time::sleep(retry), if wanted => {
                if interrupt.fire().await {
                    // Ended: its (empty) answer comes next.
                    return read.await;
                }
                retry = backoff.next();
            }
        }
    }
}

/// Opens the shared reader and checks that the broker can watch queues together and cut a
/// read short; None when it cannot (Redis Cluster, a user not permitted CLIENT UNBLOCK, a
/// wrapper that does not forward `watch` or `interrupter`), so every fetcher blocks on its own
/// connection as before. Without a cut, a queue that parks during a read would wait for the
/// read's whole block time.
pub(crate) async fn open<B: WorkerBroker>(
    broker: &B,
    consumer: &str,
) -> Option<(B::Reader, Interrupt)> {
    let mut reader = match broker.open_reader().await {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "could not open the shared reader; each queue blocks on its own");
            return None;
        }
    };
    match broker
        .watch(&mut reader, &[], consumer, 1, Duration::ZERO)
        .await
    {
        Ok(Some(_)) => match broker.interrupter(&reader).await {
            Some(interrupt) => Some((reader, interrupt)),
            None => {
                broker.close_reader(reader).await;
                None
            }
        },
        _ => {
            broker.close_reader(reader).await;
            None
        }
    }
}
