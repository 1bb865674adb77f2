//! State shared by the loops of one running server.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chronos_broker::{Completion, Lease, QueueName};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::starter::StartRequest;
use crate::watcher::Park;
use crate::WorkerBroker;
use crate::{Mux, QueueLimit, ServerConfig};

/// Counters of one server since it started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dead: AtomicU64,
    /// Handlers running now (not the dispatcher's permit held while it waits for a task).
    pub(crate) running: AtomicU64,
}

/// A delivery this server holds (buffered or running), as the heartbeat sees it.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// Set while the task runs; cancelled when its lease is lost.
    pub(crate) cancel: Option<CancellationToken>,
    /// The handler's `Context` signal while it runs (a child of `cancel`): fired alone when an
    /// operator cancels the task, so the handler may stop but is not aborted.
    pub(crate) signal: Option<CancellationToken>,
}

pub(crate) struct Runtime<B: WorkerBroker> {
    pub(crate) broker: B,
    pub(crate) mux: Mux,
    pub(crate) config: ServerConfig,
    pub(crate) queues: Vec<(QueueName, u32)>,
    /// Server id, also the consumer name in every group.
    pub(crate) id: String,
    /// Fetched but not yet started deliveries, one buffer per queue (same order as `queues`),
    /// each with the time it was buffered.
    buffers: Mutex<Vec<VecDeque<(Instant, Lease)>>>,
    /// Wakes the dispatcher when a buffer gains a task.
    pub(crate) ready: Notify,
    /// Wakes fetchers when a slot or buffer space frees up.
    pub(crate) space: Notify,
    /// Deliveries held, per queue index, by stream entry id.
    held: Mutex<Vec<HashMap<String, Held>>>,
    pub(crate) paused: Vec<AtomicBool>,
    /// Set when a non-blocking read of the queue found nothing, cleared when a read returns
    /// tasks. Strict priority waits for a higher queue until it is known to be empty.
    pub(crate) drained: Vec<AtomicBool>,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) acks: mpsc::UnboundedSender<(usize, Completion)>,
    pub(crate) starts: mpsc::UnboundedSender<StartRequest>,
    pub(crate) counters: Counters,
    /// Stops fetching and dispatching (first step of shutdown).
    pub(crate) stop_fetch: CancellationToken,
    /// Cancels running handlers (shutdown past its grace period); per-task tokens are children.
    pub(crate) hard_cancel: CancellationToken,
    /// Stops the maintenance loops (last step of shutdown).
    pub(crate) stop_maintenance: CancellationToken,
    pub(crate) running: TaskTracker,
    pub(crate) started_at_ms: i64,
    /// The limit of each queue (same order as `queues`), if any.
    pub(crate) limits: Vec<Option<QueueLimit>>,
    /// Concurrency tokens of held deliveries of limited queues, per queue, by entry id.
    tokens: Mutex<Vec<HashMap<String, String>>>,
    /// Tokens of deliveries this server let go, to give back in batches.
    returns: mpsc::UnboundedSender<(QueueName, String)>,
    /// The receiving end of `returns`, until the permit loop takes it.
    returned: Mutex<Option<mpsc::UnboundedReceiver<(QueueName, String)>>>,
    /// Queues whose fetcher left its blocking wait to the shared read (watcher.rs).
    pub(crate) park: Park,
    /// Whether the shared read runs; when not, each fetcher blocks on its own reader.
    pub(crate) watching: AtomicBool,
    /// Set while the dispatcher holds a slot and waits for a task to start in it: that slot is
    /// free, though the semaphore counts it taken.
    pub(crate) awaiting_task: AtomicBool,
}

impl<B: WorkerBroker> Runtime<B> {
    pub(crate) fn new(
        broker: B,
        mux: Mux,
        config: ServerConfig,
        queues: Vec<(QueueName, u32)>,
        id: String,
        acks: mpsc::UnboundedSender<(usize, Completion)>,
        starts: mpsc::UnboundedSender<StartRequest>,
    ) -> Self {
        let n = queues.len();
        let (returns, returned) = mpsc::unbounded_channel();
        let limits = queues
            .iter()
            .map(|(q, _)| config.limit_of(q.as_str()))
            .collect();
        Self {
            limits,
            tokens: Mutex::new((0..n).map(|_| HashMap::new()).collect()),
            returns,
            returned: Mutex::new(Some(returned)),
            slots: Arc::new(Semaphore::new(config.concurrency)),
            broker,
            mux,
            config,
            id,
            buffers: Mutex::new((0..n).map(|_| VecDeque::new()).collect()),
            ready: Notify::new(),
            space: Notify::new(),
            held: Mutex::new((0..n).map(|_| HashMap::new()).collect()),
            paused: (0..n).map(|_| AtomicBool::new(false)).collect(),
            drained: (0..n).map(|_| AtomicBool::new(false)).collect(),
            acks,
            starts,
            counters: Counters::default(),
            stop_fetch: CancellationToken::new(),
            hard_cancel: CancellationToken::new(),
            stop_maintenance: CancellationToken::new(),
            running: TaskTracker::new(),
            started_at_ms: chronos_broker::now_ms(),
            park: Park::new(n),
            watching: AtomicBool::new(false),
            awaiting_task: AtomicBool::new(false),
            queues,
        }
    }

    fn buffers(&self) -> MutexGuard<'_, Vec<VecDeque<(Instant, Lease)>>> {
        // A poisoned lock only means a panic elsewhere while holding it; the data is still a
        // valid queue of leases, so go on with it rather than take the server down.
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn held(&self) -> MutexGuard<'_, Vec<HashMap<String, Held>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tokens(&self) -> MutexGuard<'_, Vec<HashMap<String, String>>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tokens to give back, for the permit loop (once).
    pub(crate) fn take_returns(&self) -> Option<mpsc::UnboundedReceiver<(QueueName, String)>> {
        self.returned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Registers deliveries as held (the heartbeat keeps their leases) before they are
    /// buffered: a limited queue's fetcher holds them while it waits for permits.
    pub(crate) fn hold(&self, q: usize, leases: &[Lease]) {
        let mut held = self.held();
        for l in leases {
            held[q].entry(l.id.msg_id.clone()).or_insert(Held {
                cancel: None,
                signal: None,
            });
        }
    }

    /// Records the concurrency token each delivery holds until it is let go.
    pub(crate) fn set_tokens(&self, q: usize, pairs: impl IntoIterator<Item = (String, String)>) {
        self.tokens()[q].extend(pairs);
    }

    /// The concurrency tokens held in queue `q` (for the heartbeat to keep alive).
    pub(crate) fn tokens_of(&self, q: usize) -> Vec<String> {
        self.tokens()[q].values().cloned().collect()
    }

    /// Gives back the tokens of deliveries of queue `q` that this server let go (batched by
    /// the permit loop). Once that loop has stopped the tokens simply expire.
    fn return_tokens<'a>(&self, q: usize, msg_ids: impl IntoIterator<Item = &'a String>) {
        if self.limits[q].is_none_or(|l| l.concurrency.is_none()) {
            return;
        }
        let mut tokens = self.tokens();
        for id in msg_ids {
            if let Some(t) = tokens[q].remove(id) {
                let _ = self.returns.send((self.queues[q].0.clone(), t));
            }
        }
    }

    /// Tasks fetched but not started, over all queues.
    pub(crate) fn buffered(&self) -> usize {
        self.buffers().iter().map(VecDeque::len).sum()
    }

    pub(crate) fn buffered_in(&self, q: usize) -> usize {
        self.buffers().get(q).map_or(0, VecDeque::len)
    }

    /// Adds fetched leases to the buffer of queue `q` and to the held set.
    pub(crate) fn push(&self, q: usize, leases: Vec<Lease>) {
        {
            let mut held = self.held();
            for l in &leases {
                held[q].insert(
                    l.id.msg_id.clone(),
                    Held {
                        cancel: None,
                        signal: None,
                    },
                );
            }
        }
        let now = Instant::now();
        self.buffers()[q].extend(leases.into_iter().map(|l| (now, l)));
        self.drained[q].store(false, Ordering::Relaxed);
        self.ready.notify_one();
    }

    /// A non-blocking read of queue `q` found nothing.
    pub(crate) fn mark_drained(&self, q: usize) {
        self.drained[q].store(true, Ordering::Relaxed);
        // Strict dispatch may have been waiting on this queue.
        self.ready.notify_one();
    }

    /// Takes the next task to start. A queue is a candidate while it has buffered
    /// tasks or may have more in Redis (not known drained, not paused).
    /// * strict: the highest-weight candidate;
    /// * weighted: a candidate drawn with probability proportional to its weight. Drawing among
    ///   queues that have work in Redis, not only among non-empty buffers, is what makes the
    ///   share follow the weights: buffers refill one fetch at a time.
    ///
    /// `Err(q)` means queue `q` was chosen but has nothing buffered yet: pass it back as
    /// `chosen` on the next call, so that waiting does not re-draw (re-drawing after each wait
    /// would favour whichever queue refills first and flatten the weights).
    ///
    /// With the lease comes how long it waited in the buffer.
    pub(crate) fn pop(
        &self,
        chosen: Option<usize>,
    ) -> Result<(usize, Lease, Duration), Option<usize>> {
        let mut buffers = self.buffers();
        let candidates: Vec<usize> = (0..buffers.len())
            .filter(|&i| {
                !buffers[i].is_empty()
                    || (!self.is_paused(i) && !self.drained[i].load(Ordering::Relaxed))
            })
            .collect();
        let kept = chosen.filter(|c| candidates.contains(c));
        let pick = if let Some(c) = kept {
            c
        } else if self.config.strict_priority {
            // Highest weight first; ties go to the queue listed first.
            match candidates
                .iter()
                .copied()
                .max_by_key(|&i| (self.queues[i].1, usize::MAX - i))
            {
                Some(i) => i,
                None => return Err(None),
            }
        } else {
            let total: u64 = candidates
                .iter()
                .map(|&i| u64::from(self.queues[i].1))
                .sum();
            if total == 0 {
                return Err(None);
            }
            let mut r = rand::random::<u64>() % total;
            let mut drawn = candidates[0];
            for &i in &candidates {
                let w = u64::from(self.queues[i].1);
                if r < w {
                    drawn = i;
                    break;
                }
                r -= w;
            }
            drawn
        };
        match buffers[pick].pop_front() {
            Some((at, lease)) => Ok((pick, lease, at.elapsed())),
            None => Err(Some(pick)),
        }
    }

    /// Removes and returns every buffered lease (shutdown), per queue.
    pub(crate) fn drain_buffers(&self) -> Vec<Vec<Lease>> {
        let drained: Vec<Vec<Lease>> = self
            .buffers()
            .iter_mut()
            .map(|b| b.drain(..).map(|(_, l)| l).collect())
            .collect();
        let mut held = self.held();
        for (q, leases) in drained.iter().enumerate() {
            for l in leases {
                held[q].remove(&l.id.msg_id);
            }
        }
        drop(held);
        for (q, leases) in drained.iter().enumerate() {
            self.return_tokens(q, leases.iter().map(|l| &l.id.msg_id));
        }
        drained
    }

    /// Marks a delivery as running with its cancellation token and its handler's signal.
    pub(crate) fn mark_running(
        &self,
        q: usize,
        msg_id: &str,
        cancel: CancellationToken,
        signal: CancellationToken,
    ) {
        self.held()[q].insert(
            msg_id.to_string(),
            Held {
                cancel: Some(cancel),
                signal: Some(signal),
            },
        );
    }

    /// Entry ids of the deliveries of queue `q` whose handlers run now.
    pub(crate) fn running_ids(&self, q: usize) -> Vec<String> {
        self.held()[q]
            .iter()
            .filter(|(_, h)| h.signal.is_some())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Fires the handler signal of these running deliveries (an operator's cancel).
    pub(crate) fn signal(&self, q: usize, msg_ids: &[String]) {
        let held = self.held();
        for id in msg_ids {
            if let Some(Held {
                signal: Some(token),
                ..
            }) = held[q].get(id)
            {
                token.cancel();
            }
        }
    }

    /// The delivery ended here (settled, lost, deferred or handed back): stop holding it and
    /// give back its concurrency token.
    pub(crate) fn release(&self, q: usize, msg_id: &str) {
        self.held()[q].remove(msg_id);
        // Only a queue with a concurrency limit holds tokens: spare the others the lookup.
        if self.limits[q].is_some_and(|l| l.concurrency.is_some()) {
            self.return_tokens(q, [&msg_id.to_string()]);
        }
    }

    /// Whether delivery `msg_id` of queue `q` is still held here (not lost to the recoverer).
    pub(crate) fn holds(&self, q: usize, msg_id: &str) -> bool {
        self.held()[q].contains_key(msg_id)
    }

    /// The index of `queue` among this server's queues.
    pub(crate) fn queue_index(&self, queue: &QueueName) -> Option<usize> {
        self.queues.iter().position(|(name, _)| name == queue)
    }

    /// Entry ids held in queue `q`.
    pub(crate) fn held_ids(&self, q: usize) -> Vec<String> {
        self.held()[q].keys().cloned().collect()
    }

    /// The heartbeat found these deliveries reclaimed: drop them from the buffer and cancel
    /// them if running. Their new delivery belongs to someone else.
    pub(crate) fn lose(&self, q: usize, lost: &[String]) {
        let mut held = self.held();
        for id in lost {
            if let Some(Held {
                cancel: Some(token),
                ..
            }) = held[q].remove(id)
            {
                token.cancel();
            }
        }
        drop(held);
        self.buffers()[q].retain(|(_, l)| !lost.contains(&l.id.msg_id));
        self.return_tokens(q, lost);
    }

    pub(crate) fn running_count(&self) -> usize {
        usize::try_from(self.counters.running.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    pub(crate) fn is_paused(&self, q: usize) -> bool {
        self.paused[q].load(Ordering::Relaxed)
    }
}

/// Runs `step` every `period`, the first time at once, until the maintenance loops are stopped.
/// A slow step delays the next tick rather than bunching ticks up.
pub(crate) async fn every<B, F, Fut>(rt: &Runtime<B>, period: std::time::Duration, mut step: F)
where
    B: WorkerBroker,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => step().await,
            _ = rt.stop_maintenance.cancelled() => return,
        }
    }
}

/// Takes what arrives on `rx` in batches of at most `max`, grouped by queue, and hands each
/// group to `handle` (one Redis call per queue per batch), until the maintenance loops stop;
/// then it closes the channel, handles what is still queued and returns. A sender that finds
/// the channel closed acts on its own.
pub(crate) async fn batches<B, T, Q, F, Fut>(
    rt: &Runtime<B>,
    mut rx: mpsc::UnboundedReceiver<T>,
    max: usize,
    queue_of: Q,
    mut handle: F,
) where
    B: WorkerBroker,
    Q: Fn(&T) -> &QueueName,
    F: FnMut(QueueName, Vec<T>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut batch = Vec::with_capacity(max);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, max) => n,
            _ = rt.stop_maintenance.cancelled() => {
                rx.close();
                while let Ok(item) = rx.try_recv() {
                    batch.push(item);
                }
                batch.len()
            }
        };
        if n == 0 {
            return;
        }
        let mut by_queue: std::collections::BTreeMap<QueueName, Vec<T>> = Default::default();
        for item in batch.drain(..) {
            by_queue
                .entry(queue_of(&item).clone())
                .or_default()
                .push(item);
        }
        for (queue, items) in by_queue {
            handle(queue, items).await;
        }
        if rt.stop_maintenance.is_cancelled() && rx.is_closed() {
            return;
        }
    }
}
