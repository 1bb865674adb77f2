//! The processes a scenario runs (this binary in its hidden modes). The handle of a child
//! process, its signals and the wait for a leader are the harness shared with the tests
//! (`chronos_tests::procs`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use chronos::fred::interfaces::HashesInterface;
use chronos::prelude::*;
use chronos::{Clock, SystemClock};
use serde::{Deserialize, Serialize};

pub(crate) use chronos_tests::procs::{leader, Proc};

/// The queue the worker processes serve.
pub(crate) const WORK_QUEUE: &str = "default";
/// The queue the scheduler processes fire into (no worker serves it: its tasks stay pending,
/// to be counted).
pub(crate) const TICK_QUEUE: &str = "ticks";

/// A task that sleeps, then records its run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub(crate) sleep_ms: u64,
}

impl TaskArgs for Job {
    const KIND: &'static str = "chaos:job";
}

/// A task of a tenant (tenant-storm): sleeps, recording when its attempt started and ended.
/// The tenant rides in the payload because the handler's context does not carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TenantJob {
    pub(crate) tenant: String,
    pub(crate) sleep_ms: u64,
}

impl TaskArgs for TenantJob {
    const KIND: &'static str = "chaos:tenant-job";
}

/// The hashes of tenant-job attempts, both keyed by a random token per attempt: the start
/// (`<tenant> <task id> <worker pid> <start us>`, written before the work) and the end (`<end
/// us>`, written after it). An attempt with a start and no end was cut short by its process's
/// death.
pub(crate) fn attempt_keys(ns: &str) -> (String, String) {
    (
        format!("{ns}:chaos:tn:starts"),
        format!("{ns}:chaos:tn:ends"),
    )
}

/// Microseconds since the epoch, by this machine's clock: every process of a scenario runs on
/// the same machine, so stamps from different processes compare.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// What the scheduler processes fire every second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tick {}

impl TaskArgs for Tick {
    const KIND: &'static str = "chaos:tick";
}

/// The hash of runs: one field `<task id>/<run token>` per run of a task, so that a record
/// re-sent by the client after a lost reply is not counted as a second run.
pub(crate) fn runs_key(ns: &str) -> String {
    format!("{ns}:chaos:runs")
}

/// How a worker process is set up.
#[derive(Debug, Clone)]
pub(crate) struct WorkerOpts {
    pub(crate) concurrency: usize,
    /// A lease idle this long is taken over: a crashed worker's tasks wait this long.
    pub(crate) recover_min_idle: Duration,
}

/// Starts a worker process on `url` and waits for its `ready <server id>` line.
pub(crate) fn spawn_worker(url: &str, ns: &str, opts: &WorkerOpts) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args([
            "__worker",
            url,
            ns,
            &opts.concurrency.to_string(),
            &opts.recover_min_idle.as_millis().to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn worker process")?;
    let mut stdout = BufReader::new(child.stdout.take().context("worker stdout")?);
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    let Some(id) = line.trim().strip_prefix("ready ") else {
        let _ = child.kill();
        bail!("worker process did not start: {line:?}");
    };
    Ok(Proc::new(child, id.to_string(), Some(stdout)))
}

/// Starts a scheduler process (instance id `pid-<pid>`) whose clock runs `offset_ms` off.
pub(crate) fn spawn_scheduler(url: &str, ns: &str, ttl: Duration, offset_ms: i64) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let child = Command::new(exe)
        .args([
            "__scheduler",
            url,
            ns,
            &ttl.as_millis().to_string(),
            &offset_ms.to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .context("spawn scheduler process")?;
    let id = format!("pid-{}", child.id());
    let mut proc = Proc::new(child, id, None);
    proc.offset_ms = offset_ms;
    Ok(proc)
}

/// The current leader's id and its index in `fleet` (the scheduler processes this scenario
/// started); an error when none leads within 10 s or the leader is not one of them.
pub(crate) async fn leading(broker: &RedisBroker, fleet: &[Proc]) -> Result<(String, usize)> {
    let current = leader(broker, None, Duration::from_secs(10)).await?.id;
    let i = fleet
        .iter()
        .position(|p| p.id == current)
        .with_context(|| format!("leader {current} is none of ours"))?;
    Ok((current, i))
}

/// `__worker <url> <ns> <concurrency> <recover min idle ms>`: serves [`WORK_QUEUE`], recording
/// each run of a [`Job`] or a [`TenantJob`] after its sleep and before it returns (and of a
/// [`TenantJob`] the start and end of every attempt, [`attempt_keys`]); stops gracefully on
/// SIGTERM or SIGINT.
pub(crate) async fn worker_main(args: &[String]) -> Result<()> {
    let [url, ns, concurrency, min_idle] = args else {
        bail!("usage: __worker <url> <ns> <concurrency> <recover min idle ms>");
    };
    let min_idle = Duration::from_millis(min_idle.parse()?);
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns.as_str())
        .connect()
        .await?;
    let redis = broker.client().clone();
    let runs = runs_key(ns);
    let mut mux = Mux::new();
    let (r, rk, (starts, ends)) = (redis.clone(), runs.clone(), attempt_keys(ns));
    mux.handle(move |ctx: Context, task: Task<TenantJob>| {
        let (redis, runs, starts, ends) = (r.clone(), rk.clone(), starts.clone(), ends.clone());
        async move {
            let token = format!("{:016x}", rand::random::<u64>());
            let start = format!(
                "{} {} {} {}",
                task.args.tenant,
                ctx.task_id(),
                std::process::id(),
                now_us()
            );
            let _: i64 = redis.hset(&starts, (token.as_str(), start)).await?;
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
            let _: i64 = redis.hset(&ends, (token.as_str(), now_us())).await?;
            let field = format!("{}/{token}", ctx.task_id());
            let _: i64 = redis.hset(&runs, (field, 1)).await?;
            Ok(())
        }
    })?;
    mux.handle(move |ctx: Context, task: Task<Job>| {
        let (redis, runs) = (redis.clone(), runs.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
            let field = format!("{}/{:016x}", ctx.task_id(), rand::random::<u64>());
            let _: i64 = redis.hset(&runs, (field, 1)).await?;
            Ok(())
        }
    })?;
    let config = ServerConfig {
        concurrency: concurrency.parse()?,
        recover_min_idle: min_idle,
        recover_interval: Duration::from_millis(250),
        heartbeat_interval: min_idle / 4,
        // A failed attempt (the record could not be written while Redis was away) is retried
        // soon, so the books settle within the run.
        retry_delay: Arc::new(|_, _| Duration::from_millis(500)),
        shutdown_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let server = Server::new(broker, mux, config)?.start().await?;
    println!("ready {}", server.id());
    wait_for_stop().await?;
    server.shutdown().await;
    Ok(())
}

/// A clock `offset_ms` off the system's, for scheduler instances whose hosts disagree.
#[derive(Debug)]
struct OffsetClock(i64);

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.0)
    }
}

/// `__scheduler <url> <ns> <leader ttl ms> <clock offset ms>`: one 1 s interval schedule (id
/// `tick`) into [`TICK_QUEUE`]; resigns on SIGTERM or SIGINT.
pub(crate) async fn scheduler_main(args: &[String]) -> Result<()> {
    let [url, ns, ttl, offset] = args else {
        bail!("usage: __scheduler <url> <ns> <leader ttl ms> <clock offset ms>");
    };
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns.as_str())
        .connect()
        .await?;
    let config = SchedulerConfig {
        leader_ttl: Duration::from_millis(ttl.parse()?),
        instance_id: Some(format!("pid-{}", std::process::id())),
        clock: Arc::new(OffsetClock(offset.parse()?)),
        ..SchedulerConfig::default()
    };
    let mut scheduler = Scheduler::new(broker, config);
    scheduler.register_interval(
        Duration::from_secs(1),
        &Tick {},
        ScheduleOptions::new().id("tick").queue(TICK_QUEUE),
    )?;
    let handle = scheduler.start().await?;
    wait_for_stop().await?;
    handle.shutdown().await;
    Ok(())
}

async fn wait_for_stop() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
