//! What the server asks of its broker: one name for the capabilities its loops use.

use chronos_core::{Consume, Flows, Inspect, Maintain, SampleQueues, Settings, Throttle};

/// What a [`crate::Server`] needs of its broker, and nothing more; this is the one place that
/// lists it:
///
/// * [`Consume`]: read, start, settle (one `Settlement` per attempt), the shared blocking read;
/// * [`Maintain`]: forward due tasks, reclaim, keep leases alive (with progress), server
///   records, signals, cancellation;
/// * [`Inspect`]: paused queues, live servers for the janitor;
/// * [`SampleQueues`]: queue gauges for metrics;
/// * [`Flows`]: chains and groups, called only for tasks that are chain steps or group members
///   (which producers decide, so every server must be able to move them on);
/// * [`Throttle`]: rate and concurrency limits, called only for queues a [`crate::QueueLimit`]
///   limits or that carry rate keys;
/// * [`Settings`]: the queue settings stored in the store, read every second
///   (`SETTINGS_POLL`) so that limits changed at run time apply without a restart.
///
/// It asks for neither `Enqueue` nor `Schedules` nor `Coordinate`. The traits have no default
/// bodies: a store without limits answers [`chronos_core::BrokerError::Unsupported`] in its
/// `Throttle` methods, in so many words, and a wrapper that forgets to forward a method does not
/// compile. The broker is shared by the server's loops behind an `Arc`, so it need not be
/// `Clone`. Implemented for every type with the seven capabilities; never implement it by hand.
/// `&T`, `Arc<T>` and `Box<T>` have them when `T` does.
///
/// A wrapper that forwards these seven, and nothing else, is a broker a server runs on:
///
/// ```
/// use chronos_core::{
///     forward, Consume, Flows, Inspect, Maintain, SampleQueues, Settings, Throttle,
/// };
/// use chronos_worker::WorkerBroker;
///
/// struct Logged<B> {
///     inner: B,
/// }
///
/// impl<B: Consume> Consume for Logged<B> {
///     type Reader = B::Reader;
///     forward!(Consume => inner);
/// }
/// impl<B: Maintain> Maintain for Logged<B> {
///     forward!(Maintain => inner);
/// }
/// impl<B: Inspect> Inspect for Logged<B> {
///     forward!(Inspect => inner);
/// }
/// impl<B: SampleQueues> SampleQueues for Logged<B> {
///     forward!(SampleQueues => inner);
/// }
/// impl<B: Flows> Flows for Logged<B> {
///     forward!(Flows => inner);
/// }
/// impl<B: Throttle> Throttle for Logged<B> {
///     forward!(Throttle => inner);
/// }
/// impl<B: Settings> Settings for Logged<B> {
///     forward!(Settings => inner);
/// }
///
/// fn serves<B: WorkerBroker>(_: &B) {}
///
/// fn wrap<B: WorkerBroker>(broker: B) {
///     serves(&Logged { inner: broker });
/// }
/// ```
pub trait WorkerBroker:
    Consume + Maintain + Inspect + SampleQueues + Flows + Throttle + Settings + 'static
{
}

impl<T> WorkerBroker for T where
    T: Consume + Maintain + Inspect + SampleQueues + Flows + Throttle + Settings + 'static
{
}
