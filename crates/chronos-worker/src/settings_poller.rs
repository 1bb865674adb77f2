//! Keeps the settings of each queue stored in Redis ([`chronos_core::Settings`]) in force: the
//! limits they give (`Runtime::set_limit`), so that an operator's change (CLI, console) reaches
//! every running server within a bound, without a restart. Stored values override the server's
//! configuration field by field.
//!
//! With a broker that pushes signals, a change is read when its push arrives (within a fetch
//! round, so about a second), every queue after a reconnect of the subscriber (a push may have
//! been lost), and one queue per [`SETTINGS_POLL`] in turn besides, as a safety net: an idle
//! server costs one small `HGETALL` per period however many queues it serves. Without signals
//! every queue is read every period. Off the fetch path either way: a queue with neither a
//! configured nor a stored limit still fetches exactly as before. A queue that gets a limit
//! while it runs switches its fetcher to the limited path (a fetcher parked in the shared idle
//! read is woken for it; what a read already in flight takes for that queue runs without a
//! permit, once).

use std::sync::Arc;
use std::time::Duration;

use chronos_core::{QueueSettings, Signal};
use tracing::{info, warn};

use crate::loops::Turn;
use crate::runtime::Runtime;
use crate::{QueueLimit, WorkerBroker};

/// How often stored settings are read without a push: every queue (no signals), or the next
/// queue in turn (with signals).
pub(crate) const SETTINGS_POLL: Duration = Duration::from_secs(1);

/// The stored settings of every queue, read at start (before the fetchers choose their path).
/// A queue whose settings cannot be read starts as configured; the poller retries.
pub(crate) async fn read_all<B: WorkerBroker>(
    broker: &B,
    queues: &[(chronos_core::QueueName, u32)],
) -> Vec<QueueSettings> {
    let mut out = Vec::with_capacity(queues.len());
    for (queue, _) in queues {
        out.push(match broker.queue_settings(queue).await {
            Ok(s) => s,
            Err(e) => {
                warn!(queue = %queue, error = %e, "could not read stored queue settings; starting with the configured limits");
                QueueSettings::default()
            }
        });
    }
    out
}

/// The poll loop, until the maintenance loops stop.
pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    let mut signals = match rt.broker.signals().await {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "could not subscribe to settings pushes; reading every queue's settings each second");
            None
        }
    };
    // Changes made before the subscription are not pushed: read everything once.
    if signals.is_some() {
        refresh(&rt, 0..rt.queues.len()).await;
    }
    let mut tick = tokio::time::interval(SETTINGS_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    let mut turn = Turn::default();
    loop {
        let pushed = async {
            match signals.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tick.tick() => {
                if signals.is_some() {
                    if let Some(q) = turn.next(rt.queues.len()) {
                        refresh(&rt, q..q + 1).await;
                    }
                } else {
                    refresh(&rt, 0..rt.queues.len()).await;
                }
            }
            s = pushed => match s {
                Some(Signal::Settings { queue }) => {
                    if let Some(q) = rt.queue_index(&queue) {
                        refresh(&rt, q..q + 1).await;
                        // An unblock, or a new lane (claim.lua's `announce_lane`), says so
                        // too: a blocked fetcher reads again, a parked one learns the lanes.
                        rt.queues[q].lifted.notify_one();
                        rt.park.relearn(&rt.queues, q);
                    }
                }
                Some(Signal::Resync) => {
                    refresh(&rt, 0..rt.queues.len()).await;
                    for (q, slot) in rt.queues.iter().enumerate() {
                        slot.lifted.notify_one();
                        rt.park.relearn(&rt.queues, q);
                    }
                }
                Some(Signal::Due { .. } | Signal::Paused) => {}
                None => {
                    warn!("the signal subscriber is gone; reading every queue's settings each second");
                    signals = None;
                }
            },
            _ = rt.stop_maintenance.cancelled() => return,
        }
    }
}

/// Reads the stored settings of the queues at `range` (their indexes) and puts their limits in
/// force.
async fn refresh<B: WorkerBroker>(rt: &Runtime<B>, range: std::ops::Range<usize>) {
    let reads = rt.queues[range.clone()]
        .iter()
        .map(|slot| rt.broker.queue_settings(&slot.name));
    let results = futures::future::join_all(reads).await;
    for (q, result) in range.zip(results) {
        let slot = &rt.queues[q];
        let stored = match result {
            Ok(s) => s,
            Err(e) => {
                // Keep what is in force: a guess about a limit is worse than the last one read.
                warn!(queue = %slot.name, error = %e, "could not read stored queue settings; keeping the limits in force");
                continue;
            }
        };
        let configured = rt.config.limit_of(slot.name.as_str());
        let limit = QueueLimit::with_stored(configured, &stored);
        if rt.set_limit(q, limit) {
            info!(queue = %slot.name, ?limit, "queue limits changed");
            // A parked fetcher of a queue that had no limit takes the limited path now.
            if slot.limit.is_none() && limit.is_some() {
                rt.park.unpark(&rt.queues, q);
            }
        }
    }
}
