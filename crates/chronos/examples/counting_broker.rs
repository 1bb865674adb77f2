//! A broker wrapper that counts every call a `Server` makes, per method, and can fail the next
//! call of a chosen method: the shape of a metrics or fault-injection layer. A `Server` needs only
//! `Consume + Maintain + Inspect + SampleQueues + Flows` (`WorkerBroker`; `SampleQueues` has
//! defaults for every method), so that is all the wrapper implements (plus `Enqueue`, so a
//! `Client` can use it too).
//!
//! `cargo run -p chronos-rs --example counting_broker` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos::fred::error::{Error as RedisError, ErrorKind};
use chronos::prelude::*;
use chronos::{BrokerError, Completion, Consume, Enqueue, Fetched, LeaderInfo, LeaseId, Maintain};
use chronos::{DeadOutcome, NewTask, QueueName, QueueStats, Reclaimed, ServerRecord, TaskInfo};
use chronos::{StartOutcome, TaskRecord, TaskState};

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

    /// The next call of `method` fails with a transient (connection) error.
    pub fn fail_next(&self, method: &'static str) {
        *self.fail_next.lock().unwrap() = Some(method);
    }

    fn enter(&self, method: &'static str) -> Result<(), BrokerError> {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
        let mut fail = self.fail_next.lock().unwrap();
        if *fail != Some(method) {
            return Ok(());
        }
        *fail = None;
        Err(RedisError::new(ErrorKind::IO, format!("injected fault in {method}")).into())
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
    }
    async fn close_reader(&self, reader: Self::Reader) {
        self.inner.close_reader(reader).await
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

// Every method has a default: the queue gauges then carry counts only (no oldest-task age),
// and every process may sample them.
impl<B: Inspect> chronos::SampleQueues for Counting<B> {}
// No limits in this example: the defaults (which refuse) are never called.
impl<B: Send + Sync> chronos::Throttle for Counting<B> {}

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
    for method in [
        "enqueue",
        "fetch",
        "complete",
        "extend_leases",
        "paused_queues",
    ] {
        println!("{method}: {} calls", broker.calls(method));
    }
    Ok(())
}
