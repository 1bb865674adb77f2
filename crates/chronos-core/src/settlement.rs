//! How a delivery ends, as data: a [`Settlement`] names the delivery ([`LeaseId`]), how it
//! ends ([`End`]) and what its attempt reports ([`AttemptReport`]); a store settles any number
//! of them in one call ([`Consume::settle`](crate::Consume::settle), or carried by the next
//! [`Consume::fetch`](crate::Consume::fetch)) and answers each with a [`Settled`]. A new way
//! for a task to end is a variant of [`End`] and of [`Settled`], not a method of every store
//! and wrapper.
//!
//! What every end guarantees:
//! * **Stale leases change nothing.** A settlement whose lease is no longer current (the task
//!   was reclaimed and delivered again, deleted, or settled by another delivery) is skipped,
//!   never a second transition; its answer says so.
//! * **Re-sending is safe.** A client re-sends a call whose reply was lost, and a caller may
//!   send a settlement again after an error: an end that took effect once takes no effect
//!   twice, and answers what its first run did (each end below says how).
//! * **Attempts.** Only [`End::Retried`] and [`End::DeadLettered`] with `count_attempt` count a
//!   failed attempt; a completion ends the attempt that succeeded; every other end spends none.
//! * **Locks.** An end that takes the task out of the queue for good (completed, dead-lettered,
//!   cancelled) releases its unique or deduplication lock, when the lease names it
//!   ([`LeaseId::unique_key`]); an end that puts it back keeps it.

use std::time::Duration;

use crate::LeaseId;

/// One delivery's end, with what its attempt reports: what a worker sends once per attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The delivery to settle.
    pub lease: LeaseId,
    /// How it ends.
    pub end: End,
    /// What the attempt reports for the task's attempt history (nothing for an end that
    /// records no attempt row, or a delivery that never ran).
    pub report: AttemptReport,
}

/// How a delivery ends. Non-exhaustive: a store written before a variant existed answers
/// [`BrokerError::Unsupported`](crate::BrokerError::Unsupported) for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum End {
    /// The handler succeeded: the delivery is acknowledged and the task deleted, or kept as
    /// completed for `retention` (the store's clock), with `result` readable by
    /// [`Client::result`](crate::Client::result) while it is kept. Its lock is released. A
    /// re-sent completion settles nothing twice; a retained one answers settled again (the
    /// record names the delivery that completed it). Answered [`Settled::Completed`].
    Completed {
        /// The handler's result (MessagePack); kept only with a retention (send none without).
        result: Option<Vec<u8>>,
        /// Keep the task as completed for this long (None: delete it at once).
        retention: Option<Duration>,
    },
    /// The attempt failed and counts: the failure is recorded with `error`, and the task is
    /// scheduled for its next attempt `delay` from now (the store's clock). It keeps its lock.
    /// A re-sent retry whose first run took effect answers not stale. Answered
    /// [`Settled::Retried`].
    Retried {
        /// Wait before the next attempt.
        delay: Duration,
        /// The failure, as recorded on the task.
        error: String,
    },
    /// The handler asked to run later: the task waits `delay` (the store's clock) as a
    /// scheduled one, keeps its level, tenant and lock, spends no attempt and records no error;
    /// its snooze count goes up by one, unless it reached `max_snoozes` already
    /// ([`SnoozeOutcome::TooMany`]: nothing changed, the caller dead-letters it). A re-sent
    /// snooze whose first run took effect answers what that run did. Answered
    /// [`Settled::Snoozed`].
    Snoozed {
        /// Wait before the task is run again.
        delay: Duration,
        /// The most snoozes the task may take.
        max_snoozes: u32,
    },
    /// The handler was rate limited: `scope` (the task's rate key, or its whole queue) is
    /// blocked cluster-wide until `delay` from now (the store's clock; clamped to
    /// [`MIN_BACKOFF`](crate::MIN_BACKOFF)..=[`MAX_BACKOFF`](crate::MAX_BACKOFF)) and the task is
    /// put back as scheduled, due at the block's end plus a jitter
    /// ([`backoff_jitter`](crate::backoff_jitter)), in one atomic step: no attempt spent, no
    /// error recorded, not counted as a snooze; a tenant task's slot is freed. A block only
    /// extends: one that already ends later is kept. A re-sent backoff whose first run took
    /// effect answers what that run did. Answered [`Settled::BackedOff`].
    BackedOff {
        /// What the block holds back.
        scope: BackoffScope,
        /// How long the block lasts.
        delay: Duration,
    },
    /// The task is dead-lettered (archived, or discarded when it asked so) with `error`, and its
    /// lock released; `count_attempt` says whether this failure counts as an attempt (false
    /// for a task that never ran: corrupt, past its deadline, too many snoozes). A re-sent
    /// dead letter whose first run took effect answers what that run did (never stale).
    /// Answered [`Settled::DeadLettered`].
    DeadLettered {
        /// Why, as recorded on the task.
        error: String,
        /// Whether this failure counts as an attempt.
        count_attempt: bool,
    },
    /// The handler said the task should not run (any more): neither a failure nor a dead
    /// letter. The task leaves its queue for the cancelled set
    /// ([`TaskState::Cancelled`](crate::TaskState::Cancelled)) with `reason`, its lock is
    /// released, and no attempt is counted. A re-sent cancel whose first run took effect
    /// answers what that run did (never stale). Answered [`Settled::Cancelled`].
    Cancelled {
        /// Why, as the handler said.
        reason: String,
    },
    /// A delivery fetched but not started (or stopped by shutdown before it could finish) is
    /// handed back: the task goes to the end of its queue without counting an attempt, and
    /// keeps its lock. A re-sent requeue puts nothing back twice (it answers stale). Answered
    /// [`Settled::Requeued`].
    Requeued,
}

/// What an attempt reports with its settlement, for the task's attempt history
/// ([`AttemptRow`](crate::AttemptRow)). It describes the attempt, not the delivery, so it
/// travels beside the lease rather than in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptReport {
    /// How long the handler ran (ms, the worker's clock), recorded as
    /// [`AttemptRow::ran_ms`](crate::AttemptRow::ran_ms). None when unknown.
    pub ran_ms: Option<u64>,
    /// The attempt's own log lines (the worker's capped, redacted buffer), recorded as
    /// [`AttemptRow::logs`](crate::AttemptRow::logs). None when it logged nothing.
    pub logs: Option<String>,
}

/// What a store did with one settlement: one answer per settlement, of the variant of its
/// [`End`]. Non-exhaustive, as [`End`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// Answer to [`End::Completed`].
    Completed {
        /// The lease was stale: nothing changed.
        stale: bool,
    },
    /// Answer to [`End::Retried`].
    Retried {
        /// The lease was stale: nothing changed.
        stale: bool,
    },
    /// Answer to [`End::Snoozed`].
    Snoozed(SnoozeOutcome),
    /// Answer to [`End::BackedOff`].
    BackedOff(BackoffOutcome),
    /// Answer to [`End::DeadLettered`].
    DeadLettered(DeadOutcome),
    /// Answer to [`End::Cancelled`].
    Cancelled(CancelOutcome),
    /// Answer to [`End::Requeued`].
    Requeued {
        /// The lease was stale (or the task was put back by an earlier run of the same call):
        /// nothing changed.
        stale: bool,
    },
}

impl Settled {
    /// True when the lease was stale and nothing changed.
    pub fn is_stale(&self) -> bool {
        match self {
            Settled::Completed { stale }
            | Settled::Retried { stale }
            | Settled::Requeued { stale } => *stale,
            Settled::Snoozed(o) => *o == SnoozeOutcome::Stale,
            Settled::BackedOff(o) => *o == BackoffOutcome::Stale,
            Settled::DeadLettered(o) => *o == DeadOutcome::Stale,
            Settled::Cancelled(o) => *o == CancelOutcome::Stale,
        }
    }
}

impl Settlement {
    /// Settles `lease` with `end`, reporting nothing of the attempt.
    pub fn new(lease: LeaseId, end: End) -> Self {
        Self {
            lease,
            end,
            report: AttemptReport::default(),
        }
    }

    /// A success: the task is deleted at once.
    pub fn completed(lease: LeaseId) -> Self {
        Self::new(
            lease,
            End::Completed {
                result: None,
                retention: None,
            },
        )
    }

    /// A success whose task is kept as completed for `retention`, with the handler's `result`.
    pub fn retained(lease: LeaseId, retention: Duration, result: Option<Vec<u8>>) -> Self {
        Self::new(
            lease,
            End::Completed {
                result,
                retention: Some(retention),
            },
        )
    }

    /// A failed attempt, tried again after `delay`.
    pub fn retried(lease: LeaseId, delay: Duration, error: impl Into<String>) -> Self {
        Self::new(
            lease,
            End::Retried {
                delay,
                error: error.into(),
            },
        )
    }

    /// A snooze of `delay`, refused past `max_snoozes`.
    pub fn snoozed(lease: LeaseId, delay: Duration, max_snoozes: u32) -> Self {
        Self::new(lease, End::Snoozed { delay, max_snoozes })
    }

    /// A backoff: `scope` blocked for `delay`, the task back for the block's end.
    pub fn backed_off(lease: LeaseId, scope: BackoffScope, delay: Duration) -> Self {
        Self::new(lease, End::BackedOff { scope, delay })
    }

    /// A dead letter with `error`; `count_attempt` says whether it counts as an attempt.
    pub fn dead_lettered(lease: LeaseId, error: impl Into<String>, count_attempt: bool) -> Self {
        Self::new(
            lease,
            End::DeadLettered {
                error: error.into(),
                count_attempt,
            },
        )
    }

    /// A cancel by the handler, with its `reason`.
    pub fn cancelled(lease: LeaseId, reason: impl Into<String>) -> Self {
        Self::new(
            lease,
            End::Cancelled {
                reason: reason.into(),
            },
        )
    }

    /// A delivery handed back unstarted.
    pub fn requeued(lease: LeaseId) -> Self {
        Self::new(lease, End::Requeued)
    }

    /// The same settlement, reporting `report` of its attempt.
    pub fn with_report(mut self, report: AttemptReport) -> Self {
        self.report = report;
        self
    }

    /// True for a completion whose only work is an acknowledgement: a plain task's delivery
    /// ([`LeaseId::is_plain`]) completed without a retention. A store can carry those in the
    /// fetch that follows at no cost of its own (Redis: in the claim call).
    pub fn is_bare_ack(&self) -> bool {
        matches!(
            self.end,
            End::Completed {
                retention: None,
                ..
            }
        ) && self.lease.is_plain()
    }
}

impl From<Completion> for Settlement {
    fn from(c: Completion) -> Self {
        Self::new(
            c.lease,
            End::Completed {
                result: c.result,
                retention: c.retention,
            },
        )
    }
}

/// A succeeded task to acknowledge, the shape [`SettleExt::complete`](crate::SettleExt::complete)
/// takes; it becomes an [`End::Completed`] settlement.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The delivery.
    pub lease: LeaseId,
    /// Keep the task as completed for this long (None: delete at once).
    pub retention: Option<Duration>,
    /// The handler's result (MessagePack), kept in the task's record while it is retained, so
    /// that [`crate::Client::result`] can read it. Ignored without a retention.
    pub result: Option<Vec<u8>>,
}

/// What a dead letter did ([`End::DeadLettered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadOutcome {
    /// Moved to the archive.
    Archived,
    /// Dropped, as the task asked.
    Discarded,
    /// The lease was stale: nothing changed.
    Stale,
}

/// What a cancel did ([`End::Cancelled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Ended as cancelled: in the queue's cancelled set, with the reason.
    Cancelled,
    /// The lease was stale: nothing changed.
    Stale,
}

/// What a snooze did ([`End::Snoozed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnoozeOutcome {
    /// Back in the scheduled set, due after the delay; `snoozes` counts this one.
    Snoozed {
        /// Times the task has been snoozed, this one included.
        snoozes: u32,
    },
    /// Refused: the task has been snoozed `snoozes` times, the most allowed. Nothing changed;
    /// the caller dead-letters it.
    TooMany {
        /// Times the task has been snoozed.
        snoozes: u32,
    },
    /// The lease was stale: nothing changed.
    Stale,
}

/// What a handler-signalled backoff blocks ([`End::BackedOff`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackoffScope {
    /// Every task of this rate key in the task's queue: fetched deliveries of the key are held
    /// back (moved once to the scheduled set) until the block ends.
    Key(String),
    /// The whole queue: workers on every server stop fetching it until the block ends.
    Queue,
}

/// What a backoff did ([`End::BackedOff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackoffOutcome {
    /// The block is set (or was already set to end later: a block only ever extends) and the
    /// task is back in the scheduled set with no attempt spent and no error recorded.
    Blocked {
        /// When the block ends (unix ms, store clock): the later of the old and the new end.
        until_ms: i64,
        /// When the task itself is due again (unix ms): `until_ms` plus a jitter.
        due_ms: i64,
    },
    /// The lease was stale: nothing changed (no block set either).
    Stale,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QueueName;

    fn lease(task_id: &str, msg_id: &str) -> LeaseId {
        LeaseId::new(QueueName::new("q").unwrap(), task_id, msg_id)
    }

    #[test]
    fn only_a_plain_completion_without_retention_is_a_bare_ack() {
        let plain = lease("1-0", "1-0");
        let named = lease("job", "1-0");
        assert!(Settlement::completed(plain.clone()).is_bare_ack());
        assert!(!Settlement::completed(named).is_bare_ack());
        assert!(!Settlement::retained(plain.clone(), Duration::from_secs(1), None).is_bare_ack());
        assert!(!Settlement::requeued(plain).is_bare_ack());
    }

    #[test]
    fn a_completion_becomes_a_completed_settlement() {
        let s = Settlement::from(Completion {
            lease: lease("job", "1-0"),
            retention: Some(Duration::from_secs(5)),
            result: Some(vec![1]),
        });
        assert_eq!(
            s.end,
            End::Completed {
                result: Some(vec![1]),
                retention: Some(Duration::from_secs(5))
            }
        );
        assert_eq!(s.report, AttemptReport::default());
    }

    #[test]
    fn every_stale_answer_says_so() {
        for a in [
            Settled::Completed { stale: true },
            Settled::Retried { stale: true },
            Settled::Requeued { stale: true },
            Settled::Snoozed(SnoozeOutcome::Stale),
            Settled::BackedOff(BackoffOutcome::Stale),
            Settled::DeadLettered(DeadOutcome::Stale),
            Settled::Cancelled(CancelOutcome::Stale),
        ] {
            assert!(a.is_stale(), "{a:?}");
        }
        assert!(!Settled::Snoozed(SnoozeOutcome::TooMany { snoozes: 3 }).is_stale());
        assert!(!Settled::DeadLettered(DeadOutcome::Discarded).is_stale());
    }
}
