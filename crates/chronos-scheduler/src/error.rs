use crate::SpecError;

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
    /// The broker failed.
    #[error(transparent)]
    Broker(#[from] chronos_broker::BrokerError),
}
