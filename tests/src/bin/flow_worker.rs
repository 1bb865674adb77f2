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
    BrokerError, ChainInfo, ChainStatus, Consume, Flows, GroupCreated, GroupRecord, GroupState,
    Maintain, MemberOutcome, MemberPage, MemberReport, NewTask, QueueName,
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

impl Consume for Faulty {
    type Reader = <RedisBroker as Consume>::Reader;
    chronos::forward!(Consume => inner);
}

impl Maintain for Faulty {
    chronos::forward!(Maintain => inner);
}

impl Inspect for Faulty {
    chronos::forward!(Inspect => inner);
}

impl chronos::SampleQueues for Faulty {
    chronos::forward!(SampleQueues => inner);
}

impl chronos::Throttle for Faulty {
    chronos::forward!(Throttle => inner);
}

impl chronos::Settings for Faulty {
    chronos::forward!(Settings => inner);
}

impl Flows for Faulty {
    // Hand-written: two of its methods die on cue; the compiler lists any method left out.
    fn finish_chain(
        &self,
        q: &QueueName,
        chain: &str,
        result: Option<Vec<u8>>,
        keep: Duration,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send {
        self.inner.finish_chain(q, chain, result, keep)
    }

    fn chain_state(
        &self,
        chain: &ChainInfo,
    ) -> impl Future<Output = Result<ChainStatus, BrokerError>> + Send {
        self.inner.chain_state(chain)
    }

    fn open_group(
        &self,
        group: &GroupRecord,
    ) -> impl Future<Output = Result<GroupCreated, BrokerError>> + Send {
        self.inner.open_group(group)
    }

    fn group_state(
        &self,
        q: &QueueName,
        group: &str,
    ) -> impl Future<Output = Result<Option<GroupState>, BrokerError>> + Send {
        self.inner.group_state(q, group)
    }

    fn group_results(
        &self,
        q: &QueueName,
        group: &str,
        cursor: u64,
        count: usize,
    ) -> impl Future<Output = Result<MemberPage, BrokerError>> + Send {
        self.inner.group_results(q, group, cursor, count)
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
