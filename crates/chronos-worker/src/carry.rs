//! Settle and fetch in one round trip: a succeeded plain task's acknowledgement waits for its
//! queue's fetcher, whose next read carries it (`Consume::complete_and_fetch`), so a worker of
//! concurrency 1 makes one call per task instead of an ack and a fetch.
//!
//! A completion is carried only while the fetcher is about to read again (its queue busy, not
//! limited, not paused). Whenever it stops reading at once (it parks on the shared blocking
//! read, blocks on its own, waits for space longer than a moment, hands over to the limiter or
//! exits), what it carries goes to the acker, and so does every completion until it reads
//! again: an acknowledgement never waits for a read that is not coming.

use std::sync::{Mutex, MutexGuard};

use chronos_core::{Completion, Fetched};
use tracing::error;

use crate::runtime::Runtime;
use crate::WorkerBroker;

/// The completions of one queue waiting for its fetcher's next read.
#[derive(Debug, Default)]
pub(crate) struct Carry {
    inner: Mutex<Carried>,
}

#[derive(Debug, Default)]
struct Carried {
    /// The fetcher reads again soon: completions may wait for it.
    open: bool,
    done: Vec<Completion>,
}

impl Carry {
    fn lock(&self) -> MutexGuard<'_, Carried> {
        // Poisoned only by a panic elsewhere; the list is still a valid list.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `c` to be carried by the next read; gives it back when the fetcher is not reading
    /// soon, or when the completion needs more than an ack (a record, a retention): the acker
    /// settles those, so they never hold up a read.
    pub(crate) fn offer(&self, c: Completion) -> Option<Completion> {
        if !c.lease.is_plain() || c.retention.is_some() {
            return Some(c);
        }
        let mut g = self.lock();
        if !g.open {
            return Some(c);
        }
        g.done.push(c);
        None
    }

    /// The fetcher is about to read: carry completions until [`Carry::close`]; what waits now.
    pub(crate) fn open(&self) -> Vec<Completion> {
        let mut g = self.lock();
        g.open = true;
        std::mem::take(&mut g.done)
    }

    /// What waits now, carrying on.
    pub(crate) fn take(&self) -> Vec<Completion> {
        std::mem::take(&mut self.lock().done)
    }

    /// The fetcher stops reading at once: carry nothing more; what waits now.
    pub(crate) fn close(&self) -> Vec<Completion> {
        let mut g = self.lock();
        g.open = false;
        std::mem::take(&mut g.done)
    }
}

/// Gives completions of queue `q` to the acker, or acks them here once it is gone (shutdown).
pub(crate) async fn hand_over<B: WorkerBroker>(rt: &Runtime<B>, q: usize, done: Vec<Completion>) {
    for c in done {
        if let Err(back) = rt.acks.send((q, c)) {
            let c = (back.0).1;
            if let Err(e) = rt
                .broker
                .complete(&c.lease.queue, std::slice::from_ref(&c))
                .await
            {
                error!(queue = %c.lease.queue, task_id = %c.lease.task_id, error = %e, "ack failed; the task will run again after recovery");
            }
            rt.release(q, &c.lease.msg_id);
        }
    }
}

/// One call that acks `done` and reads up to `count` tasks of queue `q` (0: only acks); the
/// acked leases are let go. On an error the completions go to the acker, which retries them
/// (a re-sent ack is a no-op).
pub(crate) async fn settle_and_fetch<B: WorkerBroker>(
    rt: &Runtime<B>,
    reader: &mut B::Reader,
    q: usize,
    done: Vec<Completion>,
    count: usize,
) -> Result<Fetched, chronos_core::BrokerError> {
    let queue = &rt.queues[q].name;
    match rt
        .broker
        .complete_and_fetch(reader, queue, &rt.id, &done, count)
        .await
    {
        Ok((_, fetched)) => {
            for c in &done {
                rt.release(q, &c.lease.msg_id);
            }
            Ok(fetched)
        }
        Err(e) => {
            hand_over(rt, q, done).await;
            Err(e)
        }
    }
}
