//! Everything the server keeps for one of its queues: what it was configured with, what its
//! fetcher last found, and the deliveries it holds. (A queue slot, not a concurrency slot: those
//! are the permits of `Runtime::slots`.)

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use chronos_core::{Lease, QueueName};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::progress::Cell;
use crate::QueueLimit;

/// One queue of the server, at its index in `Runtime::queues`.
pub(crate) struct QueueSlot {
    /// The queue's name.
    pub(crate) name: QueueName,
    /// Its weight (strict priority: its rank).
    pub(crate) weight: u32,
    /// Its limit, if any.
    pub(crate) limit: Option<QueueLimit>,
    /// Paused by an operator, as last read from Redis.
    paused: AtomicBool,
    /// Set when a non-blocking read of the queue found nothing, cleared when a read returns
    /// tasks. Strict priority waits for a higher queue until it is known to be empty.
    drained: AtomicBool,
    /// Its fetcher left its blocking wait to the shared read. Read and written only under the
    /// park's lock (park.rs), so that it changes together with the read in flight.
    pub(crate) parked: AtomicBool,
    /// Wakes its parked fetcher (the queue got tasks, or the shared read gave up).
    pub(crate) woken: Notify,
    /// Wakes its fetcher from a wait for a handler-signalled block's end: the queue's settings
    /// signal came (an operator's unblock sends one), so the block may be gone.
    pub(crate) lifted: Notify,
    /// The deliveries held; one lock, so a delivery is never buffered without being held.
    deliveries: Mutex<Deliveries>,
    /// Run times and queue waits not written yet (timing.rs).
    pub(crate) timings: crate::timing::Timings,
    /// Settlements waiting to be carried by the fetcher's next read (settler.rs).
    pub(crate) carry: crate::carry::Carry,
    /// Set when this server took a task of the queue, cleared by the janitor's sweep of it:
    /// a queue idle here is swept only in its turn (janitor.rs).
    pub(crate) touched: AtomicBool,
}

/// The deliveries of one queue that this server holds.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    /// Fetched but not yet started, each with the time it was buffered.
    pub(crate) buffer: VecDeque<(Instant, Lease)>,
    /// Every delivery held here (buffered or running), by stream entry id: the heartbeat keeps
    /// their leases.
    pub(crate) held: HashMap<String, Held>,
    /// The concurrency token of each held delivery of a queue with a concurrency limit, by
    /// entry id.
    pub(crate) tokens: HashMap<String, String>,
}

/// A delivery this server holds (buffered or running), as the heartbeat sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held {
    /// Set while the task runs; cancelled when its lease is lost.
    pub(crate) cancel: Option<CancellationToken>,
    /// The handler's `Context` signal while it runs (a child of `cancel`): fired alone when an
    /// operator cancels the task, so the handler may stop but is not aborted.
    pub(crate) signal: Option<CancellationToken>,
    /// The progress its handler reported, while it runs.
    pub(crate) progress: Option<Arc<Cell>>,
    /// Task id, kind and start (unix ms) of the running handler, for the server record.
    pub(crate) running: Option<(String, String, i64)>,
}

impl QueueSlot {
    /// A queue with nothing held, not paused, not known drained.
    pub(crate) fn new(name: QueueName, weight: u32, limit: Option<QueueLimit>) -> Self {
        Self {
            name,
            weight,
            limit,
            paused: AtomicBool::new(false),
            drained: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            woken: Notify::new(),
            lifted: Notify::new(),
            deliveries: Mutex::new(Deliveries::default()),
            timings: Default::default(),
            carry: Default::default(),
            touched: AtomicBool::new(false),
        }
    }

    /// The deliveries held in this queue.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Deliveries> {
        // A poisoned lock only means a panic elsewhere while holding it; the data is still a
        // valid set of leases, so go on with it rather than take the server down.
        self.deliveries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether its deliveries hold concurrency tokens (a limit on tasks at once).
    pub(crate) fn has_tokens(&self) -> bool {
        self.limit.is_some_and(|l| l.concurrency.is_some())
    }

    /// Whether the queue is paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Records whether the queue is paused; true when that changed.
    pub(crate) fn set_paused(&self, paused: bool) -> bool {
        self.paused.swap(paused, Ordering::Relaxed) != paused
    }

    /// Whether the last non-blocking read found nothing.
    pub(crate) fn is_drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    /// Records whether the last read found nothing.
    pub(crate) fn set_drained(&self, drained: bool) {
        self.drained.store(drained, Ordering::Relaxed);
    }
}
