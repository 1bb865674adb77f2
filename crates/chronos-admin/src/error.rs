//! What can go wrong in an operation, as one error type whose messages fit a CLI line.

use chronos_broker::BrokerError;

use crate::lookup::{UnknownQueue, UnknownTenant};

/// What can go wrong in an operation. Each variant's message is one line, fit for a CLI.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The broker failed (Redis unreachable, a bad name, a queue not empty, ...).
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// A runtime schedule change was refused (invalid spec, unknown or taken id, ...).
    #[error(transparent)]
    Schedule(#[from] chronos_scheduler::SchedulerError),
    /// No queue of this name in the namespace (a typo, or another namespace): nothing was
    /// done. Permanent for this name; the details say which queues exist.
    #[error("{0}")]
    QueueNotFound(Box<UnknownQueue>),
    /// No tenant of this key in this queue (no task of it waits or runs, no stored setting):
    /// nothing was done. The details list the tenants the queue has.
    #[error("{0}")]
    TenantNotFound(Box<UnknownTenant>),
    /// No task with this id in this queue (for a delete: none to delete, possibly deleted a
    /// moment ago).
    #[error("no task {id:?} in queue {queue:?}")]
    TaskNotFound {
        /// The queue.
        queue: String,
        /// The task id.
        id: String,
    },
    /// The task's state does not allow the action; nothing changed.
    #[error("task {id:?} is {state}: cannot {action}")]
    Refused {
        /// The task id.
        id: String,
        /// Its state.
        state: String,
        /// The action, as a verb.
        action: &'static str,
    },
    /// The task record is corrupt; nothing changed.
    #[error("task {id:?} has a corrupt record; nothing changed")]
    Corrupt {
        /// The task id.
        id: String,
    },
    /// An argument is out of range (an unknown state name, a bad cursor).
    #[error("{0}")]
    Invalid(String),
}
