//! The queues whose fetchers left their blocking wait to the shared read (watcher.rs), and the
//! read in flight. Shared by the fetchers, the watcher and the pause poller; its own file so
//! that the runtime holding it does not depend on the watcher.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::slot::QueueSlot;

/// The read in flight and the wake-ups around it; each queue's own flag and wake-up are in its
/// [`QueueSlot`] (`parked`, `woken`). The default has nothing parked and no read in flight.
#[derive(Default)]
pub(crate) struct Park {
    /// The queues the read in flight covers, while one is. The queues' `parked` flags are read
    /// and written only under this lock, so that a queue parked after the watcher chose what to
    /// read sees the read and cuts it.
    reading: Mutex<Option<Vec<usize>>>,
    /// Wakes the watcher: the parked set changed while it waited for one.
    pub(crate) changed: Notify,
    /// Asks the watcher to cut its read in flight short.
    pub(crate) cut: Notify,
}

impl Park {
    /// The read in flight, locked.
    fn reading(&self) -> MutexGuard<'_, Option<Vec<usize>>> {
        self.reading.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `q` has nothing ready: leave its blocking wait to the watcher. The read in flight
    /// is cut when it does not cover `q`, so a task sent to `q` now is not left waiting for
    /// the end of a block.
    pub(crate) fn park(&self, queues: &[QueueSlot], q: usize) {
        let reading = self.reading();
        queues[q].parked.store(true, Ordering::Relaxed);
        let stale = reading.as_ref().is_some_and(|r| !r.contains(&q));
        drop(reading);
        self.changed.notify_one();
        if stale {
            self.cut.notify_one();
        }
    }

    /// Something other than a fetcher changed which queues to watch (a pause or resume).
    pub(crate) fn refresh(&self) {
        let reading = self.reading().is_some();
        self.changed.notify_one();
        if reading {
            self.cut.notify_one();
        }
    }

    /// Chooses the queues to read (parked, not paused) and marks the read in flight, under one
    /// lock, so that a queue parked after this point sees the read and cuts it.
    pub(crate) fn begin(&self, queues: &[QueueSlot]) -> Vec<usize> {
        let mut reading = self.reading();
        let watched: Vec<usize> = (0..queues.len())
            .filter(|&q| queues[q].parked.load(Ordering::Relaxed) && !queues[q].is_paused())
            .collect();
        *reading = (!watched.is_empty()).then(|| watched.clone());
        watched
    }

    /// No read is in flight any more.
    pub(crate) fn end(&self) {
        *self.reading() = None;
    }

    /// Wakes queue `q`'s fetcher: its queue got tasks.
    pub(crate) fn unpark(&self, queues: &[QueueSlot], q: usize) {
        {
            let _reading = self.reading();
            queues[q].parked.store(false, Ordering::Relaxed);
        }
        queues[q].woken.notify_one();
    }

    /// Sends queue `q`'s fetcher, if parked, back to reading for itself once, and cuts the
    /// read in flight: the queue may have lanes the read does not cover (a new priority level,
    /// the tenant streams), which the fetcher's read learns before it parks again.
    pub(crate) fn relearn(&self, queues: &[QueueSlot], q: usize) {
        if queues[q].parked.load(Ordering::Relaxed) {
            self.unpark(queues, q);
            self.refresh();
        }
    }

    /// Wakes every parked fetcher (they fall back to reading for themselves).
    pub(crate) fn release_all(&self, queues: &[QueueSlot]) {
        let reading = self.reading();
        let parked: Vec<usize> = (0..queues.len())
            .filter(|&q| queues[q].parked.load(Ordering::Relaxed))
            .collect();
        for &q in &parked {
            queues[q].parked.store(false, Ordering::Relaxed);
        }
        drop(reading);
        for q in parked {
            queues[q].woken.notify_one();
        }
    }
}
