//! Reads the settings of each queue stored in Redis ([`chronos_core::Settings`]) every
//! [`SETTINGS_POLL`] and puts the limits they give in force (`Runtime::set_limit`), so that an
//! operator's change (CLI, console) reaches every running server within a bound, without a
//! restart. Stored values override the server's configuration field by field.
//!
//! The read is one small `HGETALL` per queue per period, off the fetch path: a queue with
//! neither a configured nor a stored limit still fetches exactly as before. A queue that gets
//! a limit while it runs switches its fetcher to the limited path (a fetcher parked in the
//! shared idle read is woken for it; what a read already in flight takes for that queue runs
//! without a permit, once).

use std::sync::Arc;
use std::time::Duration;

use chronos_core::QueueSettings;
use tracing::{info, warn};

use crate::runtime::Runtime;
use crate::{QueueLimit, WorkerBroker};

/// How often the stored settings are read: a change applies within this plus one fetch round
/// (a blocking read of at most a second; a round asleep for permits is woken by the change),
/// so within about two seconds.
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
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SETTINGS_POLL) => {}
            _ = rt.stop_maintenance.cancelled() => return,
        }
        let reads = rt
            .queues
            .iter()
            .map(|slot| rt.broker.queue_settings(&slot.name));
        let results = futures::future::join_all(reads).await;
        for (q, result) in results.into_iter().enumerate() {
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
}
