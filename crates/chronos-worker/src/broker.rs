//! What the server asks of its broker: one name for the capabilities its loops use.

use chronos_broker::{Consume, Flows, Inspect, Maintain, SampleQueues, Throttle};

/// What a [`crate::Server`] needs of its broker, and nothing more: [`Consume`] (read, ack, retry,
/// dead-letter, requeue), [`Maintain`] (forward due tasks, reclaim, leases, server records),
/// [`Inspect`] (paused queues, live servers for the janitor), [`SampleQueues`] (queue gauges
/// for metrics; every method has a default, so a wrapper writes `impl SampleQueues for W {}`),
/// [`Flows`] (chains and groups: called only for tasks that are chain steps or group members)
/// and [`Throttle`] (rate and concurrency limits; called only for queues a
/// [`crate::QueueLimit`] limits, and a wrapper that limits nothing writes `impl Throttle for W {}`).
/// It asks for neither [`chronos_broker::Enqueue`] nor [`chronos_broker::Schedules`] nor
/// [`chronos_broker::Coordinate`], so a wrapper for metrics or fault injection implements only
/// these; the broker is shared by the server's loops behind an `Arc`, so it need not be
/// `Clone`.
///
/// Implemented for every type with the six capabilities; never implement it by hand. `&T`,
/// `Arc<T>` and `Box<T>` have them when `T` does.
pub trait WorkerBroker:
    Consume + Maintain + Inspect + SampleQueues + Flows + Throttle + 'static
{
}

impl<T: Consume + Maintain + Inspect + SampleQueues + Flows + Throttle + 'static> WorkerBroker
    for T
{
}
