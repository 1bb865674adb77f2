//! The settlements of one queue that wait for its fetcher's next read (see `settler`): a leaf
//! that the queue's slot holds and the settler fills and empties, so that neither imports the
//! other's loop.

use std::sync::{Mutex, MutexGuard};

use chronos_core::Settlement;

/// The settlements of one queue waiting for its fetcher's next read.
#[derive(Debug, Default)]
pub(crate) struct Carry {
    inner: Mutex<Carried>,
}

#[derive(Debug, Default)]
struct Carried {
    /// The fetcher reads again soon: settlements may wait for it.
    open: bool,
    waiting: Vec<Settlement>,
}

impl Carry {
    fn lock(&self) -> MutexGuard<'_, Carried> {
        // Poisoned only by a panic elsewhere; the list is still a valid list.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `settlement` to be carried by the next read; gives it back when the fetcher is not
    /// reading soon, or when it is more than a bare ack.
    pub(crate) fn offer(&self, settlement: Settlement) -> Option<Settlement> {
        if !settlement.is_bare_ack() {
            return Some(settlement);
        }
        let mut g = self.lock();
        if !g.open {
            return Some(settlement);
        }
        g.waiting.push(settlement);
        None
    }

    /// The fetcher is about to read: carry settlements until [`Carry::close`]; what waits now.
    pub(crate) fn open(&self) -> Vec<Settlement> {
        let mut g = self.lock();
        g.open = true;
        std::mem::take(&mut g.waiting)
    }

    /// What waits now, carrying on.
    pub(crate) fn take(&self) -> Vec<Settlement> {
        std::mem::take(&mut self.lock().waiting)
    }

    /// The fetcher stops reading at once: carry nothing more; what waits now.
    pub(crate) fn close(&self) -> Vec<Settlement> {
        let mut g = self.lock();
        g.open = false;
        std::mem::take(&mut g.waiting)
    }
}
