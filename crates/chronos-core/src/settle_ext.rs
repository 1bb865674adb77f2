//! The per-end calls, one settlement at a time, on top of [`Consume::settle`]: what tests and
//! tools write when they settle by hand. Not a capability: a store implements `settle` alone,
//! and every [`Consume`] gets these.

use std::future::Future;
use std::time::Duration;

use crate::{
    BackoffOutcome, BackoffScope, BrokerError, CancelOutcome, Completion, Consume, DeadOutcome,
    LeaseId, QueueName, Settled, Settlement, SnoozeOutcome,
};

/// One method per [`End`](crate::End), each building its [`Settlement`] and answering as the
/// per-end methods of `Consume` did before settlements were data. Each end's guarantees are
/// those of its variant. Implemented for every [`Consume`]; there is nothing to implement.
pub trait SettleExt: Consume {
    /// Acknowledges succeeded tasks ([`End::Completed`](crate::End::Completed)); returns how many
    /// were settled (stale leases are skipped). `queue` is the queue of `done`'s leases (each
    /// lease names its own; a store settles each in the queue its lease names).
    fn complete(
        &self,
        queue: &QueueName,
        done: &[Completion],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        let _ = queue;
        let all: Vec<Settlement> = done.iter().cloned().map(Settlement::from).collect();
        async move {
            let answers = self.settle(&all).await?;
            count(&all, answers, |a| match a {
                Settled::Completed { stale } => Some(!stale),
                _ => None,
            })
        }
    }

    /// Records a failed attempt and schedules the next one `delay` from now
    /// ([`End::Retried`](crate::End::Retried)). False when the lease was stale.
    fn retry(
        &self,
        lease: &LeaseId,
        delay: Duration,
        error: &str,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send {
        let one = Settlement::retried(lease.clone(), delay, error);
        async move {
            match self.settle_one(one).await? {
                Settled::Retried { stale } => Ok(!stale),
                other => Err(mismatch("a retry", &other)),
            }
        }
    }

    /// Puts a running task back for `delay`, at most `max_snoozes` times
    /// ([`End::Snoozed`](crate::End::Snoozed)).
    fn snooze(
        &self,
        lease: &LeaseId,
        delay: Duration,
        max_snoozes: u32,
    ) -> impl Future<Output = Result<SnoozeOutcome, BrokerError>> + Send {
        let one = Settlement::snoozed(lease.clone(), delay, max_snoozes);
        async move {
            match self.settle_one(one).await? {
                Settled::Snoozed(o) => Ok(o),
                other => Err(mismatch("a snooze", &other)),
            }
        }
    }

    /// Blocks `scope` for `delay` and puts the task back for the block's end
    /// ([`End::BackedOff`](crate::End::BackedOff)).
    fn back_off(
        &self,
        lease: &LeaseId,
        scope: &BackoffScope,
        delay: Duration,
    ) -> impl Future<Output = Result<BackoffOutcome, BrokerError>> + Send {
        let one = Settlement::backed_off(lease.clone(), scope.clone(), delay);
        async move {
            match self.settle_one(one).await? {
                Settled::BackedOff(o) => Ok(o),
                other => Err(mismatch("a backoff", &other)),
            }
        }
    }

    /// Dead-letters the task ([`End::DeadLettered`](crate::End::DeadLettered)).
    fn dead_letter(
        &self,
        lease: &LeaseId,
        error: &str,
        count_attempt: bool,
    ) -> impl Future<Output = Result<DeadOutcome, BrokerError>> + Send {
        let one = Settlement::dead_lettered(lease.clone(), error, count_attempt);
        async move {
            match self.settle_one(one).await? {
                Settled::DeadLettered(o) => Ok(o),
                other => Err(mismatch("a dead letter", &other)),
            }
        }
    }

    /// Ends the task as cancelled by its handler ([`End::Cancelled`](crate::End::Cancelled)).
    fn cancel(
        &self,
        lease: &LeaseId,
        reason: &str,
    ) -> impl Future<Output = Result<CancelOutcome, BrokerError>> + Send {
        let one = Settlement::cancelled(lease.clone(), reason);
        async move {
            match self.settle_one(one).await? {
                Settled::Cancelled(o) => Ok(o),
                other => Err(mismatch("a cancel", &other)),
            }
        }
    }

    /// Puts fetched but unstarted tasks back at the end of their queue without counting an
    /// attempt ([`End::Requeued`](crate::End::Requeued)); returns how many were re-queued.
    /// `queue` is the queue of the leases, as for [`SettleExt::complete`].
    fn requeue(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        let _ = queue;
        let all: Vec<Settlement> = leases.iter().cloned().map(Settlement::requeued).collect();
        async move {
            let answers = self.settle(&all).await?;
            count(&all, answers, |a| match a {
                Settled::Requeued { stale } => Some(!stale),
                _ => None,
            })
        }
    }

    /// Settles one settlement; its answer.
    fn settle_one(
        &self,
        settlement: Settlement,
    ) -> impl Future<Output = Result<Settled, BrokerError>> + Send {
        async move {
            let mut answers = self.settle(std::slice::from_ref(&settlement)).await?;
            match answers.len() {
                1 => Ok(answers.remove(0)),
                n => Err(BrokerError::Protocol {
                    context: "settle",
                    detail: format!("{n} answers to one settlement"),
                }),
            }
        }
    }
}

impl<C: Consume + ?Sized> SettleExt for C {}

/// How many of `answers` say settled, each checked to be of the variant `settled` reads.
fn count(
    asked: &[Settlement],
    answers: Vec<Settled>,
    settled: impl Fn(&Settled) -> Option<bool>,
) -> Result<u64, BrokerError> {
    if answers.len() != asked.len() {
        return Err(BrokerError::Protocol {
            context: "settle",
            detail: format!("{} answers to {} settlements", answers.len(), asked.len()),
        });
    }
    let mut n = 0;
    for a in &answers {
        match settled(a) {
            Some(true) => n += 1,
            Some(false) => {}
            None => return Err(mismatch("a batch", a)),
        }
    }
    Ok(n)
}

/// A store answered a settlement with another end's answer.
fn mismatch(asked: &str, answer: &Settled) -> BrokerError {
    BrokerError::Protocol {
        context: "settle",
        detail: format!("{answer:?} answered to {asked}"),
    }
}
