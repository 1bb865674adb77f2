//! A queue's settings kept in the store, read by every server and changed by operators.

use std::future::Future;

use crate::{BrokerError, QueueName, QueueSettings, SettingsChange};

/// Reads and changes the stored settings of a queue ([`QueueSettings`]): the limits that
/// override, field by field, what each server was configured with, and the aging time of its
/// priority levels. Servers read them periodically; the CLI and the console change them.
///
/// Every call is one atomic step, and a change is safe to re-send (the client re-sends commands
/// in flight when a connection drops): it stores absolute values, so running it twice leaves
/// what running it once does. Implemented for `&T`, `Arc<T>` and `Box<T>` when `T` has it.
pub trait Settings: Send + Sync {
    /// The settings stored for `queue` (all fields `None` when nothing is stored). A stored
    /// field this version cannot read, or a limit out of range, is a [`BrokerError::Protocol`]
    /// error, never a guess; an aging time is read as stored (the store's own scripts use it).
    fn queue_settings(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueSettings, BrokerError>> + Send;

    /// Applies `change` to the settings of `queue` in one atomic step and returns the settings
    /// as stored after it. Values out of range are refused with
    /// [`BrokerError::InvalidOption`] before anything is written.
    fn change_queue_settings(
        &self,
        queue: &QueueName,
        change: &SettingsChange,
    ) -> impl Future<Output = Result<QueueSettings, BrokerError>> + Send;
}
