//! What a broker stores to open a group: its members' count and its callback.

use std::time::Duration;

use crate::{NewTask, QueueName};

/// A group to create: its record (in the callback's queue) and the callback's template.
#[derive(Debug, Clone)]
pub struct GroupRecord {
    /// The group id.
    pub id: String,
    /// The callback's queue: the record lives in its hash slot.
    pub queue: QueueName,
    /// Members in the group (at least 1).
    pub total: u64,
    /// The callback, whose envelope holds [`crate::GroupCallback::counts`] as a placeholder that the
    /// firing script overwrites.
    pub callback: NewTask,
    /// Keep the members' results.
    pub collect: bool,
    /// Lifetime of the record and results before and after the callback fires.
    pub ttl: Duration,
}
