use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{QueueName, Signal};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::runtime::Runtime;
use crate::{
    canceller, dispatcher, fetcher, forwarder, heartbeat, janitor, limiter, progress_writer,
    recoverer, sampler, settings_poller, settler, starter, watcher,
};
use crate::{Mux, ServerConfig, WorkerBroker, WorkerError};

/// How often the paused-queue set is read when the broker pushes no signals: pausing takes
/// effect within this time. With signals, a pause takes effect when its push arrives, and the
/// set is read only at start, after each reconnect of the subscriber, and every
/// [`ServerConfig::safety_interval`].
const PAUSE_POLL: Duration = Duration::from_millis(500);

/// Runs the handlers of a [`Mux`] on tasks from a broker. Configure, then [`Server::start`].
pub struct Server<B: WorkerBroker> {
    broker: B,
    mux: Mux,
    config: ServerConfig,
    queues: Vec<(QueueName, u32)>,
}

impl<B: WorkerBroker> std::fmt::Debug for Server<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .field("mux", &self.mux)
            .finish()
    }
}

/// Snapshot of a running server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Attempts that succeeded.
    pub succeeded: u64,
    /// Attempts that failed (each retry or dead letter counts once).
    pub failed: u64,
    /// Tasks dead-lettered by this server (including by its recoverer).
    pub dead: u64,
    /// Attempts whose handler snoozed the task (no attempt spent).
    pub snoozed: u64,
    /// Attempts whose handler was rate limited and blocked its rate key or queue
    /// ([`crate::TaskError::rate_limited`]; no attempt spent).
    pub throttled: u64,
    /// Tasks whose handler ended them as cancelled ([`crate::TaskError::cancel`]; not failures).
    pub cancelled: u64,
    /// Handlers running now.
    pub running: u64,
}

impl<B: WorkerBroker> Server<B> {
    /// Validates `config` (queue names, weights, intervals) and builds a server.
    pub fn new(broker: B, mux: Mux, config: ServerConfig) -> Result<Self, WorkerError> {
        let queues = config.validate()?;
        Ok(Self {
            broker,
            mux,
            config,
            queues,
        })
    }

    /// Starts the fetch, dispatch, heartbeat, forwarder, recoverer, janitor and pause loops (and
    /// the metrics endpoint and queue sampler when configured) and returns at once. Fails when
    /// Redis cannot be reached to register the server, or the metrics endpoint cannot start.
    pub async fn start(self) -> Result<ServerHandle, WorkerError> {
        let id = format!(
            "{}:{}:{:08x}",
            hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "host".into()),
            std::process::id(),
            rand::random::<u32>()
        );
        for (queue, _) in &self.queues {
            self.broker.ensure_queue(queue).await?;
        }
        // The families' descriptions, for a recorder the application installed itself.
        crate::metrics::describe();
        // Before any loop starts, so that every metric the loops register goes to this recorder.
        #[cfg(feature = "prometheus")]
        let endpoint = match self.config.metrics_addr {
            Some(addr) => {
                // A sampled gauge must outlive the gap between two samples.
                let period = self.config.sample_queues.unwrap_or_default();
                let idle = crate::metrics::GAUGE_IDLE_TIMEOUT.max(period.saturating_mul(3));
                Some(crate::metrics::serve_with(addr, idle).await?)
            }
            None => None,
        };
        // Before the fetchers start: stored limits choose a queue's fetch path too.
        let stored = settings_poller::read_all(&self.broker, &self.queues).await;
        let (settle_tx, settle_rx) = mpsc::unbounded_channel();
        let (start_tx, start_rx) = mpsc::unbounded_channel();
        let rt = Arc::new(Runtime::new(
            self.broker,
            self.mux,
            self.config,
            self.queues
                .into_iter()
                .zip(stored)
                .map(|((name, weight), s)| (name, weight, s))
                .collect(),
            id.clone(),
            settle_tx,
            start_tx,
        ));
        refresh_paused(&rt).await;
        heartbeat::beat(&rt).await;

        let mut fetchers = Vec::new();
        // The shared read of idle queues, when the broker can do it; waited for at shutdown
        // with the fetchers, since what its last read took goes into their buffers.
        if rt.queues.iter().any(|s| s.limit.is_none()) {
            if let Some(reader) = watcher::open(&rt.broker, &rt.id).await {
                rt.watching.store(true, Ordering::Relaxed);
                fetchers.push(tokio::spawn(watcher::run(rt.clone(), reader)));
            }
        }
        for q in 0..rt.queues.len() {
            fetchers.push(tokio::spawn(fetcher::run(rt.clone(), q)));
        }
        let dispatcher = tokio::spawn(dispatcher::run(rt.clone()));
        let settling = tokio::spawn(settler::run(rt.clone(), settle_rx));
        let starter = tokio::spawn(starter::run(rt.clone(), start_rx));
        let mut maintenance = vec![
            tokio::spawn(heartbeat::run(rt.clone())),
            tokio::spawn(progress_writer::run(rt.clone())),
            tokio::spawn(forwarder::run(rt.clone())),
            tokio::spawn(recoverer::run(rt.clone())),
            tokio::spawn(janitor::run(rt.clone())),
            tokio::spawn(pause_poller(rt.clone())),
            tokio::spawn(canceller::run(rt.clone())),
            tokio::spawn(settings_poller::run(rt.clone())),
            starter,
        ];
        // Always: a queue may get a concurrency limit while it runs (stored settings). Idle, it
        // waits on a channel and costs Redis nothing.
        if let Some(returns) = rt.take_returns() {
            maintenance.push(tokio::spawn(limiter::run(rt.clone(), returns)));
        }
        if let Some(period) = rt.config.sample_queues {
            maintenance.push(tokio::spawn(sampler::run(rt.clone(), period)));
        }
        let queues: Vec<_> = rt.queues.iter().map(|s| (&s.name, s.weight)).collect();
        info!(server = %id, ?queues, concurrency = rt.config.concurrency, "server started");
        let handle_rt = rt.clone();
        let stop = rt.stop_fetch.clone();
        #[cfg(feature = "prometheus")]
        let metrics_addr = endpoint
            .as_ref()
            .map(crate::metrics::MetricsEndpoint::local_addr);
        let supervisor = tokio::spawn(async move {
            stop.cancelled().await;
            shut_down(rt, fetchers, dispatcher, settling, maintenance).await;
            #[cfg(feature = "prometheus")]
            if let Some(endpoint) = endpoint {
                endpoint.stop();
            }
        });
        Ok(ServerHandle {
            id,
            #[cfg(feature = "prometheus")]
            metrics_addr,
            stop: handle_rt.stop_fetch.clone(),
            stats: Box::new(move || stats(&handle_rt)),
            supervisor,
        })
    }
}

fn stats<B: WorkerBroker>(rt: &Runtime<B>) -> ServerStats {
    ServerStats {
        succeeded: rt.counters.succeeded.load(Ordering::Relaxed),
        failed: rt.counters.failed.load(Ordering::Relaxed),
        dead: rt.counters.dead.load(Ordering::Relaxed),
        snoozed: rt.counters.snoozed.load(Ordering::Relaxed),
        throttled: rt.counters.throttled.load(Ordering::Relaxed),
        cancelled: rt.counters.cancelled.load(Ordering::Relaxed),
        running: rt.running_count() as u64,
    }
}

/// A started server. Dropping it does not stop the server; call [`ServerHandle::shutdown`].
pub struct ServerHandle {
    id: String,
    #[cfg(feature = "prometheus")]
    metrics_addr: Option<std::net::SocketAddr>,
    stop: tokio_util::sync::CancellationToken,
    stats: Box<dyn Fn() -> ServerStats + Send + Sync>,
    supervisor: JoinHandle<()>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The server id: its consumer name in every group and the key of its published record.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the metrics page is served (None without [`ServerConfig::metrics_addr`]).
    #[cfg(feature = "prometheus")]
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_addr
    }

    /// Counters since start.
    pub fn stats(&self) -> ServerStats {
        (self.stats)()
    }

    /// Stops gracefully: stops fetching, puts fetched-but-unstarted tasks back in their queue
    /// without spending an attempt, lets running handlers finish within the shutdown timeout
    /// (their leases stay fresh meanwhile), then cancels the rest (each is retried, not lost),
    /// sends pending settlements and withdraws the server record.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Err(e) = self.supervisor.await {
            warn!(error = %e, "server supervisor ended abnormally");
        }
    }
}

async fn shut_down<B: WorkerBroker>(
    rt: Arc<Runtime<B>>,
    fetchers: Vec<JoinHandle<()>>,
    dispatcher: JoinHandle<()>,
    settling: JoinHandle<()>,
    maintenance: Vec<JoinHandle<()>>,
) {
    info!(server = %rt.id, "shutting down");
    // 1. No new reads; each fetcher finishes the read in flight (at most one block).
    let _ = dispatcher.await;
    for f in fetchers {
        let _ = f.await;
    }
    // 2. Unstarted tasks go back to their queues without an attempt.
    for (q, leases) in rt.drain_buffers().into_iter().enumerate() {
        if leases.is_empty() {
            continue;
        }
        let queue = &rt.queues[q].name;
        match settler::requeue(&rt, leases.into_iter().map(|l| l.id)).await {
            Ok(n) => info!(queue = %queue, n, "returned unstarted tasks to the queue"),
            Err(e) => warn!(error = %e, "could not return unstarted tasks; they will be recovered"),
        }
    }
    // 3. Running handlers get the grace period; the heartbeat keeps their leases fresh.
    rt.running.close();
    if tokio::time::timeout(rt.config.shutdown_timeout, rt.running.wait())
        .await
        .is_err()
    {
        warn!(
            running = rt.running_count(),
            "shutdown timeout: cancelling running handlers"
        );
        rt.hard_cancel.cancel();
        if tokio::time::timeout(Duration::from_secs(5), rt.running.wait())
            .await
            .is_err()
        {
            warn!("handlers did not settle after cancellation; the recoverer will re-deliver them");
        }
    }
    // 4. Stop the loops; the settler sends every settlement still queued before it ends.
    rt.stop_maintenance.cancel();
    for m in maintenance {
        let _ = m.await;
    }
    let _ = settling.await;
    crate::heartbeat::flush_timings(&rt).await;
    if let Err(e) = rt.broker.remove_server(&rt.id).await {
        warn!(error = %e, "could not withdraw the server record; it expires by itself");
    }
    info!(server = %rt.id, "server stopped");
}

async fn pause_poller<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    let mut signals = match rt.broker.signals().await {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "could not subscribe to pause changes; polling the paused set");
            None
        }
    };
    // Read once after subscribing: a change made before it is not pushed to us.
    if signals.is_some() {
        refresh_paused(&rt).await;
    }
    loop {
        let period = match signals {
            Some(_) => rt.config.safety_interval,
            None => PAUSE_POLL,
        };
        let pushed = async {
            match signals.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(period) => refresh_paused(&rt).await,
            s = pushed => match s {
                Some(Signal::Paused | Signal::Resync) => refresh_paused(&rt).await,
                Some(Signal::Due { .. } | Signal::Settings { .. }) => {}
                None => {
                    warn!("the signal subscriber is gone; polling the paused set");
                    signals = None;
                }
            },
            _ = rt.stop_maintenance.cancelled() => return,
        }
    }
}

async fn refresh_paused<B: WorkerBroker>(rt: &Runtime<B>) {
    match rt.broker.paused_queues().await {
        Ok(paused) => {
            let mut changed = false;
            for slot in &rt.queues {
                changed |= slot.set_paused(paused.contains(&slot.name));
            }
            if changed {
                // The shared read must stop (or start) watching the queues that changed.
                rt.park.refresh();
            }
        }
        Err(e) => warn!(error = %e, "could not read paused queues"),
    }
}
