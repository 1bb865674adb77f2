//! A worker process for the workflow crash tests: serves the queues named in `$CHRONOS_QUEUES`
//! (comma-separated) of namespace `$CHRONOS_NS` on `$CHRONOS_REDIS_URL`, with handlers for
//! [`FlowStep`], [`Member`] and [`Collect`].
//!
//! Its broker is wrapped in [`Faulty`], which aborts the process right after a chosen workflow
//! call returned, that is after the bookkeeping and before the task's acknowledgement:
//! * `$CHRONOS_KILL_AFTER_SUCCESSOR=<task id>`: after enqueueing that chain step;
//! * `$CHRONOS_KILL_AFTER_MEMBER=<index>`: after reporting that group member;
//! * `$CHRONOS_KILL_ON_FIRE=1`: after the member report that enqueued the group's callback.
//!
//! Before aborting it writes the task it died on to `killed_key`.

use std::future::Future;
use std::time::Duration;

use chronos::fred::interfaces::KeysInterface;
use chronos::prelude::*;
use chronos::{
    BrokerError, ChainInfo, ChainStatus, Completion, Consume, DeadOutcome, Fetched, Flows,
    GroupCreated, GroupRecord, GroupState, LeaderInfo, LeaseId, Maintain, MemberOutcome,
    MemberPage, MemberReport, NewTask, QueueName, QueueStats, Reclaimed, ServerRecord,
    StartOutcome, TaskRecord, TaskState,
};
use chronos_tests::{
    callback_counts_key, callback_runs_key, killed_key, release_key, runs_key, Collect, FlowStep,
    Member,
};

/// Where to die.
#[derive(Debug, Clone, Default)]
struct Faults {
    after_successor: Option<String>,
    after_member: Option<u64>,
    on_fire: bool,
}

/// A broker that forwards every call and aborts the process after the chosen workflow call.
#[derive(Debug, Clone)]
struct Faulty {
    inner: RedisBroker,
    faults: Faults,
    ns: String,
}

impl Faulty {
    async fn die(&self, on: String) -> ! {
        let _: Result<(), _> = self
            .inner
            .client()
            .set(killed_key(&self.ns), on, None, None, false)
            .await;
        // Like SIGKILL: no ack, no shutdown, no destructor.
        std::process::abort()
    }
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
        start(q: &QueueName, leases: &[LeaseId]) -> Vec<StartOutcome>;
        complete(q: &QueueName, done: &[Completion]) -> u64;
        retry(lease: &LeaseId, delay: Duration, error: &str) -> bool;
        dead_letter(lease: &LeaseId, error: &str, count: bool) -> DeadOutcome;
        requeue(q: &QueueName, leases: &[LeaseId]) -> u64;
    }
    fn close_reader(&self, reader: Self::Reader) -> impl Future<Output = ()> + Send {
        self.inner.close_reader(reader)
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
        reclaimed_dead(q: &QueueName, limit: usize) -> Vec<chronos::DeadTask>;
        ack_reclaimed(q: &QueueName, ids: &[String]) -> u64;
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

impl chronos::SampleQueues for Faulty {}

// Limits nothing: every method answers unsupported, and no queue here is limited.
impl chronos::Throttle for Faulty {}

impl Flows for Faulty {
    forward! {
        finish_chain(q: &QueueName, chain: &str, result: Option<Vec<u8>>, keep: Duration) -> ();
        chain_state(chain: &ChainInfo) -> ChainStatus;
        open_group(group: &GroupRecord) -> GroupCreated;
        group_state(q: &QueueName, group: &str) -> Option<GroupState>;
        group_results(q: &QueueName, group: &str, cursor: u64, count: usize) -> MemberPage;
    }

    async fn enqueue_successor(&self, task: NewTask) -> Result<bool, BrokerError> {
        let id = task.envelope.id.clone();
        let r = self.inner.enqueue_successor(task).await;
        if r.is_ok() && self.faults.after_successor.as_deref() == Some(id.as_str()) {
            self.die(id).await;
        }
        r
    }

    async fn report_member(&self, report: &MemberReport) -> Result<MemberOutcome, BrokerError> {
        let r = self.inner.report_member(report).await;
        let chosen = self.faults.after_member == Some(report.index);
        let fired = matches!(r, Ok(MemberOutcome::Counted { fired: true }));
        if r.is_ok() && (chosen || (fired && self.faults.on_fire)) {
            self.die(format!("{}:{}", report.group, report.index)).await;
        }
        r
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let queues = std::env::var("CHRONOS_QUEUES").unwrap_or_else(|_| "default".into());
    let faults = Faults {
        after_successor: std::env::var("CHRONOS_KILL_AFTER_SUCCESSOR").ok(),
        after_member: std::env::var("CHRONOS_KILL_AFTER_MEMBER")
            .ok()
            .and_then(|s| s.parse().ok()),
        on_fire: std::env::var("CHRONOS_KILL_ON_FIRE").is_ok(),
    };
    let broker = RedisBroker::builder(url)
        .namespace(ns.clone())
        .connect()
        .await?;
    let redis = broker.client().clone();
    let mut mux = Mux::new();
    let (r, n) = (redis.clone(), ns.clone());
    mux.handle(move |ctx: Context, task: Task<FlowStep>| {
        let (redis, ns) = (r.clone(), n.clone());
        async move {
            let _: i64 = redis.incr(runs_key(&ns, ctx.task_id())).await?;
            let release = release_key(&ns, ctx.task_id());
            while task.args.block && redis.exists::<i64, _>(&release).await? == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let before: u64 = ctx.parent_result()?.unwrap_or(0);
            Ok(before * 10 + task.args.n)
        }
    })?;
    let (r, n) = (redis.clone(), ns.clone());
    mux.handle(move |ctx: Context, task: Task<Member>| {
        let (redis, ns) = (r.clone(), n.clone());
        async move {
            let _: i64 = redis.incr(runs_key(&ns, ctx.task_id())).await?;
            if task.args.n % 5 == 4 {
                return Err(TaskError::skip_retry("members 4, 9, 14, ... fail"));
            }
            Ok(task.args.n)
        }
    })?;
    let (r, n) = (redis.clone(), ns.clone());
    mux.handle(move |ctx: Context, _task: Task<Collect>| {
        let (redis, ns) = (r.clone(), n.clone());
        async move {
            let g = ctx
                .group()
                .ok_or_else(|| TaskError::skip_retry("not a group callback"))?;
            let counts = format!("{}:{}", g.succeeded, g.failed);
            let _: () = redis
                .set(callback_counts_key(&ns), counts, None, None, false)
                .await?;
            let _: i64 = redis.incr(callback_runs_key(&ns)).await?;
            Ok(())
        }
    })?;
    let config = ServerConfig {
        heartbeat_interval: Duration::from_millis(200),
        recover_min_idle: Duration::from_secs(1),
        recover_interval: Duration::from_millis(200),
        ..ServerConfig::default()
    }
    .queues(queues.split(',').map(|q| (q.to_string(), 1)));
    let broker = Faulty {
        inner: broker,
        faults,
        ns,
    };
    let server = Server::new(broker, mux, config)?.start().await?;
    println!("ready {}", server.id());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
