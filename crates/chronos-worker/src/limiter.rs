//! The fetch round of a limited queue ([`crate::QueueLimit`]): permits first, then at most that
//! many deliveries, then the per-key check; plus the loop that gives back the concurrency tokens
//! of deliveries that ended, and the heartbeat's refresh of the tokens held.
//!
//! A queue without a limit never comes here: its fetch costs what it always did. The limit a
//! round applies is the one in force when it begins (`Runtime::limit_of`: the configuration
//! overridden by the settings stored in Redis), so a change reaches the next round; a round
//! asleep waiting for permits wakes up when the limit changes.

use std::sync::Arc;
use std::time::Duration;

use chronos_core::{Admission, BrokerError, Consume, KeyRate, Lease, QueueName};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::loops::batches;
use crate::metrics;
use crate::runtime::Runtime;
use crate::{QueueLimit, WorkerBroker};

/// Most tokens given back by one call.
const MAX_BATCH: usize = 512;

/// One fetch round of limited queue `q` (`_configured` is the server's own limit, which chose
/// this path; the round applies the one in force). `waiting` holds deliveries this fetcher took without
/// a permit (a blocking read, which cannot ask for permits) or could not check yet: they are
/// held (their leases kept fresh) and go first in the next round.
pub(crate) async fn round<B: WorkerBroker>(
    rt: &Runtime<B>,
    reader: &mut <B as Consume>::Reader,
    q: usize,
    _configured: QueueLimit,
    count: usize,
    block: Duration,
    waiting: &mut Vec<Lease>,
) -> Result<(), BrokerError> {
    let queue = &rt.queues[q].name;
    let changed = rt.limit_changed(q);
    // Lifted at run time: the round goes on without permits or key checks.
    let limit = rt.limit_of(q).unwrap_or_default();
    let spec = limit.permits(rt.config.recover_min_idle);
    let permits = if limit.needs_permits() {
        let want = if waiting.is_empty() {
            count
        } else {
            waiting.len().min(count)
        };
        let p = rt
            .broker
            .acquire_permits(queue, &rt.id, want, &spec)
            .await?;
        if p.granted == 0 {
            metrics::permit_wait(queue.as_str());
            debug!(queue = %queue, wait = ?p.wait, "no permit; waiting");
            // Nothing to offer meanwhile: the dispatcher draws other queues.
            rt.mark_drained(q);
            // A wait set by the old limit (an hour under 1/1h) must not outlast a change.
            let changed = async {
                match changed {
                    Some(n) => n.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = sleep_or_stop(rt, p.wait) => {}
                _ = changed => {}
            }
            return Ok(());
        }
        Some(p)
    } else {
        None
    };
    let granted = permits.as_ref().map_or(count, |p| p.granted);
    // Whether some rate keys of the queue are blocked by a handler (the fetch says so).
    let mut key_blocks = false;
    let mut leases: Vec<Lease> = if waiting.is_empty() {
        match rt
            .broker
            .fetch(reader, queue, &rt.id, &[], granted, Duration::ZERO)
            .await
        {
            Ok(f) if f.blocked_until_ms.is_some() => {
                give_back(rt, queue, &spec, permits.as_ref(), 0).await;
                rt.mark_drained(q);
                blocked_wait(rt, q, f.blocked_until_ms).await;
                return Ok(());
            }
            Ok(f) => {
                key_blocks = f.key_blocks;
                f.leases
            }
            Err(e) => {
                give_back(rt, queue, &spec, permits.as_ref(), 0).await;
                return Err(e);
            }
        }
    } else {
        let n = granted.min(waiting.len());
        waiting.drain(..n).collect()
    };
    if leases.is_empty() {
        rt.mark_drained(q);
        give_back(rt, queue, &spec, permits.as_ref(), 0).await;
        // Wait for new work without holding permits: a permit held through an idle wait would
        // start its task long after its slot, bunched with the starts of later slots. What
        // arrives waits here for its permit in the next round, so take one at most.
        let n = if limit.needs_permits() { 1 } else { count };
        let f = rt
            .broker
            .fetch(reader, queue, &rt.id, &[], n, block)
            .await?;
        if f.blocked_until_ms.is_some() {
            blocked_wait(rt, q, f.blocked_until_ms).await;
            return Ok(());
        }
        key_blocks = f.key_blocks;
        if permits.is_some() || f.leases.is_empty() {
            rt.hold(q, &f.leases);
            waiting.extend(f.leases);
            return Ok(());
        }
        leases = f.leases;
    }
    rt.hold(q, &leases);
    let key_rate = limit
        .key_rate()
        .or_else(|| key_blocks.then_some(BLOCKS_ONLY));
    let run = match check_keys(rt, q, key_rate, leases).await {
        Ok(run) => run,
        Err((e, back)) => {
            give_back(rt, queue, &spec, permits.as_ref(), 0).await;
            waiting.extend(back);
            return Err(e);
        }
    };
    if let Some(p) = &permits {
        let used = run.len().min(p.granted);
        if !p.tokens.is_empty() {
            rt.set_tokens(
                q,
                run.iter()
                    .map(|l| l.id.msg_id.clone())
                    .zip(p.tokens.iter().cloned()),
            );
        }
        give_back(rt, queue, &spec, Some(p), used).await;
    }
    if !run.is_empty() {
        debug!(queue = %queue, n = run.len(), "fetched");
        rt.push(q, run);
    }
    Ok(())
}

/// The per-key check of a queue without a per-key rate whose rate keys are blocked by a
/// handler ([`chronos_core::Fetched::key_blocks`]): blocks only.
pub(crate) const BLOCKS_ONLY: KeyRate = KeyRate {
    rate: 0,
    period: Duration::from_secs(1),
};

/// Sleeps until queue `q`'s handler-signalled block ends (unix ms by Redis' clock, compared
/// with this host's: a skewed host wakes early and is told again, or late by its skew), plus a
/// jitter of this worker's, so that the workers of every server do not all fetch at the same
/// instant; or less when fetching stops, or when the queue's settings signal says a block may
/// have been lifted (an operator's unblock). Never longer than [`BLOCK_RECHECK`] at once:
/// signals are hints, and a lift whose signal was lost is seen by the next read.
pub(crate) async fn blocked_wait<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    until_ms: Option<i64>,
) {
    let Some(until) = until_ms else { return };
    let queue = &rt.queues[q].name;
    let left = Duration::from_millis(until.saturating_sub(chronos_core::now_ms()).max(0) as u64)
        .min(chronos_core::MAX_BACKOFF);
    let width = chronos_core::backoff_jitter(left).as_millis() as u64;
    let jitter = Duration::from_millis(rand::random::<u64>() % (width + 1));
    debug!(queue = %queue, ?left, "queue blocked by a handler; not fetching it until the end");
    tokio::select! {
        _ = tokio::time::sleep((left + jitter).min(BLOCK_RECHECK)) => {}
        _ = rt.queues[q].lifted.notified() => {
            debug!(queue = %queue, "the queue's settings changed; reading it again");
        }
        _ = rt.stop_fetch.cancelled() => {}
    }
}

/// The longest a blocked queue's fetcher sleeps before it reads again (a read of a blocked
/// queue is one cheap call that answers the block's end): bounds how late a lift whose signal
/// was lost is seen.
pub(crate) const BLOCK_RECHECK: Duration = Duration::from_secs(10);

/// Checks keyed deliveries against the per-key limit and the handler-signalled key blocks
/// (`key_rate` None: nothing to check): returns those to run; deferred and gone ones are let
/// go. On a Redis error every delivery comes back unchecked with the error.
pub(crate) async fn check_keys<B: WorkerBroker>(
    rt: &Runtime<B>,
    q: usize,
    key_rate: Option<KeyRate>,
    leases: Vec<Lease>,
) -> Result<Vec<Lease>, (BrokerError, Vec<Lease>)> {
    let Some(key_rate) = key_rate else {
        return Ok(leases);
    };
    let keyed: Vec<(chronos_core::LeaseId, String)> = leases
        .iter()
        .filter_map(|l| {
            let key = l.envelope.as_ref().ok()?.rate_key.clone()?;
            Some((l.id.clone(), key))
        })
        .collect();
    if keyed.is_empty() {
        return Ok(leases);
    }
    let queue = &rt.queues[q].name;
    let answers = match rt.broker.admit(queue, &keyed, &key_rate).await {
        Ok(a) => a,
        Err(e) => return Err((e, leases)),
    };
    let mut verdict = std::collections::HashMap::with_capacity(keyed.len());
    for ((id, _), a) in keyed.iter().zip(answers) {
        verdict.insert(id.msg_id.clone(), a);
    }
    let mut deferred = 0;
    let mut run = Vec::with_capacity(leases.len());
    for l in leases {
        match verdict.get(&l.id.msg_id) {
            None | Some(Admission::Run) => run.push(l),
            Some(Admission::Deferred { due_ms }) => {
                debug!(task_id = %l.id.task_id, due_ms, "rate key full; task deferred");
                deferred += 1;
                rt.release(q, &l.id.msg_id);
            }
            Some(Admission::Gone) => rt.release(q, &l.id.msg_id),
        }
    }
    if deferred > 0 {
        metrics::deferred(queue.as_str(), deferred);
    }
    Ok(run)
}

/// Gives back what a grant did not use: its starts beyond `used`, and its spare tokens.
async fn give_back<B: WorkerBroker>(
    rt: &Runtime<B>,
    queue: &QueueName,
    spec: &chronos_core::PermitLimit,
    permits: Option<&chronos_core::Permits>,
    used: usize,
) {
    let Some(p) = permits else { return };
    let unused = p.granted.saturating_sub(used);
    if unused == 0 {
        return;
    }
    let spare = p.tokens.get(used..).unwrap_or_default();
    if let Err(e) = rt
        .broker
        .return_permits(queue, &rt.id, spec, Some((&p.grant, unused)), spare)
        .await
    {
        // The starts stay counted in their window, the tokens expire: the limit only errs on
        // the strict side.
        warn!(queue = %queue, error = %e, "could not give unused permits back");
    }
}

/// Hands deliveries that never got a permit back to their queue (shutdown), without an attempt.
pub(crate) async fn hand_back<B: WorkerBroker>(rt: &Runtime<B>, q: usize, waiting: Vec<Lease>) {
    if waiting.is_empty() {
        return;
    }
    let queue = &rt.queues[q].name;
    let ids = waiting.iter().map(|l| l.id.clone());
    if let Err(e) = crate::settler::requeue(rt, ids).await {
        warn!(queue = %queue, error = %e, "could not return waiting tasks; they will be recovered");
    }
    for l in &waiting {
        rt.release(q, &l.id.msg_id);
    }
}

/// Gives back, in batches per queue, the concurrency tokens of deliveries that ended.
pub(crate) async fn run<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    rx: mpsc::UnboundedReceiver<(QueueName, String)>,
) {
    batches(
        &rt,
        rx,
        MAX_BATCH,
        |(q, _)| q,
        |queue, items| {
            let rt = &rt;
            async move {
                let tokens: Vec<String> = items.into_iter().map(|(_, t)| t).collect();
                let spec = rt
                    .queues
                    .iter()
                    .position(|s| s.name == queue)
                    .and_then(|q| rt.limit_of(q))
                    .unwrap_or_default()
                    .permits(rt.config.recover_min_idle);
                if let Err(e) = rt
                    .broker
                    .return_permits(&queue, &rt.id, &spec, None, &tokens)
                    .await
                {
                    warn!(queue = %queue, n = tokens.len(), error = %e, "could not give permits back; they expire");
                }
            }
        },
    )
    .await
}

/// Keeps the concurrency tokens of the deliveries held in limited queues alive (heartbeat).
pub(crate) async fn keep<B: WorkerBroker>(rt: &Runtime<B>) {
    for (q, slot) in rt.queues.iter().enumerate() {
        let queue = &slot.name;
        // Tokens held, not the limit in force, decide: those taken before a limit was lifted
        // at run time are kept until their tasks end.
        if !slot.has_tokens() && slot.lock().tokens.is_empty() {
            continue;
        }
        let tokens = rt.tokens_of(q);
        if tokens.is_empty() {
            continue;
        }
        if let Err(e) = rt
            .broker
            .keep_permits(queue, &tokens, rt.config.recover_min_idle)
            .await
        {
            warn!(queue = %queue, error = %e, "could not keep concurrency permits");
        }
    }
}

/// Sleeps `d`, or less when fetching stops.
async fn sleep_or_stop<B: WorkerBroker>(rt: &Runtime<B>, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = rt.stop_fetch.cancelled() => {}
    }
}
