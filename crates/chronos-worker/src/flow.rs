//! Moves chains and groups on from the worker: a chain step's successor or end, a group
//! member's report. Called only for tasks that carry a flow, so a plain task pays nothing, and
//! always before the task's ack or dead letter: a crash in between re-runs the task (whose
//! bookkeeping is idempotent), it never loses a step or a count.

use std::future::Future;
use std::time::Duration;

use chronos_core::{
    chain_successor, now_ms, BrokerError, Flows, MemberReport, QueueName, TaskEnvelope,
    DEFAULT_CHAIN_RETENTION,
};
use tracing::{debug, warn};

use crate::backoff::Backoff;

/// Longest error message a group keeps per failed member: 100k members must stay small.
const MAX_ERROR: usize = 1024;

/// After a step or member succeeded with `result`: enqueue the chain's next step (or record
/// its end) and report the member to its group. An error means the bookkeeping may not have
/// happened: the caller must not acknowledge the task.
pub(crate) async fn succeeded<B: Flows>(
    broker: &B,
    env: &TaskEnvelope,
    result: Option<&[u8]>,
) -> Result<(), BrokerError> {
    let Some(flow) = env.flow.as_deref() else {
        return Ok(());
    };
    if let Some(link) = &flow.chain {
        match chain_successor(env, result, now_ms()) {
            Some(next) => {
                let fresh = again(|| broker.enqueue_successor(next.clone())).await?;
                debug!(chain = %link.id, step = link.step + 1, fresh, "chain successor enqueued");
            }
            None => {
                let queue = QueueName::new(env.queue.as_str())?;
                let keep = env
                    .retention_ms
                    .map_or(DEFAULT_CHAIN_RETENTION, Duration::from_millis);
                let result = result.map(<[u8]>::to_vec);
                again(|| broker.finish_chain(&queue, &link.id, result.clone(), keep)).await?;
            }
        }
    }
    if let Some(link) = &flow.member {
        let value = match result {
            Some(r) if link.collect => r.to_vec(),
            _ => Vec::new(),
        };
        report(broker, env, true, value).await?;
    }
    Ok(())
}

/// Counts a member as failed: before its worker dead-letters it, or after the recoverer did
/// (from the reclaim outbox, whose entry stays until this succeeded). An error means it was not
/// counted: a worker must not dead-letter it (the recoverer will deliver it again), the
/// recoverer keeps the outbox entry for its next pass.
pub(crate) async fn failed<B: Flows>(
    broker: &B,
    env: &TaskEnvelope,
    reason: &str,
) -> Result<(), BrokerError> {
    if env.flow.as_deref().is_some_and(|f| f.member.is_some()) {
        let mut end = reason.len().min(MAX_ERROR);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        report(broker, env, false, reason.as_bytes()[..end].to_vec()).await?;
    }
    Ok(())
}

async fn report<B: Flows>(
    broker: &B,
    env: &TaskEnvelope,
    succeeded: bool,
    value: Vec<u8>,
) -> Result<(), BrokerError> {
    let Some(link) = env.flow.as_deref().and_then(|f| f.member.as_ref()) else {
        return Ok(());
    };
    let report = MemberReport {
        queue: QueueName::new(link.queue.as_str())?,
        group: link.id.clone(),
        index: link.index,
        succeeded,
        value,
    };
    let outcome = again(|| broker.report_member(&report)).await?;
    debug!(group = %link.id, member = link.index, ?outcome, "group member reported");
    if outcome == chronos_core::MemberOutcome::UnknownGroup {
        warn!(group = %link.id, "group member finished, but its group is gone (expired?)");
    }
    Ok(())
}

/// The waits between the three tries of [`again`]: 100 ms, then 400 ms.
const AGAIN: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_millis(400)).growing(4);

/// Runs an idempotent call up to three times on Redis errors.
async fn again<T, F, Fut>(mut call: F) -> Result<T, BrokerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, BrokerError>>,
{
    let mut backoff = AGAIN;
    let mut tries = 0;
    loop {
        tries += 1;
        match call().await {
            Err(BrokerError::Store(e)) if tries < 3 => {
                warn!(error = %e, "workflow bookkeeping failed; trying again");
                tokio::time::sleep(backoff.next()).await;
            }
            r => return r,
        }
    }
}
