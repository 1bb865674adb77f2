//! Queue gauges for metrics: what one process of the cluster samples every few seconds, so
//! that a scrape never costs Redis anything and N workers do not each read every queue.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{now_ms, BrokerError, Inspect, QueueName, QueueStats};

/// One sample of a queue: its counts by state and the age of its oldest pending task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// Counts by state, as [`Inspect::queue_stats`] gives them.
    pub stats: QueueStats,
    /// When the oldest pending (ready, not yet delivered) task became ready, in unix ms of the
    /// broker's clock; None when nothing is pending or the broker cannot tell.
    pub oldest_pending_ms: Option<i64>,
    /// When the sample was taken, in unix ms of the same clock as `oldest_pending_ms`.
    pub sampled_at_ms: i64,
}

impl QueueSample {
    /// How long the oldest pending task has waited to be delivered (zero when nothing is
    /// pending, or the clocks disagree); None when the broker cannot tell.
    pub fn oldest_pending_age(&self) -> Option<Duration> {
        if self.stats.pending == 0 {
            return Some(Duration::ZERO);
        }
        let ready = self.oldest_pending_ms?;
        let ms = u64::try_from(self.sampled_at_ms.saturating_sub(ready)).unwrap_or(0);
        Some(Duration::from_millis(ms))
    }
}

/// What a metrics sampler needs of a broker: a short lease that elects one sampling process
/// among many, and a cheap read of one queue's gauges.
///
/// Both methods have defaults, so a wrapper around a broker (metrics, fault injection) gets
/// them with an empty `impl SampleQueues for MyWrapper {}`: every process may then sample
/// (the lease is always granted) and the sample carries the counts of
/// [`Inspect::queue_stats`] without the oldest pending task's age. Implemented for `&T`,
/// `Arc<T>` and `Box<T>` when `T` has it.
pub trait SampleQueues: Inspect {
    /// Takes, or keeps, the cluster-wide sampler lease for `holder` for `ttl`: true when
    /// `holder` holds it now. The holder renews it every sampling period; when it dies, another
    /// process takes over within `ttl`.
    fn sampler_lease(
        &self,
        holder: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send {
        let _ = (holder, ttl);
        async { Ok(true) }
    }

    /// Gives the lease up if `holder` holds it (at shutdown), so another process samples from
    /// its next period on instead of after the lease's TTL.
    fn release_sampler_lease(
        &self,
        holder: &str,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send {
        let _ = holder;
        async { Ok(()) }
    }

    /// The gauges of one queue. The Redis broker reads them with a constant number of cheap
    /// commands (no scan, no `MEMORY USAGE`, no `KEYS`), whatever the queue's length.
    fn sample_queue(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<QueueSample, BrokerError>> + Send {
        async move {
            Ok(QueueSample {
                stats: self.queue_stats(queue).await?,
                oldest_pending_ms: None,
                sampled_at_ms: now_ms(),
            })
        }
    }
}

macro_rules! forward_sample {
    ($($ptr:ty),*) => {$(
        impl<T: SampleQueues + ?Sized> SampleQueues for $ptr {
            fn sampler_lease(
                &self,
                holder: &str,
                ttl: Duration,
            ) -> impl Future<Output = Result<bool, BrokerError>> + Send {
                (**self).sampler_lease(holder, ttl)
            }

            fn release_sampler_lease(
                &self,
                holder: &str,
            ) -> impl Future<Output = Result<(), BrokerError>> + Send {
                (**self).release_sampler_lease(holder)
            }

            fn sample_queue(
                &self,
                queue: &QueueName,
            ) -> impl Future<Output = Result<QueueSample, BrokerError>> + Send {
                (**self).sample_queue(queue)
            }
        }
    )*};
}

forward_sample!(&T, Arc<T>, Box<T>);
