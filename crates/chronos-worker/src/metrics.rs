//! What the worker reports through the `metrics` facade, and (with the
//! `prometheus` feature) a Prometheus page to serve it from.
//!
//! The facade costs nothing until a recorder is installed: install yours (or let
//! `ServerConfig::metrics_addr` install the built-in Prometheus one) before the server
//! starts, since the handles the worker keeps per queue and kind are bound to the recorder that
//! was installed when they were first used.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `chronos_tasks_processed_total` | counter | `queue`, `kind`, `outcome` | attempts that ended: `succeeded`, `retried`, `dead_lettered`, `snoozed` (the handler asked to run later: no attempt spent), `throttled` (the handler was rate limited and blocked its rate key or queue: no attempt spent), `cancelled` (the handler ended the task as cancelled: not a failure), `lease_lost`, `requeued` (shutdown) |
//! | `chronos_tasks_failed_total` | counter | `queue`, `kind` | attempts that failed (retried or dead-lettered) |
//! | `chronos_task_duration_seconds` | histogram | `queue`, `kind` | handler run time ([`DURATION_BUCKETS`]) |
//! | `chronos_tasks_recovered_total` | counter | `queue` | deliveries of lost workers taken back and re-queued |
//! | `chronos_tasks_dead_lettered_total` | counter | `queue`, `kind`, `action` | tasks archived or discarded (`action`), by this server or its recoverer |
//! | `chronos_worker_running_tasks` | gauge | | handlers running in this process |
//! | `chronos_rate_limit_waits_total` | counter | `queue` | times a fetcher of a limited queue got no permit and waited ([`crate::QueueLimit`]) |
//! | `chronos_rate_limit_deferred_total` | counter | `queue` | fetched tasks deferred because their rate key was full |
//! | `chronos_queue_tasks` | gauge | `queue`, `state` | tasks per state (`pending`, `active`, `scheduled`, `retry`, `archived`, `completed`) |
//! | `chronos_queue_oldest_pending_age_seconds` | gauge | `queue` | how long the oldest pending task has waited (0 when none) |
//! | `chronos_queue_paused` | gauge | `queue` | 1 while the queue is paused |
//! | `chronos_queue_level_tasks` | gauge | `queue`, `level`, `state` | for a queue whose tasks use priority levels: tasks per level (`0`..`9`) and state (`pending`, `active`) |
//! | `chronos_queue_level_oldest_pending_age_seconds` | gauge | `queue`, `level` | for a queue with levels: how long the oldest pending task of each level has waited (0 when none) |
//! | `chronos_queue_tenant_tasks` | gauge | `queue`, `tenant`, `state` | for a queue shared by tenants: tasks per tenant and state (`waiting`, `running`), for the [`SAMPLED_TENANTS`] tenants with the most waiting, and `tenant="other"` summing the rest |
//! | `chronos_queue_tenant_oldest_pending_age_seconds` | gauge | `queue`, `tenant` | for the same tenants: how long the next task of each to start has waited (0 when none); for `other`, the oldest among the rest |
//!
//! The `chronos_queue_*` gauges are cluster-wide: one process at a time (the holder of a short
//! lease in Redis) samples every queue every [`crate::ServerConfig::sample_queues`] and
//! sets them, so they cost Redis a few O(1) reads per queue per period, never a scan per
//! scrape. Sum or max them over instances without double counting: only the lease holder sets
//! them, and the built-in endpoint drops a gauge that nobody set for [`GAUGE_IDLE_TIMEOUT`], so
//! a process that lost the lease stops exporting its last values.
//!
//! The tenant gauges stay bounded whatever the number of tenants: at most
//! [`SAMPLED_TENANTS`] + 1 `tenant` values per queue. A tenant that leaves the busiest is set to
//! 0 once, then dropped with the idle gauges; a tenant whose key is `other` is counted in
//! `other`. (Over Redis, `other`'s age covers the busiest thousand of the rest.)
//!
//! The scheduler (crate `chronos-scheduler`) reports through the same facade:
//! `chronos_scheduler_triggers_fired_total`, `chronos_scheduler_triggers_missed_total`,
//! `chronos_scheduler_triggers_suppressed_total` (all by `queue`),
//! `chronos_scheduler_trigger_lateness_seconds` (histogram by `queue`, [`LATENESS_BUCKETS`]) and
//! `chronos_scheduler_leader` (gauge, 1 on the leader).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use ::metrics::{counter, gauge, histogram, Counter, Histogram};
pub use chronos_core::SAMPLED_TENANTS;

/// Attempts that ended, by `queue`, `kind` and `outcome`.
pub const TASKS_PROCESSED: &str = "chronos_tasks_processed_total";
/// Attempts that failed, by `queue` and `kind`.
pub const TASKS_FAILED: &str = "chronos_tasks_failed_total";
/// Handler run time in seconds, by `queue` and `kind`.
pub const TASK_DURATION: &str = "chronos_task_duration_seconds";
/// Deliveries of lost workers re-queued by the recoverer, by `queue`.
pub const TASKS_RECOVERED: &str = "chronos_tasks_recovered_total";
/// Tasks dead-lettered, by `queue`, `kind` and `action` (`archived` or `discarded`).
pub const TASKS_DEAD_LETTERED: &str = "chronos_tasks_dead_lettered_total";
/// Times a fetcher of a limited queue got no permit and waited, by `queue`.
pub const RATE_LIMIT_WAITS: &str = "chronos_rate_limit_waits_total";
/// Fetched tasks deferred because their rate key was full, by `queue`.
pub const RATE_LIMIT_DEFERRED: &str = "chronos_rate_limit_deferred_total";
/// Handlers running in this process.
pub const WORKER_RUNNING: &str = "chronos_worker_running_tasks";
/// Tasks per `queue` and `state`, sampled cluster-wide by one process.
pub const QUEUE_TASKS: &str = "chronos_queue_tasks";
/// Seconds the oldest pending task of `queue` has waited, sampled by one process.
pub const QUEUE_OLDEST_PENDING_AGE: &str = "chronos_queue_oldest_pending_age_seconds";
/// 1 while `queue` is paused, sampled by one process.
pub const QUEUE_PAUSED: &str = "chronos_queue_paused";
/// Tasks per `queue`, priority `level` and `state` (pending, active), for queues with levels.
pub const QUEUE_LEVEL_TASKS: &str = "chronos_queue_level_tasks";
/// Seconds the oldest pending task of each `level` of `queue` has waited, for queues with
/// levels.
pub const QUEUE_LEVEL_OLDEST_PENDING_AGE: &str = "chronos_queue_level_oldest_pending_age_seconds";
/// Tasks per `queue`, `tenant` and `state` (waiting, running), for the busiest tenants and
/// `other`.
pub const QUEUE_TENANT_TASKS: &str = "chronos_queue_tenant_tasks";
/// Seconds the next task to start of each `tenant` of `queue` has waited, for the busiest
/// tenants and `other`.
pub const QUEUE_TENANT_OLDEST_PENDING_AGE: &str = "chronos_queue_tenant_oldest_pending_age_seconds";
/// The `tenant` label of the tenants summed together.
pub const OTHER_TENANTS: &str = "other";
/// The scheduler's trigger lateness histogram (named here for its buckets).
pub const SCHEDULER_LATENESS: &str = "chronos_scheduler_trigger_lateness_seconds";

/// Bucket bounds (seconds) of [`TASK_DURATION`]: from a 5 ms handler to a 10 min one.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0, 600.0,
];

/// Bucket bounds (seconds) of [`SCHEDULER_LATENESS`]: on time (a few ms) to an hour's catch-up.
pub const LATENESS_BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 3600.0,
];

/// A gauge that no process has set for this long disappears from the built-in endpoint (with
/// `ServerConfig::metrics_addr`: three sampling periods, when that is longer).
pub const GAUGE_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Most distinct kinds labelled per queue; further kinds (a producer writing junk kinds) share
/// the label `other`, so a bad producer cannot blow up the exporter's memory.
const MAX_KINDS_PER_QUEUE: usize = 256;

/// Gives every family above its `# HELP` text in the installed recorder (a recorder keeps the
/// first description of a name; one installed later gets none, so this runs when the built-in
/// endpoint installs its recorder and when a server starts). The scheduler describes its own.
pub(crate) fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        TASKS_PROCESSED,
        "Attempts that ended, by queue, kind and outcome (succeeded, retried, dead_lettered, \
         snoozed, throttled, cancelled, lease_lost, requeued)."
    );
    describe_counter!(
        TASKS_FAILED,
        "Attempts that failed (retried or dead-lettered), by queue and kind."
    );
    describe_histogram!(
        TASK_DURATION,
        "Handler run time in seconds, by queue and kind."
    );
    describe_counter!(
        TASKS_RECOVERED,
        "Deliveries of lost workers taken back and re-queued, by queue."
    );
    describe_counter!(
        TASKS_DEAD_LETTERED,
        "Tasks archived or discarded (action), by queue and kind."
    );
    describe_gauge!(WORKER_RUNNING, "Handlers running in this process.");
    describe_counter!(
        RATE_LIMIT_WAITS,
        "Times a fetcher of a limited queue got no permit and waited, by queue."
    );
    describe_counter!(
        RATE_LIMIT_DEFERRED,
        "Fetched tasks deferred because their rate key was full, by queue."
    );
    describe_gauge!(
        QUEUE_TASKS,
        "Tasks per queue and state, sampled cluster-wide by one process."
    );
    describe_gauge!(
        QUEUE_OLDEST_PENDING_AGE,
        "Seconds the oldest pending task of the queue has waited (0 when none)."
    );
    describe_gauge!(QUEUE_PAUSED, "1 while the queue is paused.");
    describe_gauge!(
        QUEUE_LEVEL_TASKS,
        "Tasks per queue, priority level and state (pending, active), for queues with levels."
    );
    describe_gauge!(
        QUEUE_LEVEL_OLDEST_PENDING_AGE,
        "Seconds the oldest pending task of each priority level has waited (0 when none)."
    );
    describe_gauge!(
        QUEUE_TENANT_TASKS,
        "Tasks per queue, tenant and state (waiting, running), for the busiest tenants and \
         other."
    );
    describe_gauge!(
        QUEUE_TENANT_OLDEST_PENDING_AGE,
        "Seconds the next task of each tenant has waited (0 when none), for the busiest \
         tenants and other."
    );
}

/// How an attempt ended, as the `outcome` label says it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ended {
    Succeeded,
    Retried,
    DeadLettered,
    Snoozed,
    Throttled,
    Cancelled,
    LeaseLost,
    Requeued,
}

/// Handles of one (queue, kind): registered once, so the hot path only bumps atomics (no label
/// allocation, no recorder lookup per task).
pub(crate) struct KindMetrics {
    /// The `kind` label these handles carry: the kind, or `other` past the cap.
    label: String,
    succeeded: Counter,
    retried: Counter,
    dead_lettered: Counter,
    snoozed: Counter,
    throttled: Counter,
    cancelled: Counter,
    lease_lost: Counter,
    requeued: Counter,
    failed: Counter,
    duration: Histogram,
}

impl KindMetrics {
    fn new(queue: &str, kind: &str) -> Self {
        let outcome = |o: &'static str| counter!(TASKS_PROCESSED, "queue" => queue.to_string(), "kind" => kind.to_string(), "outcome" => o);
        Self {
            label: kind.to_string(),
            succeeded: outcome("succeeded"),
            retried: outcome("retried"),
            dead_lettered: outcome("dead_lettered"),
            snoozed: outcome("snoozed"),
            throttled: outcome("throttled"),
            cancelled: outcome("cancelled"),
            lease_lost: outcome("lease_lost"),
            requeued: outcome("requeued"),
            failed: counter!(TASKS_FAILED, "queue" => queue.to_string(), "kind" => kind.to_string()),
            duration: histogram!(TASK_DURATION, "queue" => queue.to_string(), "kind" => kind.to_string()),
        }
    }

    /// Counts one ended attempt.
    pub(crate) fn ended(&self, how: Ended) {
        match how {
            Ended::Succeeded => self.succeeded.increment(1),
            Ended::Retried => {
                self.retried.increment(1);
                self.failed.increment(1);
            }
            Ended::DeadLettered => {
                self.dead_lettered.increment(1);
                self.failed.increment(1);
            }
            Ended::Snoozed => self.snoozed.increment(1),
            Ended::Throttled => self.throttled.increment(1),
            Ended::Cancelled => self.cancelled.increment(1),
            Ended::LeaseLost => self.lease_lost.increment(1),
            Ended::Requeued => self.requeued.increment(1),
        }
    }

    /// Records one handler run.
    pub(crate) fn ran(&self, took: Duration) {
        self.duration.record(took.as_secs_f64());
    }
}

type Cache = HashMap<String, HashMap<String, Arc<KindMetrics>>>;

static HANDLES: LazyLock<RwLock<Cache>> = LazyLock::new(|| RwLock::new(HashMap::new()));

/// The handles of `queue` and `kind` (`kind` None: the envelope did not decode).
pub(crate) fn task(queue: &str, kind: Option<&str>) -> Arc<KindMetrics> {
    let kind = kind.unwrap_or("unknown");
    {
        let cache = HANDLES.read().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = cache.get(queue).and_then(|kinds| kinds.get(kind)) {
            return m.clone();
        }
    }
    let mut cache = HANDLES.write().unwrap_or_else(|p| p.into_inner());
    let kinds = cache.entry(queue.to_string()).or_default();
    if let Some(m) = kinds.get(kind) {
        return m.clone();
    }
    let label = if kinds.len() < MAX_KINDS_PER_QUEUE {
        kind
    } else {
        "other"
    };
    if let Some(m) = kinds.get(label) {
        return m.clone();
    }
    let m = Arc::new(KindMetrics::new(queue, label));
    kinds.insert(label.to_string(), m.clone());
    m
}

/// Drops every cached handle, so handles registered before a recorder was installed (no-ops)
/// are registered again with it.
#[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
pub(crate) fn forget_handles() {
    HANDLES.write().unwrap_or_else(|p| p.into_inner()).clear();
}

/// Counts one dead-lettered task (off the hot path: a label lookup per call is fine). Its
/// `kind` label is capped per queue like every other ([`MAX_KINDS_PER_QUEUE`]).
pub(crate) fn dead_lettered(queue: &str, kind: Option<&str>, discarded: bool) {
    let action = if discarded { "discarded" } else { "archived" };
    let label = task(queue, kind).label.clone();
    counter!(TASKS_DEAD_LETTERED, "queue" => queue.to_string(), "kind" => label, "action" => action)
        .increment(1);
}

/// Counts deliveries re-queued by the recoverer.
pub(crate) fn recovered(queue: &str, n: u64) {
    counter!(TASKS_RECOVERED, "queue" => queue.to_string()).increment(n);
}

/// Counts a fetcher's wait for permits of a limited queue.
pub(crate) fn permit_wait(queue: &str) {
    counter!(RATE_LIMIT_WAITS, "queue" => queue.to_string()).increment(1);
}

/// Counts tasks deferred by their rate key.
pub(crate) fn deferred(queue: &str, n: u64) {
    counter!(RATE_LIMIT_DEFERRED, "queue" => queue.to_string()).increment(n);
}

/// Sets this process's running-handlers gauge.
pub(crate) fn running(n: usize) {
    gauge!(WORKER_RUNNING).set(n as f64);
}

/// Sets the cluster-wide gauges of one queue from a sample.
pub(crate) fn queue_sample(queue: &str, sample: &chronos_core::QueueSample, paused: bool) {
    let s = &sample.stats;
    for (state, n) in [
        ("pending", s.pending),
        ("active", s.active),
        ("scheduled", s.scheduled),
        ("retry", s.retry),
        ("archived", s.archived),
        ("completed", s.completed),
    ] {
        gauge!(QUEUE_TASKS, "queue" => queue.to_string(), "state" => state).set(n as f64);
    }
    if let Some(age) = sample.oldest_pending_age() {
        gauge!(QUEUE_OLDEST_PENDING_AGE, "queue" => queue.to_string()).set(age.as_secs_f64());
    }
    gauge!(QUEUE_PAUSED, "queue" => queue.to_string()).set(if paused { 1.0 } else { 0.0 });
    // At most ten levels per queue: the label set stays bounded.
    for l in &s.levels {
        let level = l.priority.to_string();
        for (state, n) in [("pending", l.pending), ("active", l.active)] {
            gauge!(QUEUE_LEVEL_TASKS, "queue" => queue.to_string(), "level" => level.clone(), "state" => state)
                .set(n as f64);
        }
        let age = l.oldest_pending_ms.unwrap_or(0) as f64 / 1000.0;
        gauge!(QUEUE_LEVEL_OLDEST_PENDING_AGE, "queue" => queue.to_string(), "level" => level)
            .set(age);
    }
    tenant_sample(queue, sample);
}

/// The `tenant` labels set by the last sample of each queue: those that drop out are set to 0
/// once, so a tenant that left the busiest does not keep its last count until the idle timeout.
static TENANT_LABELS: LazyLock<std::sync::Mutex<HashMap<String, HashSet<String>>>> =
    LazyLock::new(Default::default);

/// Sets the tenant gauges of one queue from a sample (see the module docs for the bounds).
fn tenant_sample(queue: &str, sample: &chronos_core::QueueSample) {
    let at = sample.sampled_at_ms;
    let mut set: Vec<(String, u64, u64, f64)> = Vec::new();
    let (mut other_waiting, mut other_running) = (0, 0);
    let mut other_age: Option<f64> = None;
    let mut other = |t: &chronos_core::TenantSample| {
        other_waiting += t.waiting;
        other_running += t.running;
        let age = t.oldest_age(at).as_secs_f64();
        other_age = Some(other_age.map_or(age, |a: f64| a.max(age)));
    };
    for t in &sample.tenants {
        if t.tenant == OTHER_TENANTS {
            other(t);
        } else if t.waiting > 0 || t.running > 0 {
            set.push((
                t.tenant.clone(),
                t.waiting,
                t.running,
                t.oldest_age(at).as_secs_f64(),
            ));
        }
    }
    if let Some(t) = &sample.other_tenants {
        other(t);
    }
    if let Some(age) = other_age {
        set.push((OTHER_TENANTS.into(), other_waiting, other_running, age));
    }
    let gauges = |tenant: &str, waiting: u64, running: u64, age: f64| {
        for (state, n) in [("waiting", waiting), ("running", running)] {
            gauge!(QUEUE_TENANT_TASKS, "queue" => queue.to_string(), "tenant" => tenant.to_string(), "state" => state)
                .set(n as f64);
        }
        gauge!(QUEUE_TENANT_OLDEST_PENDING_AGE, "queue" => queue.to_string(), "tenant" => tenant.to_string())
            .set(age);
    };
    let now: HashSet<String> = set.iter().map(|(t, ..)| t.clone()).collect();
    let before = {
        let mut labels = TENANT_LABELS.lock().unwrap_or_else(|p| p.into_inner());
        if now.is_empty() {
            labels.remove(queue)
        } else {
            labels.insert(queue.to_string(), now.clone())
        }
    };
    for gone in before.iter().flatten().filter(|t| !now.contains(*t)) {
        gauges(gone, 0, 0, 0.0);
    }
    for (tenant, waiting, running, age) in &set {
        gauges(tenant, *waiting, *running, *age);
    }
}

#[cfg(feature = "prometheus")]
pub(crate) use self::prometheus::serve_with;
#[cfg(feature = "prometheus")]
pub use self::prometheus::{serve, MetricsEndpoint};

#[cfg(feature = "prometheus")]
mod prometheus {
    use std::net::SocketAddr;
    use std::sync::OnceLock;
    use std::time::Duration;

    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
    use metrics_util::MetricKindMask;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;
    use tracing::{debug, info};

    use super::{
        describe, forget_handles, DURATION_BUCKETS, GAUGE_IDLE_TIMEOUT, LATENESS_BUCKETS,
        SCHEDULER_LATENESS, TASK_DURATION,
    };
    use crate::WorkerError;

    /// The recorder this process installed (at most one per process: the facade has one global
    /// recorder).
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

    /// How often histograms are folded into their buckets when nobody scrapes, which bounds
    /// the memory they hold.
    const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

    /// Longest wait for a scraper's request head; a stuck client costs one task for this long.
    const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

    fn handle(gauge_idle: Duration) -> Result<&'static PrometheusHandle, WorkerError> {
        if let Some(h) = HANDLE.get() {
            return Ok(h);
        }
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(TASK_DURATION.into()), &DURATION_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(SCHEDULER_LATENESS.into()),
                    &LATENESS_BUCKETS,
                )
            })
            .map_err(|e| WorkerError::Metrics(e.to_string()))?
            .idle_timeout(MetricKindMask::GAUGE, Some(gauge_idle));
        // Two callers racing here: one installs, the other gets the facade's "already set" error.
        let installed = builder
            .install_recorder()
            .map_err(|e| WorkerError::Metrics(format!("could not install the recorder: {e}")))?;
        let h = HANDLE.get_or_init(|| installed);
        forget_handles();
        describe();
        let upkeep = h.clone();
        let spawned = std::thread::Builder::new()
            .name("chronos-metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_PERIOD);
                upkeep.run_upkeep();
            });
        if let Err(e) = spawned {
            return Err(WorkerError::Metrics(format!(
                "could not start the upkeep thread: {e}"
            )));
        }
        Ok(h)
    }

    /// A running Prometheus page of this process's metrics: `GET /metrics` (every family with
    /// its `# HELP` and `# TYPE`), `GET /healthz` (200 `ok` while the process serves: a
    /// liveness probe, which says nothing of Redis), and 404 for any other path. Dropping it
    /// does not stop it; [`MetricsEndpoint::stop`] does.
    #[derive(Debug)]
    pub struct MetricsEndpoint {
        addr: SocketAddr,
        task: JoinHandle<()>,
    }

    impl MetricsEndpoint {
        /// The address it listens on (the real port when bound to port 0).
        pub fn local_addr(&self) -> SocketAddr {
            self.addr
        }

        /// Stops listening. The recorder stays installed: metrics keep being counted.
        pub fn stop(self) {
            self.task.abort();
        }
    }

    /// Installs the Prometheus recorder for this process (once; later calls reuse it) with
    /// explicit histogram buckets for chronos' histograms, and serves its page on `addr` from
    /// the current tokio runtime. Fails when `addr` cannot be bound, or when another recorder
    /// was installed first (the facade takes one per process): then serve that recorder
    /// yourself.
    pub async fn serve(addr: SocketAddr) -> Result<MetricsEndpoint, WorkerError> {
        serve_with(addr, GAUGE_IDLE_TIMEOUT).await
    }

    /// [`serve`], with gauges dropped after `gauge_idle` without an update (when this call
    /// installs the recorder; the first install in a process decides).
    pub(crate) async fn serve_with(
        addr: SocketAddr,
        gauge_idle: Duration,
    ) -> Result<MetricsEndpoint, WorkerError> {
        let handle = handle(gauge_idle)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| WorkerError::Metrics(format!("could not bind {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| WorkerError::Metrics(e.to_string()))?;
        info!(%addr, "serving Prometheus metrics");
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(async move {
                            if let Err(e) = respond(stream, handle).await {
                                debug!(error = %e, "metrics scrape failed");
                            }
                        });
                    }
                    Err(e) => {
                        debug!(error = %e, "metrics accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(MetricsEndpoint { addr, task })
    }

    /// Answers one HTTP/1.x request with the page and closes: a scraper needs nothing more.
    async fn respond(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        let read = async {
            // Up to the blank line that ends the request head, bounded at 16 KiB.
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                let n = stream.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(buf.get(..n).unwrap_or_default());
            }
            Ok::<_, std::io::Error>(())
        };
        tokio::time::timeout(REQUEST_TIMEOUT, read)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        let get = head.starts_with(b"GET ") || head.starts_with(b"HEAD ");
        // `GET /metrics?x HTTP/1.1`: the path, without its query.
        let path = head
            .split(|&b| b == b' ')
            .nth(1)
            .and_then(|t| t.split(|&b| b == b'?').next())
            .unwrap_or_default();
        // Only the page's own path: a probe on any other path must not read as healthy.
        let (status, body) = match (get, path) {
            (false, _) => ("405 Method Not Allowed", String::new()),
            (true, b"/metrics") => ("200 OK", with_help(handle.render())),
            (true, b"/healthz") => ("200 OK", "ok\n".to_string()),
            (true, _) => (
                "404 Not Found",
                "not found: the metrics are at /metrics\n".to_string(),
            ),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(response.as_bytes()).await?;
        if !head.starts_with(b"HEAD ") {
            stream.write_all(body.as_bytes()).await?;
        }
        stream.shutdown().await
    }

    /// The page with a `# HELP` line for every family: the recorder writes one only for names
    /// described to it, and `promtool check metrics` (and some scrapers) want one for each. A
    /// family of the application's that nobody described gets a line saying so.
    pub(super) fn with_help(page: String) -> String {
        let mut out = String::with_capacity(page.len() + 256);
        let mut helped: Option<&str> = None;
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                helped = rest.split(' ').next();
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default();
                if helped != Some(name) {
                    out.push_str(&format!(
                        "# HELP {name} {name} (no description registered)\n"
                    ));
                }
                helped = None;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::DebuggingRecorder;

    #[test]
    fn dead_letters_of_junk_kinds_share_one_capped_label() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        // A queue name of this test alone: the handle cache is global to the process.
        let queue = "metrics-cap-test";
        metrics::with_local_recorder(&recorder, || {
            for n in 0..400 {
                dead_lettered(queue, Some(&format!("junk-{n}")), false);
            }
        });
        let kinds: std::collections::HashSet<String> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == TASKS_DEAD_LETTERED)
            .filter_map(|(key, ..)| {
                key.key()
                    .labels()
                    .find(|l| l.key() == "kind")
                    .map(|l| l.value().to_string())
            })
            .collect();
        assert_eq!(
            kinds.len(),
            MAX_KINDS_PER_QUEUE + 1,
            "256 kinds and `other`"
        );
        assert!(kinds.contains("other"));
    }

    #[cfg(feature = "prometheus")]
    #[test]
    fn a_family_nobody_described_still_gets_a_help_line() {
        let page = "# HELP a_total what a counts\n# TYPE a_total counter\na_total 1\n\n\
                    # TYPE app_things gauge\napp_things 2\n";
        assert_eq!(
            prometheus::with_help(page.to_string()),
            "# HELP a_total what a counts\n# TYPE a_total counter\na_total 1\n\n\
             # HELP app_things app_things (no description registered)\n\
             # TYPE app_things gauge\napp_things 2\n"
        );
    }

    #[test]
    fn a_throttled_attempt_counts_under_its_own_outcome() {
        assert_eq!(outcomes_of(Ended::Throttled), vec!["throttled".to_string()]);
    }

    #[test]
    fn a_cancelled_task_counts_under_its_own_outcome_and_not_as_failed() {
        assert_eq!(outcomes_of(Ended::Cancelled), vec!["cancelled".to_string()]);
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            KindMetrics::new("metrics-cancel-test", "job").ended(Ended::Cancelled);
        });
        let failed = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .any(|(key, .., v)| {
                key.key().name() == TASKS_FAILED
                    && matches!(v, metrics_util::debugging::DebugValue::Counter(n) if n > 0)
            });
        assert!(!failed, "a cancel is no failure");
    }

    /// The `outcome` labels counted once after one attempt ended `how`.
    fn outcomes_of(how: Ended) -> Vec<String> {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            KindMetrics::new("metrics-outcome-test", "job").ended(how);
        });
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == TASKS_PROCESSED)
            .filter(|(.., v)| matches!(v, metrics_util::debugging::DebugValue::Counter(1)))
            .filter_map(|(key, ..)| {
                key.key()
                    .labels()
                    .find(|l| l.key() == "outcome")
                    .map(|l| l.value().to_string())
            })
            .collect()
    }

    /// The tenant series of one queue in a recorder's snapshot: (tenant, state) -> value.
    fn tenant_series(
        snapshotter: &metrics_util::debugging::Snapshotter,
        queue: &str,
    ) -> HashMap<(String, String), f64> {
        use metrics_util::debugging::DebugValue;
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                let k = key.key();
                (k.name() == QUEUE_TENANT_TASKS || k.name() == QUEUE_TENANT_OLDEST_PENDING_AGE)
                    && k.labels().any(|l| l.key() == "queue" && l.value() == queue)
            })
            .filter_map(|(key, _, _, value)| {
                let k = key.key();
                let label = |name: &str| {
                    k.labels()
                        .find(|l| l.key() == name)
                        .map(|l| l.value().to_string())
                };
                let state = label("state").unwrap_or_else(|| "age".into());
                let DebugValue::Gauge(v) = value else {
                    return None;
                };
                Some(((label("tenant")?, state), v.into_inner()))
            })
            .collect()
    }

    fn tenant(name: &str, waiting: u64, oldest_ms: Option<i64>) -> chronos_core::TenantSample {
        chronos_core::TenantSample {
            tenant: name.into(),
            tenants: 1,
            waiting,
            running: 1,
            oldest_ms,
        }
    }

    #[test]
    fn tenant_gauges_name_the_busiest_and_sum_the_rest_under_other() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let queue = "metrics-tenants-test";
        let mut sample = chronos_core::QueueSample {
            sampled_at_ms: 100_000,
            ..Default::default()
        };
        sample.tenants = (0..SAMPLED_TENANTS as u64)
            .map(|n| tenant(&format!("t{n}"), 100 - n, Some(90_000)))
            .collect();
        // A tenant whose key is `other` is counted in `other`, not as a second series of it.
        sample.tenants[3] = tenant(OTHER_TENANTS, 50, Some(40_000));
        sample.other_tenants = Some(chronos_core::TenantSample {
            tenant: String::new(),
            tenants: 5_000,
            waiting: 7_000,
            running: 30,
            oldest_ms: Some(70_000),
        });
        metrics::with_local_recorder(&recorder, || tenant_sample(queue, &sample));
        let got = tenant_series(&snapshotter, queue);
        let tenants: HashSet<&str> = got.keys().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tenants.len(), SAMPLED_TENANTS, "nine named and other");
        let at = |t: &str, s: &str| got.get(&(t.to_string(), s.to_string())).copied();
        assert_eq!(at("t0", "waiting"), Some(100.0));
        assert_eq!(at("t0", "age"), Some(10.0));
        assert_eq!(at("other", "waiting"), Some(7_050.0));
        assert_eq!(at("other", "running"), Some(31.0));
        assert_eq!(at("other", "age"), Some(60.0), "the oldest of the rest");

        // t0 drains and leaves the busiest: set to 0 once, not kept at its last count.
        sample.tenants.remove(0);
        metrics::with_local_recorder(&recorder, || tenant_sample(queue, &sample));
        let got = tenant_series(&snapshotter, queue);
        assert_eq!(
            got.get(&("t0".to_string(), "waiting".to_string())),
            Some(&0.0)
        );
    }
}
