//! Settle and fetch in one round trip: a succeeded plain task's acknowledgement waits for its
//! queue's fetcher, whose next read carries it (`Consume::complete_and_fetch`), so a worker of
//! concurrency 1 makes one call per task instead of an ack and a fetch.
//!
//! A completion is carried only while the fetcher is about to read again (its queue busy, not
//! limited, not paused). Whenever it stops reading at once (it parks on the shared blocking
//! read, blocks on its own, waits for space longer than a moment, hands over to the limiter or
//! exits), what it carries goes to the acker, and so does every completion until it reads
//! again: an acknowledgement never waits for a read that is not coming. (The read is the
//! fetcher's, `fetcher::settle_and_fetch`; the hand-over to the acker is `acker::hand_over`.)

use std::sync::{Mutex, MutexGuard};

use chronos_core::Completion;

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
