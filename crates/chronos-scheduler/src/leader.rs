//! The leader loop: follows until the lock is free, leads a term (see `firing`) while it holds
//! the lease (see `election`), and starts over when the term ends.

use std::sync::Arc;

use chronos_core::{ManageSchedules, Schedules};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info_span, warn, Instrument};

use crate::election::{End, Lease};
use crate::firing;
use crate::metrics;
use crate::shared::{ResignRequest, Shared};

/// Runs elections and terms until the scheduler stops.
pub(crate) async fn run<B: Schedules + ManageSchedules + Clone + 'static>(
    sh: Arc<Shared<B>>,
    mut resign_rx: mpsc::Receiver<ResignRequest>,
) {
    let token = format!("{}:{:016x}", sh.instance, rand::random::<u64>());
    let ttl = sh.config.leader_ttl;
    let mut resignations = match sh.broker.resignations().await {
        Ok(rx) => Some(rx),
        Err(e) => {
            warn!(error = %e, "no resign notifications; followers poll the lock only");
            None
        }
    };
    let mut cooldown_until: Option<Instant> = None;
    // The highest fence seen above our own epoch: the next acquisition takes an epoch above it.
    let mut min_epoch = 0;
    while !sh.stop.is_cancelled() {
        if cooldown_until.is_none_or(|t| Instant::now() >= t) {
            match Lease::acquire(&sh, &token, min_epoch).await {
                Ok(Some(lease)) => {
                    let epoch = lease.epoch();
                    let end = firing::term(&sh, lease, &mut resign_rx)
                        .instrument(info_span!("leader", instance = %sh.instance, epoch))
                        .await;
                    cooldown_until = None;
                    match end {
                        // After handing over, stay out for one TTL so a follower takes the lock.
                        End::Resigned => cooldown_until = Some(Instant::now() + ttl),
                        End::Fenced(fence) => min_epoch = min_epoch.max(fence),
                        End::Lost => {}
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => warn!(error = %e, "leader election failed; retrying"),
            }
        }
        // A follower polls at half the TTL (pub/sub is only a hint and can be missed) and wakes
        // at once on a resign message.
        metrics::leader(false);
        tokio::select! {
            _ = tokio::time::sleep(ttl / 2) => {}
            _ = recv(&mut resignations) => {}
            Some(reply) = resign_rx.recv() => { let _ = reply.send(Ok(false)); }
            _ = sh.stop.cancelled() => return,
        }
    }
}

/// The next resign message; never, once the subscription is gone.
async fn recv(rx: &mut Option<mpsc::Receiver<()>>) {
    match rx {
        Some(r) => {
            if r.recv().await.is_none() {
                *rx = None;
            }
        }
        None => std::future::pending().await,
    }
}
