//! Pushed wake-ups for idle workers: what a store announces ([`Signal`]), the stream a worker
//! reads them from ([`Signals`]), and the handle that cuts a shared blocking read short
//! ([`Interrupt`]). They let an idle server sleep until something changes instead of polling
//! every queue.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::QueueName;

/// Something that changed in the store, announced to every subscribed worker of the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A task was added to the scheduled or retry set of `queue`, due in `after` (by the store's
    /// clock, at the time of the push) and earlier than anything that set held before.
    Due {
        /// The queue whose set got an earlier due time.
        queue: QueueName,
        /// How long from the push until it is due (zero when already due).
        after: Duration,
    },
    /// A queue was paused or resumed: read the paused set again.
    Paused,
    /// The stored settings of `queue` changed (limits, aging, ...): read them again.
    Settings {
        /// The queue whose settings changed.
        queue: QueueName,
    },
    /// The subscription was (re)established, or messages were missed: anything may have been
    /// pushed meanwhile, so act as if every kind of signal came (a full forward pass, a read of
    /// the paused set).
    Resync,
}

/// A worker's end of the namespace's signals. Signals are hints: a store pushes them, but a
/// lost one (a reconnect, an overflow) only delays what it announced until the reader's own
/// safety interval, and every gap in the subscription is reported as [`Signal::Resync`].
#[derive(Debug)]
pub struct Signals {
    rx: broadcast::Receiver<Signal>,
}

impl Signals {
    /// Wraps a broadcast receiver fed by a store's subscriber.
    pub fn new(rx: broadcast::Receiver<Signal>) -> Self {
        Self { rx }
    }

    /// The next signal; None once the store's subscriber is gone for good (the broker was
    /// closed). Missed messages come back as one [`Signal::Resync`].
    pub async fn recv(&mut self) -> Option<Signal> {
        match self.rx.recv().await {
            Ok(s) => Some(s),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Signal::Resync),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

/// The future an [`Interrupt`] returns.
pub type InterruptFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// Ends the blocking read in flight on one reader early, as if its wait had timed out (so no
/// entry is taken and none is stranded), from another task. Cheap to clone.
#[derive(Clone)]
pub struct Interrupt(Arc<dyn Fn() -> InterruptFuture + Send + Sync>);

impl Interrupt {
    /// An interrupt that runs `f`; `f` answers whether a read in flight was ended.
    pub fn new(f: impl Fn() -> InterruptFuture + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Ends the read in flight, if any. False when no read was in flight (or the store could not
    /// be told): the caller may retry once the read has started.
    pub async fn fire(&self) -> bool {
        (self.0)().await
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt").finish_non_exhaustive()
    }
}

/// What one forward pass over a queue did, and when the next is due.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded {
    /// Tasks moved into the stream.
    pub moved: u64,
    /// How long until the earliest task left in the scheduled and retry sets is due (by the
    /// store's clock; zero when more are due now, and after a pass that moved tasks, since a
    /// task added during the pass may be due already). None when both sets are empty.
    pub next: Option<Duration>,
}
