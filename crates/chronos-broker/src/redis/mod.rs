//! The Redis implementation of the broker traits, over fred.

mod actions;
mod consume;
mod coordinate;
mod durable;
mod edit;
mod enqueue;
mod events;
mod flows;
mod history;
mod inspect;
mod lane;
mod lease;
mod locks;
mod maintain;
mod manage_schedules;
mod operate;
mod progress;
mod queue_delete;
mod record;
mod reply;
mod results;
mod sample_queues;
mod scan;
mod schedules;
mod schemas;
mod scripts;
// The names and numbers shared with the Lua scripts, as `protocol::STATE` and so on.
use chronos_protocol as protocol;
mod settings;
mod settle;
mod signals;
mod store;
mod tenants;
mod throttle;
mod timing;
mod watch;

pub(crate) use crate::keys::TENANT_LANE;
pub use consume::RedisReader;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::*;

use crate::redis::store::store;
use crate::{BrokerError, Keyspace, QueueKeys, QueueName, DEFAULT_MAX_PAYLOAD, GROUP};
use scripts::Scripts;

/// Longest time any command may take before it fails with a timeout. Blocking reads must stay
/// well below it (a client-side timeout does not cancel a block on the server).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest block of a blocking read; keeps shutdown prompt and stays far under the command
/// timeout.
pub const MAX_BLOCK: Duration = Duration::from_secs(2);

/// The broker over one Redis deployment (standalone, Sentinel or Cluster, as the URL says).
///
/// Cheap to clone: clones share one auto-pipelined connection (one per node in a cluster), which
/// on a 2-core host matches a pool in throughput (see the design notes). Blocking reads get their
/// own connection through [`crate::Consume::open_reader`].
#[derive(Clone)]
pub struct RedisBroker {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    keys: Keyspace,
    scripts: Scripts,
    max_payload: usize,
    /// Queues this process has already registered (SADD + XGROUP CREATE), so the hot path pays
    /// for that once per queue, not per task.
    known: Mutex<HashSet<QueueName>>,
    /// How long enqueue receipts and discard markers live (see
    /// [`RedisBrokerBuilder::idempotency_window`]).
    idempotency_window: Duration,
    /// Whether tasks that ask for no record are written as plain tasks (see
    /// [`RedisBrokerBuilder::plain_tasks`]).
    plain_tasks: bool,
    /// The subscriber that wakes [`crate::Results::wait_outcome`], made on first use.
    waiters: tokio::sync::OnceCell<Arc<results::Waiters>>,
    /// The subscriber of the namespace's signal channel, made on first use.
    signals: tokio::sync::OnceCell<Arc<signals::Hub>>,
    /// Where the next read of each queue's reclaim outbox goes on (an HSCAN cursor), so that
    /// entries whose report keeps failing do not hide the others from every pass.
    outbox_cursors: Mutex<HashMap<QueueName, String>>,
    /// The priority levels other than the default that each queue has a stream for, as the
    /// last fetch of the queue saw them (claim.lua lists them): the streams a blocking read of
    /// the queue waits on besides the main one.
    levels: Mutex<HashMap<QueueName, Vec<u8>>>,
    /// Whether each queue's event stream was on when this process last looked, and when
    /// (`events::EVENTS_RECHECK`): the scripts get the stream's key only while it was, so a
    /// queue without one costs them nothing.
    events: Mutex<HashMap<QueueName, (bool, std::time::Instant)>>,
}

/// What [`RedisBrokerBuilder::connect`] does when Redis may evict keys (`maxmemory-policy` is not
/// `noeviction`).
///
/// An evicted task hash or stream entry is a task lost without a trace, and an evicted leader
/// lock or dedup key breaks exactly-once firing: no guarantee of chronos-rs holds on a Redis that
/// evicts. Run it with `maxmemory-policy noeviction` (writes then fail with an error when memory
/// is full, and callers see [`BrokerError::Store`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictionCheck {
    /// Refuse to connect with [`BrokerError::EvictionPolicy`] (the default).
    #[default]
    Refuse,
    /// Connect, and log an error naming the policy.
    Warn,
    /// Do not look (for a Redis that hides its configuration; you vouch for it).
    Skip,
}

impl std::fmt::Debug for RedisBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBroker")
            .field("namespace", &self.inner.keys.namespace())
            .field("max_payload", &self.inner.max_payload)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisBroker`].
#[derive(Debug, Clone)]
pub struct RedisBrokerBuilder {
    url: String,
    namespace: String,
    max_payload: usize,
    idempotency_window: Duration,
    eviction: EvictionCheck,
    plain_tasks: bool,
}

/// Default [`RedisBrokerBuilder::idempotency_window`]: longer than any re-send of a command can
/// come (commands time out after 10 s).
pub const DEFAULT_IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(15);

impl RedisBrokerBuilder {
    /// Key namespace (default `chronos`), so several applications can share one Redis.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = ns.into();
        self
    }

    /// Largest encoded payload accepted by enqueue (default 1 MiB).
    pub fn max_payload_bytes(mut self, n: usize) -> Self {
        self.max_payload = n;
        self
    }

    /// How long a client's re-send of an enqueue call is recognised (default 15 s). A producer's
    /// client re-sends an enqueue whose reply was lost on a reconnect; the call's receipt (one
    /// small key per call, one character per task) makes the re-send answer what the first run
    /// did instead of writing again, even if a fast worker already ran and deleted the task.
    /// Keep it above the command timeout (10 s), after which no re-send can come; zero keeps no
    /// receipts.
    pub fn idempotency_window(mut self, d: Duration) -> Self {
        self.idempotency_window = d;
        self
    }

    /// Write tasks that ask for no record (no explicit id, unique key, retention, rate key,
    /// delay, replication wait or workflow) as plain tasks: one stream entry each, their id the
    /// entry's (default: on; see the crate docs, "Plain tasks"). Off, every task gets a record
    /// and a random id, as releases before plain tasks did.
    ///
    /// Upgrading a running fleet: a worker of an earlier release drops a plain task's entry as
    /// foreign (it has no `i` field), so upgrade every worker before any producer writes plain
    /// tasks, or run upgraded producers with `plain_tasks(false)` until the last old worker is
    /// gone. Upgraded workers read both kinds.
    pub fn plain_tasks(mut self, on: bool) -> Self {
        self.plain_tasks = on;
        self
    }

    /// What to do when Redis may evict keys (default: refuse to connect). See [`EvictionCheck`].
    pub fn eviction_check(mut self, check: EvictionCheck) -> Self {
        self.eviction = check;
        self
    }

    /// Connects, checks the eviction policy, and loads every script on every primary. Fails fast when Redis refuses the
    /// connection; once connected, the client reconnects by itself forever (exponential backoff,
    /// 100 ms to 2 s) and every command times out after 10 s instead of hanging.
    ///
    /// A `rediss://` URL (TLS) needs the crate's `tls` feature, and is refused without it rather
    /// than connected in plaintext. The server's certificate is checked against the system's
    /// roots (the `SSL_CERT_FILE` environment variable names another bundle, for a private CA).
    /// An ACL user and password come from the URL: `rediss://user:password@host:port`.
    pub async fn connect(self) -> Result<RedisBroker, BrokerError> {
        let keys = Keyspace::new(self.namespace)?;
        if wants_tls(&self.url) {
            #[cfg(not(feature = "tls"))]
            return Err(BrokerError::InvalidOption(
                "a rediss:// URL needs the `tls` feature of chronos-broker (or chronos-rs); \
                 without it the connection would not be encrypted"
                    .into(),
            ));
            // rustls needs a process-wide crypto provider when more than one is compiled in
            // (another crate may enable aws-lc-rs); installing ring fails harmlessly when the
            // application installed one already.
            #[cfg(feature = "tls")]
            let _ = fred::rustls::crypto::ring::default_provider().install_default();
        }
        let config = Config::from_url(&self.url).map_err(store)?;
        let client = client_builder(config).build().map_err(store)?;
        client.init().await.map_err(store)?;
        if self.eviction != EvictionCheck::Skip {
            let policy = eviction_policy(&client).await?;
            if policy.as_deref().is_some_and(|p| p != "noeviction") {
                let policy = policy.unwrap_or_default();
                if self.eviction == EvictionCheck::Refuse {
                    let _ = client.quit().await;
                    return Err(BrokerError::EvictionPolicy { policy });
                }
                tracing::error!(
                    policy = %policy,
                    "redis may evict keys (maxmemory-policy is not noeviction): tasks can be lost"
                );
            }
        }
        let scripts = scripts::scripts();
        scripts::load_all(&scripts, &client).await?;
        Ok(RedisBroker {
            inner: Arc::new(Inner {
                client,
                keys,
                scripts,
                max_payload: self.max_payload,
                known: Mutex::new(HashSet::new()),
                outbox_cursors: Mutex::new(HashMap::new()),
                levels: Mutex::new(HashMap::new()),
                events: Mutex::new(HashMap::new()),
                idempotency_window: self.idempotency_window,
                plain_tasks: self.plain_tasks,
                waiters: tokio::sync::OnceCell::new(),
                signals: tokio::sync::OnceCell::new(),
            }),
        })
    }
}

/// The server's `maxmemory_policy`, from `INFO memory` (which managed services allow where they
/// forbid `CONFIG`); None when the server does not say.
async fn eviction_policy(client: &Client) -> Result<Option<String>, BrokerError> {
    let info: String = client
        .info(Some(fred::types::InfoKind::Memory))
        .await
        .map_err(store)?;
    Ok(info
        .lines()
        .find_map(|l| l.trim().strip_prefix("maxmemory_policy:"))
        .map(|p| p.trim().to_string()))
}

/// Whether `url` asks for TLS (`rediss://`, `rediss-cluster://`, `valkeys://`, ...).
fn wants_tls(url: &str) -> bool {
    let scheme = url
        .trim_start()
        .split("://")
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    scheme.starts_with("rediss") || scheme.starts_with("valkeys")
}

/// The connection settings every client of ours uses (see the design notes, pitfalls 1 and 9).
fn client_builder(config: Config) -> Builder {
    let mut b = Builder::from_config(config);
    b.set_policy(ReconnectPolicy::new_exponential(0, 100, 2_000, 2));
    b.with_connection_config(|c| {
        c.connection_timeout = Duration::from_secs(2);
        c.tcp = TcpConfig {
            nodelay: Some(true),
            ..Default::default()
        };
    });
    b.with_performance_config(|p| p.default_command_timeout = COMMAND_TIMEOUT);
    b
}

impl RedisBroker {
    /// Starts building a broker for `url` (`redis://`, `rediss://`, `redis-cluster://`,
    /// `redis-sentinel://`).
    pub fn builder(url: impl Into<String>) -> RedisBrokerBuilder {
        RedisBrokerBuilder {
            url: url.into(),
            namespace: "chronos".into(),
            max_payload: DEFAULT_MAX_PAYLOAD,
            idempotency_window: DEFAULT_IDEMPOTENCY_WINDOW,
            eviction: EvictionCheck::default(),
            plain_tasks: true,
        }
    }

    /// Connects with the default namespace and limits.
    pub async fn connect(url: impl Into<String>) -> Result<Self, BrokerError> {
        Self::builder(url).connect().await
    }

    /// The key layout in use.
    pub fn keyspace(&self) -> &Keyspace {
        &self.inner.keys
    }

    /// The underlying fred client, for commands the traits do not cover.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The text of `INFO` (default sections: server, clients, memory, stats, ...), for consoles
    /// that show the Redis they look at. Managed services allow `INFO` where they forbid
    /// `CONFIG`.
    pub async fn info(&self) -> Result<String, BrokerError> {
        self.inner.client.info(None).await.map_err(store)
    }

    /// The configured payload limit.
    pub fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload
    }

    /// Closes the shared connection.
    pub async fn close(&self) {
        if let Some(w) = self.inner.waiters.get() {
            w.close().await;
        }
        if let Some(h) = self.inner.signals.get() {
            h.close().await;
        }
        let _ = self.inner.client.quit().await;
    }

    fn queue_keys(&self, q: &QueueName) -> QueueKeys {
        self.inner.keys.queue(q)
    }

    /// The levels other than the default that `q` has streams for, as last seen.
    fn known_levels(&self, q: &QueueName) -> Vec<u8> {
        self.inner
            .levels
            .lock()
            .ok()
            .and_then(|l| l.get(q).cloned())
            .unwrap_or_default()
    }

    /// Records the levels a fetch of `q` saw (empty: none).
    fn remember_levels(&self, q: &QueueName, levels: Vec<u8>) {
        if let Ok(mut l) = self.inner.levels.lock() {
            if levels.is_empty() {
                l.remove(q);
            } else if l.get(q) != Some(&levels) {
                l.insert(q.clone(), levels);
            }
        }
    }

    /// The streams a blocking read of `q` waits on, the main one first, with their levels.
    fn read_streams(&self, q: &QueueName) -> Vec<(String, Option<u8>)> {
        let keys = self.queue_keys(q);
        let mut out = vec![(keys.stream(), None)];
        // Never the tenant stream itself: its new entries are parked as they are added, and a
        // blocking read must not take them (its wake stream stands for it).
        for l in self.known_levels(q) {
            if l != TENANT_LANE {
                out.push((keys.lane(Some(l)), Some(l)));
            }
        }
        out
    }

    /// Registers the queue (set of queues, stream and group) once per process.
    async fn register_queue(&self, q: &QueueName) -> Result<(), BrokerError> {
        if self
            .inner
            .known
            .lock()
            .map(|k| k.contains(q))
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.create_group(q).await?;
        let _: i64 = self
            .inner
            .client
            .sadd(self.inner.keys.queues(), q.as_str())
            .await
            .map_err(store)?;
        if let Ok(mut k) = self.inner.known.lock() {
            k.insert(q.clone());
        }
        Ok(())
    }

    async fn create_group(&self, q: &QueueName) -> Result<(), BrokerError> {
        let stream = self.queue_keys(q).stream();
        match self
            .inner
            .client
            .xgroup_create::<(), _, _, _>(stream, GROUP, "0", true)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.details().starts_with("BUSYGROUP") => Ok(()),
            Err(e) => Err(store(e)),
        }
    }

    /// Forgets which queues were registered (after Redis lost its data, say).
    fn forget_queues(&self) {
        if let Ok(mut k) = self.inner.known.lock() {
            k.clear();
        }
        if let Ok(mut l) = self.inner.levels.lock() {
            l.clear();
        }
    }
}
