//! A broker that forwards every call to a real [`RedisBroker`] and injects chosen faults into
//! the calls that settle a delivery: a start mark held back or failed, an ack that fails while
//! a switch is on. Faults are the ones a failover or a slow network makes; the store is real.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::fred::error::{Error as RedisError, ErrorKind};
use chronos_broker::*;

/// The switches, shared by clones.
#[derive(Debug, Default)]
pub struct Switches {
    /// Start marks wait this long (ms) before they are sent.
    pub start_delay_ms: AtomicU64,
    /// This many start calls fail with a connection error.
    pub start_failures: AtomicU32,
    /// While set, acks fail with a connection error.
    pub fail_acks: AtomicBool,
    /// Start calls that reached Redis.
    pub starts: AtomicU32,
    /// Ack calls made (failed ones too).
    pub acks: AtomicU32,
}

/// Wraps a [`RedisBroker`]; clones share the switches.
#[derive(Debug, Clone)]
pub struct Faulty {
    pub inner: RedisBroker,
    pub switches: Arc<Switches>,
}

impl Faulty {
    pub fn new(inner: RedisBroker) -> Self {
        Self {
            inner,
            switches: Arc::default(),
        }
    }
}

fn cut(what: &str) -> BrokerError {
    let e = RedisError::new(
        ErrorKind::IO,
        format!("injected: connection cut during {what}"),
    );
    BrokerError::Store(StoreError::new(e, true))
}

macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty;)*) => {$(
        fn $name(&self, $($arg: $ty),*) -> impl Future<Output = Result<$ok, BrokerError>> + Send {
            self.inner.$name($($arg),*)
        }
    )*};
}

impl Consume for Faulty {
    type Reader = <RedisBroker as Consume>::Reader;
    forward! {
        open_reader() -> Self::Reader;
        ensure_queue(q: &QueueName) -> ();
        fetch(r: &mut Self::Reader, q: &QueueName, c: &str, n: usize, block: Duration) -> Fetched;
        retry(lease: &LeaseId, delay: Duration, error: &str) -> bool;
        dead_letter(lease: &LeaseId, error: &str, count: bool) -> DeadOutcome;
        requeue(q: &QueueName, leases: &[LeaseId]) -> u64;
        watch(r: &mut Self::Reader, qs: &[QueueName], c: &str, n: usize, block: Duration) -> Option<Vec<(usize, Fetched)>>;
    }

    fn close_reader(&self, reader: Self::Reader) -> impl Future<Output = ()> + Send {
        self.inner.close_reader(reader)
    }

    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send {
        self.inner.interrupter(reader)
    }

    async fn start(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> Result<Vec<StartOutcome>, BrokerError> {
        let delay = self.switches.start_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let failing = self
            .switches
            .start_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(cut("start"));
        }
        self.switches.starts.fetch_add(1, Ordering::SeqCst);
        self.inner.start(queue, leases).await
    }

    async fn complete(&self, queue: &QueueName, done: &[Completion]) -> Result<u64, BrokerError> {
        self.switches.acks.fetch_add(1, Ordering::SeqCst);
        if self.switches.fail_acks.load(Ordering::SeqCst) {
            return Err(cut("ack"));
        }
        self.inner.complete(queue, done).await
    }
}

impl Maintain for Faulty {
    forward! {
        forward_due(q: &QueueName, limit: usize) -> u64;
        reclaim_idle(q: &QueueName, min_idle: Duration, limit: usize) -> Reclaimed;
        extend_leases(q: &QueueName, c: &str, ids: &[String]) -> Vec<String>;
        trim(q: &QueueName, max_age: Duration, max_len: u64, limit: usize) -> u64;
        consumers(q: &QueueName) -> Vec<(String, u64, u64)>;
        publish_server(record: &ServerRecord, ttl: Duration) -> ();
        remove_server(id: &str) -> ();
        remove_consumer(q: &QueueName, c: &str) -> bool;
        cancel_requested(q: &QueueName, ids: &[String]) -> Vec<String>;
        reclaimed_dead(q: &QueueName, limit: usize) -> Vec<DeadTask>;
        ack_reclaimed(q: &QueueName, ids: &[String]) -> u64;
        forward_due_next(q: &QueueName, limit: usize) -> Forwarded;
        signals() -> Option<Signals>;
    }
}

impl Inspect for Faulty {
    forward! {
        queues() -> Vec<QueueName>;
        queue_stats(q: &QueueName) -> QueueStats;
        task(q: &QueueName, id: &str) -> Option<TaskRecord>;
        list_tasks(q: &QueueName, s: TaskState, offset: usize, limit: usize) -> Vec<TaskRecord>;
        set_paused(q: &QueueName, paused: bool) -> ();
        paused_queues() -> Vec<QueueName>;
        servers() -> Vec<ServerRecord>;
        scheduler_leader() -> Option<LeaderInfo>;
    }
}

impl SampleQueues for Faulty {
    forward! {
        sampler_lease(holder: &str, ttl: Duration) -> bool;
        release_sampler_lease(holder: &str) -> ();
        sample_queue(q: &QueueName) -> QueueSample;
    }
}

impl Throttle for Faulty {
    forward! {
        acquire_permits(q: &QueueName, holder: &str, want: usize, limit: &PermitLimit) -> Permits;
        return_permits(q: &QueueName, holder: &str, limit: &PermitLimit, grant: Option<(&str, usize)>, tokens: &[String]) -> u64;
        keep_permits(q: &QueueName, tokens: &[String], ttl: Duration) -> u64;
        admit(q: &QueueName, deliveries: &[(LeaseId, String)], limit: &KeyRate) -> Vec<Admission>;
    }
}

impl Flows for Faulty {
    forward! {
        enqueue_successor(task: NewTask) -> bool;
        finish_chain(q: &QueueName, chain: &str, result: Option<Vec<u8>>, keep: Duration) -> ();
        chain_state(chain: &ChainInfo) -> ChainStatus;
        open_group(group: &GroupRecord) -> GroupCreated;
        report_member(report: &MemberReport) -> MemberOutcome;
        group_state(q: &QueueName, group: &str) -> Option<GroupState>;
        group_results(q: &QueueName, group: &str, cursor: u64, count: usize) -> MemberPage;
    }
}
