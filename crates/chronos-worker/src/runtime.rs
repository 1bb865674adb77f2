//! State shared by the loops of one running server: its queues ([`QueueSlot`]), the concurrency
//! slots, the wake-ups between loops, the channels to the batching loops, and the stop signals
//! of shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_core::{Lease, ProgressUpdate, QueueName, QueueSettings, Settlement};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::mark::StartRequest;
use crate::park::Park;
use crate::progress::Cell;
use crate::slot::{Held, QueueSlot};
use crate::WorkerBroker;
use crate::{Mux, QueueLimit, ServerConfig};

/// Counters of one server since it started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Attempts that succeeded.
    pub(crate) succeeded: AtomicU64,
    /// Attempts that failed (retried or dead-lettered).
    pub(crate) failed: AtomicU64,
    /// Tasks dead-lettered, by this server or its recoverer.
    pub(crate) dead: AtomicU64,
    /// Attempts whose handler snoozed the task.
    pub(crate) snoozed: AtomicU64,
    /// Attempts whose handler was rate limited (`TaskError::rate_limited`).
    pub(crate) throttled: AtomicU64,
    /// Tasks whose handler cancelled them (`TaskError::cancel`).
    pub(crate) cancelled: AtomicU64,
    /// Handlers running now (not the dispatcher's permit held while it waits for a task).
    pub(crate) running: AtomicU64,
}

/// What the loops of one running server share.
pub(crate) struct Runtime<B: WorkerBroker> {
    /// The broker every loop talks to.
    pub(crate) broker: B,
    /// The handlers.
    pub(crate) mux: Mux,
    /// The configuration the server was built with.
    pub(crate) config: ServerConfig,
    /// Server id, also the consumer name in every group.
    pub(crate) id: String,
    /// Each queue with what is kept for it, in the configured order: a queue's index (`q`
    /// everywhere) is its place here.
    pub(crate) queues: Vec<QueueSlot>,
    /// Wakes the dispatcher when a buffer gains a task.
    pub(crate) ready: Notify,
    /// Wakes fetchers when a slot or buffer space frees up.
    pub(crate) space: Notify,
    /// Wakes the progress loop when a handler reported progress (progress_writer.rs).
    pub(crate) progress_wake: Arc<Notify>,
    /// The concurrency slots: one permit per handler that may run at once.
    pub(crate) slots: Arc<Semaphore>,
    /// Settlements to send, each with its queue's index (settler.rs).
    pub(crate) settlements: mpsc::UnboundedSender<(usize, Settlement)>,
    /// Deliveries to mark started (starter.rs).
    pub(crate) starts: mpsc::UnboundedSender<StartRequest>,
    /// What [`crate::ServerHandle::stats`] reports.
    pub(crate) counters: Counters,
    /// Stops fetching and dispatching (first step of shutdown).
    pub(crate) stop_fetch: CancellationToken,
    /// Cancels running handlers (shutdown past its grace period); per-task tokens are children.
    pub(crate) hard_cancel: CancellationToken,
    /// Stops the maintenance loops (last step of shutdown).
    pub(crate) stop_maintenance: CancellationToken,
    /// The running handlers, waited for at shutdown.
    pub(crate) running: TaskTracker,
    /// When the server started, for its published record.
    pub(crate) started_at_ms: i64,
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
    /// The limits in force per queue (at the queue's index): the configuration overridden by
    /// the settings stored in Redis, as the settings poller last read them.
    limits: Vec<LimitCell>,
}

/// The limit in force for one queue, and a wake-up for a fetcher that sleeps on the old one.
#[derive(Default)]
struct LimitCell {
    current: Mutex<Option<QueueLimit>>,
    changed: Notify,
}

impl<B: WorkerBroker> Runtime<B> {
    /// The state of a server about to start its loops; each queue comes with its weight and the
    /// settings stored for it when the server started.
    pub(crate) fn new(
        broker: B,
        mux: Mux,
        config: ServerConfig,
        queues: Vec<(QueueName, u32, QueueSettings)>,
        id: String,
        settlements: mpsc::UnboundedSender<(usize, Settlement)>,
        starts: mpsc::UnboundedSender<StartRequest>,
    ) -> Self {
        let (returns, returned) = mpsc::unbounded_channel();
        let mut limits = Vec::with_capacity(queues.len());
        let queues = queues
            .into_iter()
            .map(|(name, weight, stored)| {
                let configured = config.limit_of(name.as_str());
                limits.push(LimitCell {
                    current: Mutex::new(QueueLimit::with_stored(configured, &stored)),
                    changed: Notify::new(),
                });
                // The fetch path is chosen here, once: a queue limited by its config or by
                // stored settings takes the limited path, which follows later changes (a
                // lifted limit included); any other queue keeps the plain path and its cost.
                let path = configured.or_else(|| stored.has_limits().then(QueueLimit::default));
                QueueSlot::new(name, weight, path)
            })
            .collect();
        Self {
            returns,
            returned: Mutex::new(Some(returned)),
            slots: Arc::new(Semaphore::new(config.concurrency)),
            broker,
            mux,
            config,
            id,
            queues,
            ready: Notify::new(),
            space: Notify::new(),
            progress_wake: Arc::new(Notify::new()),
            settlements,
            starts,
            counters: Counters::default(),
            stop_fetch: CancellationToken::new(),
            hard_cancel: CancellationToken::new(),
            stop_maintenance: CancellationToken::new(),
            running: TaskTracker::new(),
            started_at_ms: chronos_core::now_ms(),
            park: Park::default(),
            watching: AtomicBool::new(false),
            awaiting_task: AtomicBool::new(false),
            limits,
        }
    }

    /// The limit in force for queue `q` (None: nothing limits it now).
    pub(crate) fn limit_of(&self, q: usize) -> Option<QueueLimit> {
        self.limits
            .get(q)
            .and_then(|c| *c.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sets the limit in force for queue `q`; true when it changed (a fetcher sleeping on the
    /// old limit is woken).
    pub(crate) fn set_limit(&self, q: usize, limit: Option<QueueLimit>) -> bool {
        let Some(cell) = self.limits.get(q) else {
            return false;
        };
        let mut current = cell.current.lock().unwrap_or_else(|p| p.into_inner());
        if *current == limit {
            return false;
        }
        *current = limit;
        cell.changed.notify_waiters();
        true
    }

    /// A wake-up for the next change of the limit of queue `q`, registered at once: take it
    /// before reading the limit, so a change made between the read and the wait still wakes.
    pub(crate) fn limit_changed(&self, q: usize) -> Option<std::pin::Pin<Box<Notified<'_>>>> {
        let mut n = Box::pin(self.limits.get(q)?.changed.notified());
        n.as_mut().enable();
        Some(n)
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
        let mut d = self.queues[q].lock();
        for l in leases {
            d.held.entry(l.id.msg_id.clone()).or_default();
        }
    }

    /// Records the concurrency token each delivery holds until it is let go.
    pub(crate) fn set_tokens(&self, q: usize, pairs: impl IntoIterator<Item = (String, String)>) {
        self.queues[q].lock().tokens.extend(pairs);
    }

    /// The concurrency tokens held in queue `q` (for the heartbeat to keep alive).
    pub(crate) fn tokens_of(&self, q: usize) -> Vec<String> {
        self.queues[q].lock().tokens.values().cloned().collect()
    }

    /// Gives back the tokens of deliveries of `slot` that this server let go (batched by the
    /// permit loop); `tokens` is the slot's, already locked. Once that loop has stopped the
    /// tokens simply expire.
    fn return_tokens<'a>(
        &self,
        slot: &QueueSlot,
        tokens: &mut HashMap<String, String>,
        msg_ids: impl IntoIterator<Item = &'a str>,
    ) {
        // Only a queue with a concurrency limit holds tokens: spare the others the lookups.
        // The map, not the limit in force, decides: tokens taken before a limit was lifted at
        // run time still go back.
        if tokens.is_empty() {
            return;
        }
        for id in msg_ids {
            if let Some(t) = tokens.remove(id) {
                let _ = self.returns.send((slot.name.clone(), t));
            }
        }
    }

    /// Tasks fetched but not started, over all queues.
    pub(crate) fn buffered(&self) -> usize {
        self.queues.iter().map(|s| s.lock().buffer.len()).sum()
    }

    /// Tasks fetched but not started in queue `q`.
    pub(crate) fn buffered_in(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |s| s.lock().buffer.len())
    }

    /// Adds fetched leases to the buffer of queue `q` and to the held set.
    pub(crate) fn push(&self, q: usize, leases: Vec<Lease>) {
        let slot = &self.queues[q];
        {
            let mut d = slot.lock();
            for l in &leases {
                d.held.insert(l.id.msg_id.clone(), Held::default());
            }
            let now = std::time::Instant::now();
            d.buffer.extend(leases.into_iter().map(|l| (now, l)));
        }
        slot.set_drained(false);
        slot.touched
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.ready.notify_one();
    }

    /// A non-blocking read of queue `q` found nothing.
    pub(crate) fn mark_drained(&self, q: usize) {
        self.queues[q].set_drained(true);
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
        let candidates: Vec<usize> = (0..self.queues.len())
            .filter(|&i| {
                let s = &self.queues[i];
                !s.lock().buffer.is_empty() || (!s.is_paused() && !s.is_drained())
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
                .max_by_key(|&i| (self.queues[i].weight, usize::MAX - i))
            {
                Some(i) => i,
                None => return Err(None),
            }
        } else {
            let total: u64 = candidates
                .iter()
                .map(|&i| u64::from(self.queues[i].weight))
                .sum();
            if total == 0 {
                return Err(None);
            }
            let mut r = rand::random::<u64>() % total;
            let mut drawn = candidates[0];
            for &i in &candidates {
                let w = u64::from(self.queues[i].weight);
                if r < w {
                    drawn = i;
                    break;
                }
                r -= w;
            }
            drawn
        };
        // Bound first: the guard of a `match` scrutinee would live through the whole match.
        let next = self.queues[pick].lock().buffer.pop_front();
        match next {
            Some((at, lease)) => Ok((pick, lease, at.elapsed())),
            None => Err(Some(pick)),
        }
    }

    /// Removes and returns every buffered lease (shutdown), per queue.
    pub(crate) fn drain_buffers(&self) -> Vec<Vec<Lease>> {
        self.queues
            .iter()
            .map(|slot| {
                let mut d = slot.lock();
                let leases: Vec<Lease> = d.buffer.drain(..).map(|(_, l)| l).collect();
                for l in &leases {
                    d.held.remove(&l.id.msg_id);
                }
                let ids = leases.iter().map(|l| l.id.msg_id.as_str());
                self.return_tokens(slot, &mut d.tokens, ids);
                leases
            })
            .collect()
    }

    /// Marks a delivery as running with its cancellation token, its handler's signal, the
    /// cell its handler reports progress to, and what runs (task id, kind, start in unix ms).
    pub(crate) fn mark_running(
        &self,
        q: usize,
        msg_id: &str,
        cancel: CancellationToken,
        signal: CancellationToken,
        progress: Arc<Cell>,
        running: (String, String, i64),
    ) {
        self.queues[q].lock().held.insert(
            msg_id.to_string(),
            Held {
                cancel: Some(cancel),
                signal: Some(signal),
                progress: Some(progress),
                running: Some(running),
            },
        );
    }

    /// The tasks running now, longest running first, at most `limit`.
    pub(crate) fn running_tasks(&self, limit: usize) -> Vec<chronos_core::RunningTask> {
        let mut out = Vec::new();
        for slot in &self.queues {
            let d = slot.lock();
            out.extend(d.held.values().filter_map(|h| {
                let (id, kind, started_at_ms) = h.running.as_ref()?;
                Some(chronos_core::RunningTask {
                    queue: slot.name.to_string(),
                    id: id.clone(),
                    kind: kind.clone(),
                    started_at_ms: *started_at_ms,
                })
            }));
        }
        out.sort_by_key(|t| t.started_at_ms);
        out.truncate(limit);
        out
    }

    /// The progress values of queue `q`'s running deliveries not yet written, each with its
    /// cell and version (progress_writer.rs).
    pub(crate) fn unwritten_progress(&self, q: usize) -> Vec<(ProgressUpdate, Arc<Cell>, u64)> {
        self.queues[q]
            .lock()
            .held
            .iter()
            .filter_map(|(mid, h)| {
                let cell = h.progress.as_ref()?;
                let (u, v) = cell.unwritten(mid)?;
                Some((u, cell.clone(), v))
            })
            .collect()
    }

    /// Entry ids of the deliveries of queue `q` whose handlers run now.
    pub(crate) fn running_ids(&self, q: usize) -> Vec<String> {
        self.queues[q]
            .lock()
            .held
            .iter()
            .filter(|(_, h)| h.signal.is_some())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Fires the handler signal of these running deliveries (an operator's cancel).
    pub(crate) fn signal(&self, q: usize, msg_ids: &[String]) {
        let d = self.queues[q].lock();
        for id in msg_ids {
            if let Some(Held {
                signal: Some(token),
                ..
            }) = d.held.get(id)
            {
                token.cancel();
            }
        }
    }

    /// The delivery ended here (settled, lost, deferred or handed back): stop holding it and
    /// give back its concurrency token.
    pub(crate) fn release(&self, q: usize, msg_id: &str) {
        let slot = &self.queues[q];
        let mut d = slot.lock();
        d.held.remove(msg_id);
        self.return_tokens(slot, &mut d.tokens, [msg_id]);
    }

    /// Whether delivery `msg_id` of queue `q` is still held here (not lost to the recoverer).
    pub(crate) fn holds(&self, q: usize, msg_id: &str) -> bool {
        self.queues[q].lock().held.contains_key(msg_id)
    }

    /// The index of `queue` among this server's queues.
    pub(crate) fn queue_index(&self, queue: &QueueName) -> Option<usize> {
        self.queues.iter().position(|s| s.name == *queue)
    }

    /// Entry ids held in queue `q`.
    pub(crate) fn held_ids(&self, q: usize) -> Vec<String> {
        self.queues[q].lock().held.keys().cloned().collect()
    }

    /// The heartbeat found these deliveries reclaimed: drop them from the buffer and cancel
    /// them if running. Their new delivery belongs to someone else.
    pub(crate) fn lose(&self, q: usize, lost: &[String]) {
        let slot = &self.queues[q];
        let mut d = slot.lock();
        for id in lost {
            if let Some(Held {
                cancel: Some(token),
                ..
            }) = d.held.remove(id)
            {
                token.cancel();
            }
        }
        d.buffer.retain(|(_, l)| !lost.contains(&l.id.msg_id));
        self.return_tokens(slot, &mut d.tokens, lost.iter().map(String::as_str));
    }

    /// Handlers running now.
    pub(crate) fn running_count(&self) -> usize {
        usize::try_from(self.counters.running.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// Whether queue `q` is paused.
    pub(crate) fn is_paused(&self, q: usize) -> bool {
        self.queues[q].is_paused()
    }
}
