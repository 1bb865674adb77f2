//! Queue gauges for metrics, sampled by one process of the cluster at a time.

use std::future::Future;
use std::time::Duration;

use crate::{BrokerError, Inspect, QueueName, QueueSample};

/// What a metrics sampler needs of a broker: a short lease that elects one sampling process
/// among many, and a cheap read of one queue's gauges.
///
/// No method has a default body: a store without an election answers the lease granted (every
/// process may then sample), and a wrapper forwards them ([`crate::forward!`]). Implemented
/// for `&T`, `Arc<T>` and `Box<T>` when `T` has it.
pub trait SampleQueues: Inspect {
    /// Takes, or keeps, the cluster-wide sampler lease for `holder` for `ttl`: true when
    /// `holder` holds it now. The holder renews it every sampling period; when it dies, another
    /// process takes over within `ttl`.
    fn sampler_lease(
        &self,
        holder: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Gives the lease up if `holder` holds it (at shutdown), so another process samples from
    /// its next period on instead of after the lease's TTL.
    fn release_sampler_lease(
        &self,
        holder: &str,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// The gauges of one queue. The Redis broker reads them with a constant number of cheap
    /// commands (no scan, no `MEMORY USAGE`, no `KEYS`), whatever the queue's length, plus,
    /// for a queue with tenants, one script whose cost grows with the number of tenants with
    /// work (a few commands each).
    fn sample_queue(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueSample, BrokerError>> + Send;
}
