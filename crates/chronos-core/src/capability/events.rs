//! A queue's event stream: turning it on and off, and reading it alone or as a consumer group.

use std::future::Future;
use std::time::Duration;

use crate::{BrokerError, QueueName, TaskEvent};

/// Reads the events the transition scripts of a queue write while its stream is on
/// ([`crate::TaskEvent`]). A queue whose stream is off has none and pays nothing for them.
/// [`crate::Client::events`] and [`crate::Client::event_group`] build on this.
pub trait Events: Send + Sync {
    /// A connection of its own, for reads that block.
    type EventReader: Send;

    /// Opens a connection for blocking reads.
    fn open_event_reader(
        &self,
    ) -> impl Future<Output = Result<Self::EventReader, BrokerError>> + Send;

    /// Turns `queue`'s event stream on or off (the stream, its events and its groups are
    /// deleted). Idempotent. On takes effect at once for this broker and within a second for
    /// other processes (the Redis broker looks again each second); off takes effect at once
    /// everywhere.
    fn set_events(
        &self,
        queue: &QueueName,
        on: bool,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Whether `queue`'s event stream is on.
    fn events_on(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// The id of the newest event `queue`'s stream holds or held (`0-0` when it never held
    /// one); [`BrokerError::EventsOff`] when the stream is off.
    fn last_event_id(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<String, BrokerError>> + Send;

    /// Up to `count` events after the entry id `after` (`0-0`: the oldest kept), oldest first;
    /// waits up to `block` (zero: not at all) for the first one when there is none yet. An
    /// entry that does not read as an event is skipped with a warning.
    fn read_events(
        &self,
        reader: &mut Self::EventReader,
        queue: &QueueName,
        after: &str,
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Vec<TaskEvent>, BrokerError>> + Send;

    /// Makes consumer group `group` on `queue`'s stream, starting after the newest event, unless
    /// it exists. [`BrokerError::EventsOff`] when the stream is off.
    fn create_event_group(
        &self,
        queue: &QueueName,
        group: &str,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Reads for `consumer` of `group`: with `pending_after` set, the events already delivered
    /// to this consumer and not acked, after that id (its own history, re-read after a
    /// restart); otherwise up to `count` new events, each delivered to one consumer of the
    /// group, waiting up to `block` for the first.
    // XREADGROUP's own arguments, one for one.
    #[allow(clippy::too_many_arguments)]
    fn read_event_group(
        &self,
        reader: &mut Self::EventReader,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        pending_after: Option<&str>,
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Vec<TaskEvent>, BrokerError>> + Send;

    /// Takes over for `consumer` up to `count` events of `group` that another consumer read
    /// and has not acked for `min_idle` (it died, or hangs): the at-least-once half of a group.
    fn claim_events(
        &self,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> impl Future<Output = Result<Vec<TaskEvent>, BrokerError>> + Send;

    /// Acknowledges events of `group` as handled; returns how many were pending.
    fn ack_events(
        &self,
        queue: &QueueName,
        group: &str,
        ids: &[String],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;
}
