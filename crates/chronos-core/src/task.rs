use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{de::DeserializeOwned, Serialize};
use time::OffsetDateTime;

use crate::{
    BrokerError, DeadLetter, DecodeError, Dedup, DedupMode, EnqueueOutcome, Priority, TaskEnvelope,
    TaskState,
};

/// The arguments of one kind of task: a plain serde type with a stable kind string.
///
/// The kind selects the handler on the worker side and is part of the unique-task hash, so it
/// must not change between deploys. Payloads are encoded with MessagePack (field names kept), so
/// adding an `Option` field or a field with `#[serde(default)]` stays compatible with queued tasks.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct EmailArgs { to: String }
/// impl chronos_core::TaskArgs for EmailArgs { const KIND: &'static str = "email:send"; }
/// ```
pub trait TaskArgs: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Stable kind string, unique across the application.
    const KIND: &'static str;

    /// Options applied before the caller's own (for example a default queue for this kind).
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::default()
    }
}

/// Encodes task arguments to the payload bytes stored in the envelope.
pub fn encode_args<T: TaskArgs>(args: &T) -> Result<Vec<u8>, BrokerError> {
    rmp_serde::to_vec_named(args).map_err(|e| BrokerError::Encode(e.to_string()))
}

/// Decodes payload bytes into task arguments; bad bytes give [`DecodeError::Payload`].
pub fn decode_args<T: TaskArgs>(payload: &[u8]) -> Result<T, DecodeError> {
    rmp_serde::from_slice(payload).map_err(|e| DecodeError::Payload {
        kind: T::KIND.to_string(),
        reason: e.to_string(),
    })
}

/// Header a scheduled task carries with the id of the schedule that fired it.
pub const SCHEDULE_HEADER: &str = "chronos-schedule";

/// Header a scheduled task carries with its trigger time, as unix milliseconds in decimal text.
pub const TRIGGER_HEADER: &str = "chronos-trigger-ms";

/// A point in time, as the enqueue options take it: unix milliseconds, saturating.
///
/// It exists so that [`EnqueueOptions::process_at`] and [`EnqueueOptions::deadline`] accept a
/// [`time::OffsetDateTime`] (what earlier versions took, so existing calls keep compiling) as well
/// as a [`std::time::SystemTime`] (what code without the `time` crate has), through one method
/// each instead of a `_system` twin per option. Times before 1970 are kept (negative ms); times
/// beyond the `i64` millisecond range saturate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The time `ms` milliseconds after the unix epoch (negative: before it).
    pub fn from_unix_ms(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the unix epoch.
    pub fn unix_ms(self) -> i64 {
        self.0
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(at: OffsetDateTime) -> Self {
        Self(unix_ms(at))
    }
}

impl From<SystemTime> for Timestamp {
    fn from(at: SystemTime) -> Self {
        Self(system_ms(at))
    }
}

/// Unix milliseconds of a `SystemTime`, saturating at the ends of the `i64` range.
fn system_ms(at: SystemTime) -> i64 {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => duration_ms(after),
        Err(before) => duration_ms(before.duration()).saturating_neg(),
    }
}

/// Default number of retries after the first attempt, as in asynq and Sidekiq.
pub const DEFAULT_MAX_RETRY: u32 = 25;

/// Per-task options of an enqueue. Every setter overrides what [`TaskArgs::default_options`]
/// set; unset fields keep the defaults (queue `default`, 25 retries, run now, archive on death).
#[derive(Debug, Clone, Default)]
pub struct EnqueueOptions {
    pub(crate) queue: Option<String>,
    pub(crate) max_retry: Option<u32>,
    pub(crate) run_at_ms: Option<i64>,
    pub(crate) process_in: Option<Duration>,
    pub(crate) unique_ttl: Option<Duration>,
    pub(crate) task_id: Option<String>,
    pub(crate) retention: Option<Duration>,
    pub(crate) dead_letter: Option<DeadLetter>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) deadline_ms: Option<i64>,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) durable: Option<(u32, Duration)>,
    pub(crate) rate_key: Option<String>,
    pub(crate) priority: Option<Priority>,
    pub(crate) tenant: Option<String>,
    pub(crate) lifo: Option<bool>,
    pub(crate) dedup: Option<Dedup>,
}

/// Longest wait [`EnqueueOptions::durable`] accepts: well under the broker's 10 s command
/// timeout, so a slow replica gives a clear [`BrokerError::NotReplicated`], not a timeout.
pub(crate) const MAX_DURABLE_WAIT: Duration = Duration::from_secs(5);

impl EnqueueOptions {
    /// Same as `default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Route to this queue (validated at enqueue).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Retries after the first attempt before the task is dead-lettered (default 25).
    pub fn max_retry(mut self, n: u32) -> Self {
        self.max_retry = Some(n);
        self
    }

    /// Run no earlier than `delay` from now.
    pub fn process_in(mut self, delay: Duration) -> Self {
        self.process_in = Some(delay);
        self.run_at_ms = None;
        self
    }

    /// Run no earlier than `at`: a [`time::OffsetDateTime`], a [`std::time::SystemTime`] or a
    /// [`Timestamp`] (see [`Timestamp`] for why one method takes all three).
    pub fn process_at(mut self, at: impl Into<Timestamp>) -> Self {
        self.run_at_ms = Some(at.into().unix_ms());
        self.process_in = None;
        self
    }

    /// Refuse the enqueue with [`BrokerError::DuplicateTask`] while another task of the same kind
    /// and payload in the same queue holds the lock. The lock lasts until that task succeeds, is
    /// dead-lettered or deleted, or `ttl` runs out, whichever comes first; retries keep it.
    pub fn unique(mut self, ttl: Duration) -> Self {
        self.unique_ttl = Some(ttl);
        self
    }

    /// Deduplicate this enqueue: while another task holds the lock of the same key in this
    /// queue, do what the [`Dedup`]'s mode says (refuse, throttle, debounce or replace) and
    /// answer it in [`TaskInfo::outcome`], with [`TaskInfo::id`] naming the task that will run.
    /// Unlike [`EnqueueOptions::unique`], a duplicate is an `Ok` answer, not an error. Refused
    /// together with `unique`, or (for a debounce, which sets the run time itself) a delay or
    /// run time: [`BrokerError::InvalidOption`]. An explicit task id enqueued again is still
    /// the same task (answered `Created`), whatever the key.
    pub fn dedup(mut self, dedup: Dedup) -> Self {
        self.dedup = Some(dedup);
        self
    }

    /// Use this task id instead of a generated one. Enqueueing the same id twice with the same
    /// payload is a no-op; with a different payload it is [`BrokerError::TaskIdConflict`]. An
    /// id of the shape generated ids have (`<digits>-<digits>`, a plain task's stream entry id)
    /// is refused at enqueue with [`BrokerError::InvalidTaskId`].
    pub fn task_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self
    }

    /// Keep the completed task for inspection for `d` instead of deleting it at once.
    pub fn retention(mut self, d: Duration) -> Self {
        self.retention = Some(d);
        self
    }

    /// Drop the task instead of archiving it when retries are exhausted.
    pub fn discard_on_dead_letter(mut self) -> Self {
        self.dead_letter = Some(DeadLetter::Discard);
        self
    }

    /// Cancel an attempt that runs longer than `d`; it counts as a failed attempt.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Do not run the task after `at` (an [`time::OffsetDateTime`], a [`std::time::SystemTime`]
    /// or a [`Timestamp`]); an attempt still running then is cancelled.
    pub fn deadline(mut self, at: impl Into<Timestamp>) -> Self {
        self.deadline_ms = Some(at.into().unix_ms());
        self
    }

    /// Return only once the write reached `replicas` replicas (Redis `WAIT`), or fail with
    /// [`BrokerError::NotReplicated`] after `timeout` (1 ms to 5 s: well under the broker's 10 s command timeout).
    ///
    /// Redis replicates asynchronously: a plain enqueue is acknowledged by the primary alone,
    /// and a primary that dies a moment later takes it along (a failover promotes a replica that
    /// never saw it). With this option the acknowledgement means the task is on `replicas`
    /// replicas too, so a failover loses it only if every one of them fails as well.
    ///
    /// The `WAIT` goes on the connection that sent the enqueue (on a cluster, to the node of the
    /// queue), which it holds until the replicas answer: on a connection shared with workers,
    /// those wait too (about one replica round trip; up to `timeout` when a replica is down). A
    /// producer that enqueues durably at a high rate gives it a broker of its own. If the
    /// connection drops between the enqueue and its `WAIT` (the client re-sends the `WAIT` on
    /// a new connection, which cannot vouch for the earlier write), the store tells by the
    /// connection's name and fails with [`BrokerError::NotReplicated`] (`acked: 0`) instead of
    /// acknowledging: such an error, like a [`BrokerError::Store`] one, is safe to retry with
    /// the same explicit task id.
    pub fn durable(mut self, replicas: u32, timeout: Duration) -> Self {
        self.durable = Some((replicas, timeout));
        self
    }

    /// Count this task under `key` (a customer id, a tenant, an API account) for the per-key
    /// rate limit a worker applies to its queue (`QueueLimit::per_key_rate` of the worker
    /// crate): tasks of one key over its limit wait, without spending an attempt, while tasks of
    /// other keys run. Without a per-key limit on the queue the key changes nothing. Validated
    /// at enqueue: 1 to 256 bytes, no whitespace or control characters.
    pub fn rate_key(mut self, key: impl Into<String>) -> Self {
        self.rate_key = Some(key.into());
        self
    }

    /// The task's priority level inside its queue (default [`Priority::NORMAL`]): among the
    /// ready tasks of the queue, a more urgent level starts first. A task keeps its level
    /// through delays, retries and reclaims; see [`Priority`] for aging.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The tenant the task belongs to, for fair sharing of its queue: a queue's ready tasks
    /// of different tenants start in a weighted round-robin between the tenants (a tenant's
    /// backlog of 100,000 never keeps another tenant's single task waiting behind it), under
    /// each tenant's stored settings (weight, concurrency cap, pause, backlog cap; see
    /// `Tenants` in the broker). Inside a tenant, tasks start by priority level, then in
    /// order. Independent of [`EnqueueOptions::rate_key`]: a fairness key and a limit key may
    /// differ (a customer, and one of their API accounts). The key is 1 to 256 bytes without
    /// whitespace or control characters.
    pub fn tenant(mut self, key: impl Into<String>) -> Self {
        self.tenant = Some(key.into());
        self
    }

    /// Last in, first out: the task starts before every task that waits at its priority level
    /// (inside its tenant, for a tenant task), the newest such task first. It keeps that place
    /// through delays and retries. Costs a sorted-set insert (O(log n)) instead of a stream
    /// append.
    pub fn lifo(mut self) -> Self {
        self.lifo = Some(true);
        self
    }

    /// Attach a string header (trace context and the like).
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Lays `other` over `self`: every field `other` sets wins.
    pub fn merge(mut self, other: EnqueueOptions) -> Self {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        take!(
            queue,
            max_retry,
            unique_ttl,
            task_id,
            retention,
            dead_letter,
            timeout,
            deadline_ms,
            durable,
            rate_key,
            priority,
            tenant,
            lifo,
            dedup
        );
        if other.run_at_ms.is_some() || other.process_in.is_some() {
            self.run_at_ms = other.run_at_ms;
            self.process_in = other.process_in;
        }
        self.headers.extend(other.headers);
        self
    }

    /// The queue name, or `default`.
    pub fn queue_name(&self) -> &str {
        self.queue.as_deref().unwrap_or("default")
    }
}

/// Default limit on the encoded payload of one task (1 MiB); a broker may be configured with
/// another.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// What an enqueue produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The task id.
    pub id: String,
    /// The queue.
    pub queue: String,
    /// The kind.
    pub kind: String,
    /// `Pending` or `Scheduled` at the time of the enqueue.
    pub state: TaskState,
    /// When it may first run (unix ms).
    pub run_at_ms: i64,
    /// What the enqueue did: always [`EnqueueOutcome::Created`] without
    /// [`EnqueueOptions::dedup`]. For a duplicate, `id`, `state` and `run_at_ms` are the
    /// holder's as the store saw them (a throttle's holder that already finished reads
    /// `Completed`).
    pub outcome: EnqueueOutcome,
}

/// A task ready to be written: the envelope plus when it may first run and its unique lock.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The envelope to store.
    pub envelope: TaskEnvelope,
    /// Earliest run time (unix ms); at or before now means ready at once.
    pub run_at_ms: i64,
    /// Unique lock TTL, when the task is unique.
    pub unique_ttl: Option<Duration>,
    /// The run time the producer asked for, as it asked: an absolute time, a delay from now (by
    /// the store's clock, so producers with skewed clocks agree), or neither (run now).
    pub(crate) due: Due,
    /// The producer chose the id: an enqueue of an id already in use is compared by
    /// [`NewTask::fingerprint`] (what the producer chose), not by the stored bytes, which hold
    /// the enqueue time.
    pub(crate) explicit_id: bool,
    /// Replicas the write must reach, and how long to wait for them
    /// ([`EnqueueOptions::durable`]).
    pub(crate) durable: Option<(u32, Duration)>,
    /// The priority level ([`EnqueueOptions::priority`]).
    pub(crate) priority: Priority,
    /// The tenant ([`EnqueueOptions::tenant`]).
    pub(crate) tenant: Option<String>,
    /// Last in, first out ([`EnqueueOptions::lifo`]).
    pub(crate) lifo: bool,
    /// Deduplication beyond a plain unique lock ([`EnqueueOptions::dedup`]).
    pub(crate) dedup: Option<Dedup>,
}

impl NewTask {
    /// The run time the producer asked for, as it asked.
    pub fn due(&self) -> Due {
        self.due
    }

    /// True when the producer chose the task id ([`EnqueueOptions::task_id`]): an enqueue of an
    /// id already in use is then compared by [`NewTask::fingerprint`], not refused.
    pub fn explicit_id(&self) -> bool {
        self.explicit_id
    }

    /// The replicas this task's enqueue waits for and how long ([`EnqueueOptions::durable`]);
    /// None when it does not wait.
    pub fn durable(&self) -> Option<(u32, Duration)> {
        self.durable
    }

    /// The task's priority level inside its queue ([`EnqueueOptions::priority`]).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The tenant the task belongs to ([`EnqueueOptions::tenant`]), if any.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// True when the task starts before the others waiting at its level
    /// ([`EnqueueOptions::lifo`]).
    pub fn lifo(&self) -> bool {
        self.lifo
    }

    /// The deduplication asked for with [`EnqueueOptions::dedup`] (its lock is
    /// [`TaskEnvelope::unique_key`] with TTL [`NewTask::unique_ttl`]); None for a task that is
    /// not deduplicated or uses [`EnqueueOptions::unique`].
    pub fn dedup(&self) -> Option<&Dedup> {
        self.dedup.as_ref()
    }

    /// A plain task needs no record of its own: it is stored as one stream entry, and its id is
    /// that entry's (see `RedisBroker`'s storage notes). True when nothing asks for a record:
    /// no explicit id, no unique key, no retention, no rate key, no workflow, no delay, no
    /// replication wait.
    pub fn is_plain(&self) -> bool {
        let env = &self.envelope;
        !self.explicit_id
            && matches!(self.due, Due::Now)
            && self.unique_ttl.is_none()
            && self.durable.is_none()
            && env.unique_key.is_none()
            && env.retention_ms.is_none()
            && env.rate_key.is_none()
            && env.flow.is_none()
            && self.priority.is_normal()
            && self.tenant.is_none()
            && !self.lifo
    }
}

/// When a new task is due, as its producer asked: a store decides "now" by its own clock, so
/// producers with skewed clocks agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Ready at once.
    Now,
    /// At this unix time (ms).
    At(i64),
    /// This many ms after the store's now.
    In(i64),
}

impl NewTask {
    /// Builds the envelope for `kind` + `payload` under `opts`, validating the task id.
    /// `now_ms` is the enqueue time.
    pub fn build(
        kind: &str,
        payload: Vec<u8>,
        mut opts: EnqueueOptions,
        now_ms: i64,
    ) -> Result<Self, BrokerError> {
        let explicit_id = opts.task_id.is_some();
        if let Some(key) = &opts.rate_key {
            crate::names::check_rate_key(key)?;
        }
        let id = match opts.task_id {
            Some(id) => {
                crate::names::check_explicit_id(&id)?;
                id
            }
            None => new_task_id(),
        };
        if opts.unique_ttl.is_some_and(|d| d.as_millis() == 0) {
            return Err(BrokerError::InvalidOption(
                "unique TTL must be at least 1 ms".into(),
            ));
        }
        if let Some(d) = &opts.dedup {
            d.check()?;
            let clash = if opts.unique_ttl.is_some() {
                Some("unique")
            } else if matches!(d.dedup_mode(), DedupMode::Debounce { .. })
                && (opts.run_at_ms.is_some() || opts.process_in.is_some())
            {
                Some("a delay or run time (a debounce sets its own)")
            } else {
                None
            };
            if let Some(what) = clash {
                return Err(BrokerError::InvalidOption(format!(
                    "dedup cannot be combined with {what}"
                )));
            }
            if let DedupMode::Debounce { delay, .. } = d.dedup_mode() {
                opts.process_in = Some(delay);
            }
        }
        if let Some((replicas, wait)) = opts.durable {
            if replicas == 0 || wait.is_zero() || wait > MAX_DURABLE_WAIT {
                return Err(BrokerError::InvalidOption(format!(
                    "durable needs at least 1 replica and a wait of 1 ms to {MAX_DURABLE_WAIT:?} \
                     (got {replicas} replicas, {wait:?})"
                )));
            }
        }
        if let Some(t) = &opts.tenant {
            crate::names::check_tenant(t)?;
        }
        let due = match (opts.run_at_ms, opts.process_in) {
            (Some(at), _) => Due::At(at),
            (None, Some(d)) => Due::In(duration_ms(d)),
            (None, None) => Due::Now,
        };
        let run_at_ms = match due {
            Due::At(at) => at,
            Due::In(d) => now_ms.saturating_add(d),
            Due::Now => now_ms,
        };
        let queue = opts.queue.unwrap_or_else(|| "default".to_string());
        let (unique_key, unique_ttl) = match &opts.dedup {
            Some(d) => (
                Some(d.lock_name(|| unique_hash(&queue, kind, &payload))),
                Some(d.lock_ttl()),
            ),
            None => (
                opts.unique_ttl.map(|_| unique_hash(&queue, kind, &payload)),
                opts.unique_ttl,
            ),
        };
        Ok(Self {
            envelope: TaskEnvelope {
                id,
                kind: kind.to_string(),
                queue,
                payload,
                retried: 0,
                max_retry: opts.max_retry.unwrap_or(DEFAULT_MAX_RETRY),
                timeout_ms: opts.timeout.map(|d| duration_ms(d) as u64),
                deadline_ms: opts.deadline_ms,
                unique_key,
                retention_ms: opts.retention.map(|d| duration_ms(d) as u64),
                dead_letter: opts.dead_letter.unwrap_or_default(),
                enqueued_at_ms: now_ms,
                last_error: None,
                last_failed_at_ms: None,
                headers: opts.headers,
                flow: None,
                rate_key: opts.rate_key,
            },
            run_at_ms,
            unique_ttl,
            due,
            explicit_id,
            durable: opts.durable,
            priority: opts.priority.unwrap_or_default(),
            tenant: opts.tenant,
            lifo: opts.lifo.unwrap_or(false),
            dedup: opts.dedup,
        })
    }

    /// SHA-256 (first 16 bytes, hex) of what the producer chose: kind, payload, max retry,
    /// timeout, deadline, unique key, retention and dead-letter policy. Not the enqueue time,
    /// the run time or the headers (a trace header differs between two tries of one enqueue).
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let e = &self.envelope;
        let mut h = Sha256::new();
        for part in [e.kind.as_bytes(), &e.payload] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(e.max_retry.to_le_bytes());
        h.update(e.timeout_ms.map_or(-1i128, i128::from).to_le_bytes());
        h.update(e.deadline_ms.map_or(i128::MIN, i128::from).to_le_bytes());
        h.update(e.retention_ms.map_or(-1i128, i128::from).to_le_bytes());
        h.update(e.unique_key.as_deref().unwrap_or("").as_bytes());
        h.update([0, u8::from(e.dead_letter == DeadLetter::Discard)]);
        h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// A random 128-bit task id as 32 hex characters.
pub fn new_task_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// SHA-256 of queue, kind and payload, hex encoded: stable across processes and versions.
fn unique_hash(queue: &str, kind: &str, payload: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(queue.as_bytes());
    h.update([0]);
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(payload);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Milliseconds of a duration, saturating at `i64::MAX`.
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Unix milliseconds of a timestamp, saturating.
pub fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The current wall-clock time in unix milliseconds.
pub fn now_ms() -> i64 {
    unix_ms(OffsetDateTime::now_utc())
}
