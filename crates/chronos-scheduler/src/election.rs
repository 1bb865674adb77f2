//! The leadership lease: one leader at a time, through a Redis lock (`SET NX PX`) that the
//! leader renews by compare-and-renew, an epoch per acquisition that fences a deposed leader
//! off from the queues it fired in, and a release (compare-and-delete plus a wake-up message
//! for the followers) when a term ends.
//!
//! A leader fires only while it can prove it holds the lock: the lease counts its validity
//! from the moment it *asked* for the lock (or a renewal), minus a margin, so a leader whose
//! renewals stall stops firing before the lock can have expired and passed to another.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chronos_core::{BrokerError, QueueName, Schedules};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::metrics;
use crate::schedule::Schedule;
use crate::shared::Shared;

/// Why a term has to end.
#[derive(Debug)]
pub(crate) enum Term {
    /// Shutdown: hand the lock over.
    Resign,
    /// Lost the lock, or could not prove it still held it.
    Lost,
    /// A fire call was refused by a fence above this epoch.
    Stale,
    /// Raising a fence found one above this epoch.
    Fenced(u64),
}

/// How a leadership term ended.
#[derive(Debug)]
pub(crate) enum End {
    /// Resigned (shutdown or on request).
    Resigned,
    /// Lost the lock, or could not prove it still held it.
    Lost,
    /// A fence above its epoch was found: a newer leader exists, or the epoch counter was lost
    /// (a Redis shard restarted empty). The lock is released and the next term starts above it.
    Fenced(u64),
}

/// The lock held for one term, with its epoch (the fence token of every fire call).
#[derive(Debug)]
pub(crate) struct Lease {
    token: String,
    epoch: u64,
    ttl: Duration,
    /// Past this instant the lock may have expired: stop firing unless a renewal extends it.
    valid_until: Instant,
    renew_at: Instant,
    /// The queues whose fence this term raised to its epoch.
    queues: Vec<QueueName>,
}

impl Lease {
    /// Takes the lock if it is free, with an epoch above `min_epoch`. None: another instance
    /// holds it.
    pub(crate) async fn acquire<B: Schedules>(
        sh: &Shared<B>,
        token: &str,
        min_epoch: u64,
    ) -> Result<Option<Lease>, BrokerError> {
        let ttl = sh.config.leader_ttl;
        let asked = Instant::now();
        let Some(epoch) = sh
            .broker
            .acquire_leadership(token, &sh.instance, ttl, min_epoch)
            .await?
        else {
            return Ok(None);
        };
        // The lock was set after `asked`, so it lives at least until asked + ttl; keep a margin
        // for clock-rate differences.
        Ok(Some(Lease {
            token: token.to_string(),
            epoch,
            ttl,
            valid_until: asked + ttl * 9 / 10,
            renew_at: asked + ttl / 2,
            queues: Vec::new(),
        }))
    }

    /// The epoch of this term.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// When the next renewal is due: a term sleeps no longer than this.
    pub(crate) fn renew_at(&self) -> Instant {
        self.renew_at
    }

    /// Marks this instance as leading (stats, gauge, log) at the start of a term.
    pub(crate) fn announce<B>(&self, sh: &Shared<B>) {
        let c = &sh.counters;
        c.is_leader.store(true, Ordering::SeqCst);
        c.epoch.store(self.epoch, Ordering::SeqCst);
        c.elections_won.fetch_add(1, Ordering::Relaxed);
        metrics::leader(true);
        info!("became scheduler leader");
    }

    /// Renews the lock when the renewal is due, then checks it is still provably held.
    /// `Err(Term::Lost)`: the lock is gone, or no renewal succeeded in time.
    pub(crate) async fn keep<B: Schedules>(&mut self, sh: &Shared<B>) -> Result<(), Term> {
        let ttl = self.ttl;
        if Instant::now() >= self.renew_at {
            let t0 = Instant::now();
            match sh.broker.renew_leadership(&self.token, ttl).await {
                Ok(true) => {
                    metrics::leader(true);
                    self.valid_until = t0 + ttl * 9 / 10;
                    self.renew_at = t0 + ttl / 2;
                }
                Ok(false) => return Err(Term::Lost),
                Err(e) => {
                    warn!(error = %e, "could not renew the leader lock");
                    // Retry soon: the lease is still valid for a while, and one lost reply
                    // must not cost the term.
                    self.renew_at = Instant::now() + (ttl / 10).min(Duration::from_millis(200));
                }
            }
        }
        if Instant::now() >= self.valid_until {
            warn!("leader lock not renewed in time; stepping down");
            return Err(Term::Lost);
        }
        Ok(())
    }

    /// Raises to this epoch the fence of every queue of `set` not fenced yet in this term: a
    /// paused, deposed leader that wakes up is then refused in those queues too.
    pub(crate) async fn fence<B: Schedules>(
        &mut self,
        sh: &Shared<B>,
        set: &[Schedule],
    ) -> Result<(), Term> {
        let mut new: Vec<QueueName> = set
            .iter()
            .map(|s| s.queue.clone())
            .filter(|q| !self.queues.contains(q))
            .collect();
        new.sort();
        new.dedup();
        let mut highest = self.epoch;
        for q in &new {
            match sh.broker.fence(q, self.epoch).await {
                Ok(fence) => highest = highest.max(fence),
                Err(e) => {
                    warn!(queue = %q, error = %e, "could not raise the fence; fire calls still check it")
                }
            }
        }
        self.queues.extend(new);
        self.queues.sort();
        if highest > self.epoch {
            return Err(Term::Fenced(highest));
        }
        Ok(())
    }

    /// Ends the term on request: stops counting as leader, then releases the lock and says
    /// whether that worked.
    pub(crate) async fn resign<B: Schedules>(
        &self,
        sh: &Shared<B>,
    ) -> (End, Result<bool, BrokerError>) {
        unmark(sh);
        let released = sh.broker.resign_leadership(&self.token).await;
        match &released {
            Ok(_) => info!("resigned the scheduler leadership"),
            Err(e) => warn!(error = %e, "could not release the lock; it expires by itself"),
        }
        (End::Resigned, released)
    }

    /// Ends the term for `term`'s reason.
    pub(crate) async fn step_down<B: Schedules>(self, sh: &Shared<B>, term: Term) -> End {
        unmark(sh);
        match term {
            Term::Resign => self.resign(sh).await.0,
            Term::Lost => {
                warn!("lost the scheduler leadership");
                End::Lost
            }
            Term::Fenced(fence) => {
                self.release(sh).await;
                warn!(
                    fence,
                    "a fence above this epoch exists; re-electing above it"
                );
                End::Fenced(fence)
            }
            Term::Stale => {
                // Learn the fence that refused us, so a lost epoch counter is passed next time.
                let mut fence = 0;
                for q in &self.queues {
                    if let Ok(f) = sh.broker.fence(q, 0).await {
                        fence = fence.max(f);
                    }
                }
                self.release(sh).await;
                warn!(fence, "a newer epoch fenced this leader off; stepping down");
                End::Fenced(fence)
            }
        }
    }

    /// Compare-and-delete of the lock: a no-op when it already belongs to someone else.
    async fn release<B: Schedules>(&self, sh: &Shared<B>) {
        if let Err(e) = sh.broker.resign_leadership(&self.token).await {
            warn!(error = %e, "could not release the lock; it expires by itself");
        }
    }
}

/// Stops counting this instance as leader (stats and gauges).
fn unmark<B>(sh: &Shared<B>) {
    let c = &sh.counters;
    c.is_leader.store(false, Ordering::SeqCst);
    c.epoch.store(0, Ordering::SeqCst);
    metrics::leader(false);
    metrics::adopted(0);
}
