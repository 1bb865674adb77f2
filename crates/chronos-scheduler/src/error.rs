use std::convert::Infallible;

use crate::spec::SpecError;

/// Errors of the scheduler's API. Registration errors are permanent; [`SchedulerError::Broker`]
/// may be transient (see [`chronos_broker::BrokerError::is_transient`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerError {
    /// The interval, cron expression or zone is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Two schedules share one id.
    #[error("a schedule with id {0:?} is already registered")]
    DuplicateSchedule(String),
    /// An option is out of range (queue name, schedule id, leader TTL).
    #[error("invalid schedule option: {0}")]
    InvalidOption(String),
    /// No runtime schedule has this id. Permanent.
    #[error("no runtime schedule {0:?}")]
    UnknownSchedule(String),
    /// A different runtime schedule with this id is stored. Permanent (update it instead).
    #[error("a different runtime schedule {0:?} exists; update it instead")]
    ScheduleExists(String),
    /// A schedule registered in code uses this id; runtime changes of it are refused.
    /// Permanent while that schedule is registered.
    #[error("schedule {0:?} is registered in code; it cannot be changed at run time")]
    CodeSchedule(String),
    /// The stored definition kept changing under concurrent changes. Transient.
    #[error("runtime schedule {0:?} kept changing concurrently; try again")]
    Contended(String),
    /// The schedule's enqueue options ask for `durable` (a `WAIT` for replicas), which the
    /// scheduler's fire path does not send: refused rather than silently ignored. Permanent.
    /// See the crate docs ("Replication") for what a Redis failover does to triggers.
    #[error(
        "schedule {0:?} asks for durable enqueues, which the scheduler does not do; \
         remove EnqueueOptions::durable from its options"
    )]
    DurableSchedule(String),
    /// The broker failed.
    #[error(transparent)]
    Broker(#[from] chronos_core::BrokerError),
}

impl SchedulerError {
    /// The error for a schedule whose tasks would replace or debounce: a fired trigger is
    /// enqueued once or skipped, never merged into a waiting task.
    pub(crate) fn schedule_mode() -> Self {
        Self::Broker(chronos_core::BrokerError::InvalidOption(
            "a schedule's tasks deduplicate by Reject or Throttle: a trigger is enqueued once \
             or skipped, never merged into a waiting task (Replace, Debounce)"
                .into(),
        ))
    }
}

// Lets `NewSchedule::raw` take a `Spec` (which converts to itself and cannot fail) as well as a
// deprecated `RuntimeSpec`, through one `TryInto<Spec>` bound.
impl From<Infallible> for SchedulerError {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}
