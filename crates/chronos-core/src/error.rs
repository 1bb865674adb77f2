use std::time::Duration;

/// Everything that can go wrong in the broker layer.
///
/// Each variant says whether retrying the same call can help: input errors are permanent,
/// [`BrokerError::Store`] is transient when [`BrokerError::is_transient`] says so (the client
/// reconnects on its own).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// A queue name is empty, too long, or holds `{`, `}`, whitespace or control characters.
    /// Permanent.
    #[error("invalid queue name {name:?}: {reason}")]
    InvalidQueue {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A key namespace breaks the same rules as a queue name. Permanent.
    #[error("invalid namespace {name:?}: {reason}")]
    InvalidNamespace {
        /// The namespace as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// An explicit task id is empty, too long or holds whitespace or control characters. Permanent.
    #[error("invalid task id {id:?}: {reason}")]
    InvalidTaskId {
        /// The id as given.
        id: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The encoded payload exceeds the configured limit. Permanent for this payload; nothing was
    /// written.
    #[error("payload of {size} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Encoded size of the payload.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A task with the same kind and payload is already held by the unique lock of this queue.
    /// Permanent until the lock is released (the task finishes) or its TTL runs out.
    #[error("a task with the same kind and payload is already enqueued in queue {queue:?}")]
    DuplicateTask {
        /// Queue the unique lock belongs to.
        queue: String,
    },
    /// The task's tenant already has as many tasks waiting in this queue as its backlog cap
    /// allows (a tenant setting): nothing was written. Room comes back as the tenant's tasks
    /// start, so the caller may try again later ([`BrokerError::is_transient`] stays false: a
    /// client must not retry it in a tight loop).
    #[error(
        "tenant {tenant:?} of queue {queue:?} is full: its backlog cap of waiting tasks is reached"
    )]
    TenantFull {
        /// The queue.
        queue: String,
        /// The tenant.
        tenant: String,
    },
    /// The explicit task id is taken by a different task in this queue. Permanent.
    #[error("task id {id:?} is already used by another task in queue {queue:?}")]
    TaskIdConflict {
        /// The id asked for.
        id: String,
        /// The queue.
        queue: String,
    },
    /// The task arguments could not be serialized. Permanent for this value.
    #[error("could not encode task: {0}")]
    Encode(String),
    /// Stored bytes could not be decoded into a task. Permanent for those bytes.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// An option is out of its range (for example a zero unique TTL). Permanent.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The store could not be reached, timed out or refused the command (for the Redis broker:
    /// a `fred` error, reachable through [`StoreError::downcast_ref`]). Transient when
    /// [`StoreError::is_transient`] says so: the client reconnects by itself; whether the
    /// command took effect may be unknown, which is why every transition is idempotent.
    #[error("store error: {0}")]
    Store(StoreError),
    /// Redis answered with a reply this version does not understand (for example keys written by
    /// an incompatible version). Permanent.
    #[error("unexpected reply from redis in {context}: {detail}")]
    Protocol {
        /// Which operation read the reply.
        context: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// Redis may evict keys (`maxmemory-policy` is not `noeviction`), which can lose tasks and
    /// break exactly-once firing; see `EvictionCheck`. Permanent until the server's
    /// policy changes.
    #[error(
        "redis maxmemory-policy is {policy:?}: evicting keys can lose tasks; set it to \
         noeviction (or choose EvictionCheck::Warn)"
    )]
    EvictionPolicy {
        /// The policy the server reported.
        policy: String,
    },
    /// A queue to delete still holds tasks (delete with force to delete them too). Permanent
    /// until the tasks are gone.
    #[error("queue {queue:?} holds {tasks} tasks (force deletes them)")]
    QueueNotEmpty {
        /// The queue.
        queue: String,
        /// How many tasks it holds.
        tasks: u64,
    },
    /// A durable enqueue ([`crate::EnqueueOptions::durable`]) wrote the task on the primary, but
    /// fewer replicas than asked acknowledged it in time. The task is enqueued and runs as usual
    /// unless the primary fails before it replicates. Retrying with the same explicit task id
    /// writes nothing twice and waits for the replicas again.
    #[error(
        "task {id:?} in queue {queue:?} reached {acked} of {wanted} replicas in time: it is \
         enqueued on the primary, but a failover now could lose it"
    )]
    NotReplicated {
        /// The task id.
        id: String,
        /// The queue.
        queue: String,
        /// Replicas that acknowledged the write.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
    },
    /// The task was dead-lettered: it has no result ([`crate::Client::result`],
    /// [`crate::Client::wait`]).
    #[error("task {id:?} failed: {error}")]
    TaskFailed {
        /// Task id.
        id: String,
        /// Its last error.
        error: String,
    },

    /// The task was cancelled by its handler: it has no result ([`crate::Client::result`],
    /// [`crate::Client::wait`]).
    #[error("task {id:?} was cancelled: {reason}")]
    TaskCancelled {
        /// Task id.
        id: String,
        /// The handler's reason.
        reason: String,
    },
    /// The queue's event stream is off ([`crate::Events::set_events`] turns it on). Permanent
    /// until an operator turns it on.
    #[error("queue {queue:?} keeps no events: turn its event stream on first")]
    EventsOff {
        /// The queue.
        queue: String,
    },

    /// No such task is known: never enqueued, deleted, or completed without a retention (a
    /// result is kept only while its task is retained).
    #[error(
        "task {id:?} of queue {queue:?} is not known (deleted, or completed without a retention)"
    )]
    TaskNotFound {
        /// Queue.
        queue: String,
        /// Task id.
        id: String,
    },

    /// The task had no final outcome within the time [`crate::Client::wait`] was given.
    #[error("task {id:?} did not finish within {timeout:?} (it is {state:?})")]
    WaitTimeout {
        /// Task id.
        id: String,
        /// How long the caller waited.
        timeout: Duration,
        /// Its state when the wait ended.
        state: crate::TaskState,
    },

    /// The handler's result was larger than the broker's payload limit, so it was not kept
    /// (the task still succeeded).
    #[error("the result of task {id:?} was not kept: {reason}")]
    ResultNotKept {
        /// Task id.
        id: String,
        /// Why.
        reason: String,
    },

    /// A lock or lease operation was asked for with a TTL Redis cannot express. Permanent.
    #[error("invalid duration {0:?}")]
    InvalidDuration(Duration),
    /// This broker does not offer the capability (a wrapper that kept a trait's default
    /// methods, say [`crate::Throttle`]'s). Permanent.
    #[error("this broker does not support {0}")]
    Unsupported(&'static str),
}

impl BrokerError {
    /// True when the same call may succeed later: the store unreachable, timed out, busy or
    /// failing over. A malformed URL, bad credentials, a refused command or a reply of the wrong
    /// shape are permanent: retrying them in a loop would spin forever.
    pub fn is_transient(&self) -> bool {
        match self {
            BrokerError::Store(e) => e.is_transient(),
            _ => false,
        }
    }
}

/// A failure of the store underneath a broker, with the driver's own error kept opaque, so the
/// broker traits do not tie their users to one driver's types and versions. The broker that made
/// it decided whether it is transient.
#[derive(Debug)]
pub struct StoreError {
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
    transient: bool,
}

impl StoreError {
    /// Wraps a driver's error; `transient` says whether the same call may succeed later.
    pub fn new(
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
        transient: bool,
    ) -> Self {
        Self {
            source: source.into(),
            transient,
        }
    }

    /// True when the same call may succeed later (see [`BrokerError::is_transient`]).
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The driver's error, as the concrete type the broker used (for the Redis broker,
    /// `fred::error::Error`); `None` for any other type.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.downcast_ref::<E>()
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Why stored bytes could not be turned back into a task envelope. Permanent for those bytes:
/// the worker dead-letters such a task with this reason instead of retrying it forever.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are empty.
    #[error("empty task envelope")]
    Empty,
    /// The stream entry names a task but carries no envelope (written by hand or by a tool
    /// that does not know the entry layout).
    #[error("the stream entry carries no task envelope")]
    Missing,
    /// The envelope was written by a format version this build does not know.
    #[error("task envelope format version {0} is not supported (this build reads version 1)")]
    UnsupportedVersion(u8),
    /// The bytes are not a valid envelope.
    #[error("malformed task envelope: {0}")]
    Malformed(String),
    /// The envelope is fine but its payload does not decode as the task type.
    #[error("payload of kind {kind:?} does not decode: {reason}")]
    Payload {
        /// The task kind.
        kind: String,
        /// The decoder's message.
        reason: String,
    },
}
