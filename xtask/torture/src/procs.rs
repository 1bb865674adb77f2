//! The processes of a run: worker processes (real `Server`s serving every queue) and scheduler
//! processes (real `Scheduler`s running the runtime schedule), each this binary re-invoked in
//! a hidden mode. Handlers obey the [`Act`] their task carries and write the journal.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use chronos::prelude::*;
use chronos::QueueName;
use std::io::{BufRead as _, BufReader};

pub(crate) use chronos_tests::procs::Proc;

use crate::gen::Limits;
use crate::job::{queue, Act, Job, Tick, TICK_KEY};
use crate::journal::{Journal, Outcome};

/// A lease idle this long is taken over: a killed or stopped worker's tasks wait this long.
pub(crate) const RECOVER_MIN_IDLE: Duration = Duration::from_secs(2);
/// The retry delay of every failed attempt: fixed, so the model knows when a retry is due.
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(300);
/// The schedulers' leader TTL: short, so a run sees failovers.
pub(crate) const LEADER_TTL: Duration = Duration::from_secs(2);

/// How a worker process is set up.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSetup {
    pub(crate) url: String,
    pub(crate) ns: String,
    pub(crate) journal: PathBuf,
    pub(crate) concurrency: usize,
    pub(crate) limits: Limits,
}

/// Starts a worker process and waits for its `ready <server id>` line.
pub(crate) fn spawn_worker(s: &WorkerSetup) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args([
            "__worker",
            &s.url,
            &s.ns,
            &s.journal.display().to_string(),
            &s.concurrency.to_string(),
            &s.limits.concurrency.to_string(),
            &s.limits.rate.to_string(),
            &s.limits.per_key.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn worker process")?;
    let mut stdout = BufReader::new(child.stdout.take().context("worker stdout")?);
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    let Some(id) = line.trim().strip_prefix("ready ") else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("worker process did not start: {line:?}");
    };
    Ok(Proc::new(child, id.to_string(), Some(stdout)))
}

/// Starts a scheduler process (instance id `pid-<pid>`).
pub(crate) fn spawn_scheduler(url: &str, ns: &str) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let child = Command::new(exe)
        .args(["__scheduler", url, ns])
        .stdout(Stdio::null())
        .spawn()
        .context("spawn scheduler process")?;
    let id = format!("pid-{}", child.id());
    Ok(Proc::new(child, id, None))
}

/// The marker of a one-time signal (snooze, `rate_limited`) of a task: true the first time it
/// is asked for, by any process. A file created exclusively, so that it survives the process
/// (and a Redis restart) and needs no Redis call that a fault could lose.
fn first_time(marks: &Path, what: &str, task: &str) -> bool {
    let name: String = task
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marks.join(format!("{what}-{name}")))
        .is_ok()
}

/// What one attempt of a [`Job`] does, by its [`Act`].
async fn run_job(
    ctx: Context,
    job: Job,
    journal: Journal,
    marks: Arc<PathBuf>,
) -> Result<(), TaskError> {
    let attempt = ctx.attempt();
    let mut g = journal.start(job.key, job.gen, ctx.task_id(), attempt, ctx.queue());
    let sleep = |ms: u32| tokio::time::sleep(Duration::from_millis(ms.into()));
    match job.act {
        Act::Ok { ms } => {
            sleep(ms).await;
        }
        Act::Fail { times, ms } => {
            sleep(ms).await;
            if attempt <= times {
                g.set(Outcome::Fail);
                return Err(TaskError::retry(format!("torture fail {attempt}")));
            }
        }
        Act::Panic { times } => {
            if attempt <= times {
                g.set(Outcome::Panic);
                panic!("torture panic {attempt}");
            }
        }
        Act::Slow { times, ms } => {
            if attempt <= times {
                // Cut off by the task's timeout: the guard records the drop.
                sleep(ms).await;
            }
        }
        Act::SkipRetry => {
            g.set(Outcome::Skip);
            return Err(TaskError::skip_retry("torture skip"));
        }
        Act::Snooze { ms } => {
            if first_time(&marks, "snooze", ctx.task_id()) {
                g.set(Outcome::Snooze);
                return Err(TaskError::snooze(Duration::from_millis(ms.into())));
            }
        }
        Act::RateLimited { ms, queue_wide } => {
            if first_time(&marks, "limited", ctx.task_id()) {
                g.set(Outcome::RateLimited);
                let e = TaskError::rate_limited(Duration::from_millis(ms.into()));
                return Err(if queue_wide { e.queue_wide() } else { e });
            }
        }
        Act::Cancel => {
            g.set(Outcome::Cancel);
            return Err(TaskError::cancel("torture cancel"));
        }
        Act::Long { ms } => {
            tokio::select! {
                _ = sleep(ms) => {}
                _ = ctx.cancelled() => {
                    g.set(Outcome::Cancel);
                    return Err(TaskError::cancel("torture operator cancel"));
                }
            }
        }
        Act::Callback => {
            if let Some(s) = ctx.group() {
                journal.group(job.key, ctx.task_id(), s.succeeded, s.failed, s.total);
            }
        }
    }
    g.set(Outcome::Ok);
    Ok(())
}

/// `__worker <url> <ns> <journal dir> <concurrency> <limit concurrency> <rate/s> <per key/s>`:
/// serves every queue of [`queue::ALL`]; stops gracefully on SIGTERM or SIGINT.
pub(crate) async fn worker_main(args: &[String]) -> Result<()> {
    let [url, ns, dir, concurrency, lc, rate, per_key] = args else {
        bail!("usage: __worker <url> <ns> <journal dir> <concurrency> <limit concurrency> <rate> <per key rate>");
    };
    // The handlers' panics are on purpose: keep them out of the run's output.
    std::panic::set_hook(Box::new(|_| {}));
    let dir = PathBuf::from(dir);
    let journal = Journal::open(&dir)?;
    let marks = Arc::new(dir.join("marks"));
    std::fs::create_dir_all(marks.as_path())?;
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns.as_str())
        .connect()
        .await?;
    let mut mux = Mux::new();
    let (j, m) = (journal.clone(), marks.clone());
    mux.handle(move |ctx: Context, task: Task<Job>| run_job(ctx, task.args, j.clone(), m.clone()))?;
    let j = journal.clone();
    mux.handle(move |ctx: Context, _task: Task<Tick>| {
        let j = j.clone();
        async move {
            let mut g = j.start(TICK_KEY, 0, ctx.task_id(), ctx.attempt(), ctx.queue());
            g.set(Outcome::Ok);
            Ok(())
        }
    })?;
    let limit = QueueLimit::new()
        .concurrency(lc.parse()?)
        .rate(rate.parse()?, Duration::from_secs(1))
        .per_key_rate(per_key.parse()?, Duration::from_secs(1));
    // Validated names only: a typo here would be a run that serves nothing.
    for (q, _) in queue::ALL {
        QueueName::new(q)?;
    }
    let config = ServerConfig {
        queues: queue::ALL
            .iter()
            .map(|(q, w)| (q.to_string(), *w))
            .collect(),
        concurrency: concurrency.parse()?,
        recover_min_idle: RECOVER_MIN_IDLE,
        recover_interval: Duration::from_millis(250),
        heartbeat_interval: RECOVER_MIN_IDLE / 4,
        retry_delay: Arc::new(|_, _| RETRY_DELAY),
        shutdown_timeout: Duration::from_secs(5),
        janitor_interval: Duration::from_secs(5),
        ..ServerConfig::default()
    }
    .limit(queue::LIMIT, limit);
    let server = Server::new(broker, mux, config)?.start().await?;
    println!("ready {}", server.id());
    wait_for_stop().await?;
    server.shutdown().await;
    Ok(())
}

/// `__scheduler <url> <ns>`: a scheduler with nothing registered in code (the run adds a
/// runtime schedule); resigns on SIGTERM or SIGINT.
pub(crate) async fn scheduler_main(args: &[String]) -> Result<()> {
    let [url, ns] = args else {
        bail!("usage: __scheduler <url> <ns>");
    };
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns.as_str())
        .connect()
        .await?;
    let config = SchedulerConfig {
        leader_ttl: LEADER_TTL,
        instance_id: Some(format!("pid-{}", std::process::id())),
        ..SchedulerConfig::default()
    };
    let handle = Scheduler::new(broker, config).start().await?;
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

/// One worker slot: its process (replaced after a kill) and the proxy it talks to Redis
/// through (kept for the whole run, so a stall or a lost reply can be aimed at it).
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) proc: Proc,
    /// None against a cluster (a proxy cannot front one: clients follow its redirects).
    pub(crate) proxy: Option<chronos_testkit::TcpProxy>,
}

/// The Redis of a run.
#[derive(Debug)]
pub(crate) enum Backend {
    /// Append-only with fsync always, so a restart keeps every acknowledged write.
    Standalone(chronos_testkit::RedisServer),
    Cluster(chronos_testkit::RedisCluster),
}

impl Backend {
    /// The URL the processes connect to (directly).
    pub(crate) fn url(&self) -> String {
        match self {
            Backend::Standalone(s) => s.url(),
            Backend::Cluster(c) => c.url(),
        }
    }

    /// Each node's own URL (one for a standalone server).
    pub(crate) fn node_urls(&self) -> Vec<String> {
        match self {
            Backend::Standalone(s) => vec![s.url()],
            Backend::Cluster(c) => c
                .ports()
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}"))
                .collect(),
        }
    }
}

/// Every process of a run and the proxies in front of Redis.
#[derive(Debug)]
pub(crate) struct Fleet {
    pub(crate) redis: Backend,
    pub(crate) workers: Vec<Slot>,
    pub(crate) schedulers: Vec<Proc>,
    /// The producer's proxy (the operators talk to Redis directly); None against a cluster.
    pub(crate) producer: Option<chronos_testkit::TcpProxy>,
    /// The worker setup, but for the URL (each slot's proxy).
    pub(crate) setup: WorkerSetup,
}

impl Fleet {
    /// The setup of slot `i`'s worker.
    pub(crate) fn setup_of(&self, i: usize) -> WorkerSetup {
        let mut s = self.setup.clone();
        if let Some(proxy) = self.workers.get(i).and_then(|w| w.proxy.as_ref()) {
            s.url = proxy.url();
        }
        s
    }

    /// The pids of the worker processes now.
    pub(crate) fn worker_pids(&self) -> Vec<u32> {
        self.workers.iter().map(|s| s.proc.pid()).collect()
    }

    /// Asks every process to stop gracefully and waits for them (workers first: they finish
    /// what they run).
    pub(crate) fn stop_all(&mut self) {
        for s in &self.workers {
            s.proc.terminate();
        }
        for s in &mut self.workers {
            s.proc.wait_exit(Duration::from_secs(10));
        }
        for p in &self.schedulers {
            p.terminate();
        }
        for p in &mut self.schedulers {
            p.wait_exit(Duration::from_secs(5));
        }
    }
}
