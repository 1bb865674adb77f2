//! A broker wrapper that counts every call a `Server` makes, per method, and can fail the next
//! call of a chosen method: the shape of a metrics or fault-injection layer. A `Server` needs
//! `Consume + Maintain + Inspect + SampleQueues + Flows + Throttle` (`WorkerBroker`), so that is
//! what the wrapper implements (plus `Enqueue`, so a `Client` can use it too).
//!
//! It forwards every method, also those with a default body. A default is the answer of a store
//! without the feature, not a pass-through: a wrapper that leaves `cancel_requested` to its
//! default never hears of an operator's cancel, one that leaves `signals`, `forward_due_next`,
//! `watch` and `interrupter` to theirs makes the server poll each queue instead of waiting on
//! pushes and one shared blocking read, and one that leaves `Throttle` or `Flows` to theirs
//! refuses limits, chains and groups.
//!
//! `cargo run -p chronos-rs --example counting_broker` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos::fred::error::{Error as RedisError, ErrorKind};
use chronos::prelude::*;
use chronos::{Admission, Forwarded, Interrupt, KeyRate, PermitLimit, Permits, QueueSample};
use chronos::{
    BrokerError, Completion, Consume, Enqueue, Fetched, LeaderInfo, LeaseId, Maintain, StoreError,
};
use chronos::{DeadOutcome, NewTask, QueueName, QueueStats, Reclaimed, ServerRecord, TaskInfo};
use chronos::{SampleQueues, Signals, StartOutcome, TaskRecord, TaskState, Throttle};

/// Wraps any broker; clones share the counters.
#[derive(Debug, Clone)]
pub struct Counting<B> {
    inner: B,
    calls: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    fail_next: Arc<Mutex<Option<&'static str>>>,
}

impl<B> Counting<B> {
    /// Wraps `inner` with every counter at zero.
    pub fn new(inner: B) -> Self {
        let (calls, fail_next) = (Arc::default(), Arc::default());
        Self {
            inner,
            calls,
            fail_next,
        }
    }

    /// Calls of `method` so far.
    pub fn calls(&self, method: &str) -> u64 {
        self.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with its count, by name.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        let calls = self.calls.lock().unwrap();
        calls.iter().map(|(m, n)| (*m, *n)).collect()
    }

    /// The next call of `method` fails with a transient (connection) error.
    pub fn fail_next(&self, method: &'static str) {
        *self.fail_next.lock().unwrap() = Some(method);
    }

    fn count(&self, method: &'static str) {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
    }

    fn enter(&self, method: &'static str) -> Result<(), BrokerError> {
        self.count(method);
        let mut fail = self.fail_next.lock().unwrap();
        if *fail != Some(method) {
            return Ok(());
        }
        *fail = None;
        let e = RedisError::new(ErrorKind::IO, format!("injected fault in {method}"));
        Err(BrokerError::Store(StoreError::new(e, true)))
    }
}

/// Each listed method counts the call, maybe fails it, then delegates to the inner broker.
macro_rules! wrap {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty;)*) => {$(
        fn $name(&self, $($arg: $ty),*) -> impl Future<Output = Result<$ok, BrokerError>> + Send {
            async move {
                self.enter(stringify!($name))?;
                self.inner.$name($($arg),*).await
            }
        }
    )*};
}

impl<B: Consume> Consume for Counting<B> {
    type Reader = B::Reader;
    wrap! {
        open_reader() -> Self::Reader;
        ensure_queue(q: &QueueName) -> ();
        fetch(r: &mut Self::Reader, q: &QueueName, c: &str, n: usize, block: Duration) -> Fetched;
        start(q: &QueueName, leases: &[LeaseId]) -> Vec<StartOutcome>;
        complete(q: &QueueName, done: &[Completion]) -> u64;
        retry(lease: &LeaseId, delay: Duration, error: &str) -> bool;
        dead_letter(lease: &LeaseId, error: &str, count: bool) -> DeadOutcome;
        requeue(q: &QueueName, leases: &[LeaseId]) -> u64;
        watch(r: &mut Self::Reader, qs: &[QueueName], c: &str, n: usize, block: Duration)
            -> Option<Vec<(usize, Fetched)>>;
    }
    async fn close_reader(&self, reader: Self::Reader) {
        self.count("close_reader");
        self.inner.close_reader(reader).await
    }
    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send {
        self.count("interrupter");
        self.inner.interrupter(reader)
    }
}

impl<B: Maintain> Maintain for Counting<B> {
    wrap! {
        forward_due(q: &QueueName, limit: usize) -> u64;
        reclaim_idle(q: &QueueName, min_idle: Duration, limit: usize) -> Reclaimed;
        extend_leases(q: &QueueName, c: &str, ids: &[String]) -> Vec<String>;
        trim(q: &QueueName, max_age: Duration, max_len: u64, limit: usize) -> u64;
        consumers(q: &QueueName) -> Vec<(String, u64, u64)>;
        publish_server(record: &ServerRecord, ttl: Duration) -> ();
        remove_server(id: &str) -> ();
        remove_consumer(q: &QueueName, c: &str) -> bool;
        reclaimed_dead(q: &QueueName, limit: usize) -> Vec<chronos::DeadTask>;
        ack_reclaimed(q: &QueueName, ids: &[String]) -> u64;
        forward_due_next(q: &QueueName, limit: usize) -> Forwarded;
        signals() -> Option<Signals>;
        cancel_requested(q: &QueueName, ids: &[String]) -> Vec<String>;
    }
}

impl<B: Inspect> Inspect for Counting<B> {
    wrap! {
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

impl<B: SampleQueues> SampleQueues for Counting<B> {
    wrap! {
        sampler_lease(holder: &str, ttl: Duration) -> bool;
        release_sampler_lease(holder: &str) -> ();
        sample_queue(q: &QueueName) -> QueueSample;
    }
}

impl<B: Throttle> Throttle for Counting<B> {
    wrap! {
        acquire_permits(q: &QueueName, holder: &str, want: usize, limit: &PermitLimit) -> Permits;
        return_permits(q: &QueueName, holder: &str, limit: &PermitLimit,
            grant: Option<(&str, usize)>, tokens: &[String]) -> u64;
        keep_permits(q: &QueueName, tokens: &[String], ttl: Duration) -> u64;
        admit(q: &QueueName, deliveries: &[(LeaseId, String)], limit: &KeyRate) -> Vec<Admission>;
    }
}

impl<B: chronos::Flows> chronos::Flows for Counting<B> {
    wrap! {
        enqueue_successor(task: NewTask) -> bool;
        finish_chain(q: &QueueName, chain: &str, result: Option<Vec<u8>>, keep: Duration) -> ();
        chain_state(chain: &chronos::ChainInfo) -> chronos::ChainStatus;
        open_group(group: &chronos::GroupRecord) -> chronos::GroupCreated;
        report_member(report: &chronos::MemberReport) -> chronos::MemberOutcome;
        group_state(q: &QueueName, group: &str) -> Option<chronos::GroupState>;
        group_results(q: &QueueName, group: &str, cursor: u64, count: usize) -> chronos::MemberPage;
    }
}

impl<B: Enqueue> Enqueue for Counting<B> {
    wrap! { enqueue(tasks: Vec<NewTask>) -> Vec<Result<TaskInfo, BrokerError>>; }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Ping;

impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let broker = Counting::new(RedisBroker::connect(chronos_testkit::shared_url()?).await?);
    let mut mux = Mux::new();
    mux.handle(|_: Context, _: Task<Ping>| async { Ok(()) })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default())?;
    let server = server.start().await?;
    broker.fail_next("complete"); // the first ack fails; the server retries it
    Client::new(broker.clone())
        .enqueue(&Ping, EnqueueOptions::new())
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.shutdown().await;
    for (method, calls) in broker.counts() {
        println!("{method}: {calls} calls");
    }
    Ok(())
}
