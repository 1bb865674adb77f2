//! Samples the cluster-wide queue gauges, in one process at a time: the holder of a short lease
//! in Redis. A scrape then only reads memory, and N workers cost Redis what one does.

use std::sync::Arc;
use std::time::Duration;

use chronos_core::QueueName;
use tracing::{debug, warn};

use crate::loops::every;
use crate::runtime::Runtime;
use crate::{metrics, WorkerBroker};

/// Queues sampled concurrently (their reads share the pipelined connection).
const CONCURRENT: usize = 32;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>, period: Duration) {
    every(&rt, period, || sample(&rt, period)).await;
    // Hand over at once rather than after the lease's TTL (a no-op when another holds it).
    if let Err(e) = rt.broker.release_sampler_lease(&rt.id).await {
        debug!(error = %e, "could not release the metrics sampler lease; it expires by itself");
    }
}

async fn sample<B: WorkerBroker>(rt: &Runtime<B>, period: Duration) {
    metrics::running(rt.running_count());
    // Three periods: one late tick does not hand the lease over, a dead holder's lapses soon.
    match rt
        .broker
        .sampler_lease(&rt.id, period.saturating_mul(3))
        .await
    {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            warn!(error = %e, "could not take the metrics sampler lease");
            return;
        }
    }
    let queues = match rt.broker.queues().await {
        Ok(q) => q,
        Err(e) => {
            warn!(error = %e, "could not list queues for metrics");
            return;
        }
    };
    let paused = rt.broker.paused_queues().await.unwrap_or_default();
    for chunk in queues.chunks(CONCURRENT) {
        let samples =
            futures::future::join_all(chunk.iter().map(|q| rt.broker.sample_queue(q))).await;
        for (q, s) in chunk.iter().zip(samples) {
            match s {
                Ok(s) => metrics::queue_sample(q.as_str(), &s, is_paused(&paused, q)),
                Err(e) => debug!(queue = %q, error = %e, "could not sample the queue"),
            }
        }
    }
}

fn is_paused(paused: &[QueueName], q: &QueueName) -> bool {
    paused.contains(q)
}
