//! Keeps the leases of held tasks fresh and publishes this server's record. A lease the
//! heartbeat finds reclaimed is dropped here and its handler cancelled.

use std::sync::Arc;

use chronos_core::{now_ms, ServerRecord};
use tracing::warn;

use crate::loops::every;
use crate::progress_writer;
use crate::runtime::Runtime;
use crate::WorkerBroker;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    every(&rt, rt.config.heartbeat_interval, || beat(&rt)).await
}

pub(crate) async fn beat<B: WorkerBroker>(rt: &Runtime<B>) {
    for q in 0..rt.queues.len() {
        let ids = rt.held_ids(q);
        if ids.is_empty() {
            continue;
        }
        // Progress waiting to be written goes with the beat, in the same call.
        progress_writer::write(rt, q, &ids, rt.unwritten_progress(q)).await;
    }
    crate::limiter::keep(rt).await;
    flush_timings(rt).await;
    let record = record(rt);
    // Three missed heartbeats and the record expires: the server is considered dead.
    if let Err(e) = rt
        .broker
        .publish_server(&record, rt.config.heartbeat_interval.saturating_mul(3))
        .await
    {
        warn!(error = %e, "could not publish the server record");
    }
}

fn record<B: WorkerBroker>(rt: &Runtime<B>) -> ServerRecord {
    ServerRecord {
        id: rt.id.clone(),
        host: hostname::get()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        pid: std::process::id(),
        queues: rt
            .queues
            .iter()
            .map(|s| (s.name.to_string(), s.weight))
            .collect(),
        concurrency: u32::try_from(rt.config.concurrency).unwrap_or(u32::MAX),
        started_at_ms: rt.started_at_ms,
        running: u32::try_from(rt.running_count()).unwrap_or(u32::MAX),
        last_seen_ms: now_ms(),
        tasks: rt.running_tasks(chronos_core::RUNNING_LISTED),
        archive_max: Some(rt.config.archive_max),
    }
}

/// Writes every queue's counts (on each heartbeat, and once more on shutdown). Counts that
/// cannot be written are dropped with a warning: they are statistics, not tasks.
pub(crate) async fn flush_timings<B: WorkerBroker>(rt: &Runtime<B>) {
    for slot in &rt.queues {
        let deltas = slot.timings.take();
        if deltas.is_empty() {
            continue;
        }
        if let Err(e) = rt.broker.record_timings(&slot.name, &deltas).await {
            warn!(queue = %slot.name, error = %e, "could not write run times; these are dropped");
        }
    }
}
