//! The whole system in one process: a worker pool on three weighted queues, a producer, and the
//! cluster scheduler firing a 1 s interval schedule, with a live progress line, until Ctrl-C,
//! SIGTERM (or `--seconds N`), then a graceful shutdown.
//!
//! `cargo xtask demo [--seconds N] [--rate TASKS_PER_S] [--role all|worker|scheduler|producer]
//! [--grace SECS] [--console ADDR|off]`. Role `all` also serves the web console (`chronos dash`)
//! on 127.0.0.1:8080, or a free port when that one is taken. Uses CHRONOS_REDIS_URL when set,
//! otherwise (role `all` only) starts a throwaway redis-server. The roles other than `all` run one part each, as the containers of
//! `deploy/` do; they meet in the Redis of CHRONOS_REDIS_URL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chronos::prelude::*;
use serde::{Deserialize, Serialize};

// The CLI's tables, so the demo's closing table is the one `chronos queue ls` prints.
#[allow(dead_code)]
#[path = "../../chronos-cli/src/table.rs"]
mod table;

#[derive(Serialize, Deserialize)]
struct SendEmail {
    n: u64,
    to: String,
}
impl TaskArgs for SendEmail {
    const KIND: &'static str = "email:send";
}

#[derive(Serialize, Deserialize)]
struct BuildReport {
    n: u64,
}
impl TaskArgs for BuildReport {
    const KIND: &'static str = "report:build";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("low").max_retry(2)
    }
}

#[derive(Serialize, Deserialize)]
struct Reconcile {
    ledger: String,
}
impl TaskArgs for Reconcile {
    const KIND: &'static str = "ledger:reconcile";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

#[derive(Serialize, Deserialize)]
struct ChargeCard {
    n: u64,
    cents: u64,
}
impl TaskArgs for ChargeCard {
    const KIND: &'static str = "payment:charge";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

/// Calls a partner's API: limited to 40 starts a second for the whole cluster, and 4 a second
/// per customer (the task's rate key).
#[derive(Serialize, Deserialize)]
struct SyncCrm {
    customer: u64,
}
impl TaskArgs for SyncCrm {
    const KIND: &'static str = "crm:sync";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("partner")
    }
}

/// A member of an import group: one file of a batch; its result is the rows it read.
#[derive(Serialize, Deserialize)]
struct ImportFile {
    batch: u64,
    file: u64,
}
impl TaskArgs for ImportFile {
    const KIND: &'static str = "import:file";
}

/// The group's callback: runs once, when every file of the batch finished.
#[derive(Serialize, Deserialize)]
struct ImportDone {
    batch: u64,
}
impl TaskArgs for ImportDone {
    const KIND: &'static str = "import:done";
}

/// A runtime schedule (added through the API while the demo runs, not in code).
#[derive(Serialize, Deserialize)]
struct Digest {
    team: String,
}
impl TaskArgs for Digest {
    const KIND: &'static str = "digest:send";
}

/// Which part of the system this process runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    All,
    Worker,
    Scheduler,
    Producer,
}

impl Role {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "all" => Role::All,
            "worker" => Role::Worker,
            "scheduler" => Role::Scheduler,
            "producer" => Role::Producer,
            other => anyhow::bail!(
                "unknown role {other:?} (expected all, worker, scheduler or producer)"
            ),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Worker => "worker",
            Role::Scheduler => "scheduler",
            Role::Producer => "producer",
        }
    }

    fn works(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }

    fn schedules(self) -> bool {
        matches!(self, Role::All | Role::Scheduler)
    }

    fn produces(self) -> bool {
        matches!(self, Role::All | Role::Producer)
    }
}

struct Args {
    seconds: Option<u64>,
    rate: u64,
    role: Role,
    /// The worker's shutdown grace; `deploy/` sizes the containers' stop timeouts above it.
    grace: Duration,
    /// Where the web console listens (role `all` only); None: no console.
    console: Option<String>,
}

/// What `chronos-demo --help` prints (the image ships this example as `chronos-demo`).
const HELP: &str = "\
chronos-demo: the whole chronos-rs system in one process (or one role of it)

A worker pool on weighted queues, a producer, and the cluster scheduler firing a 1 s interval
schedule, with a progress line a second, until Ctrl-C, SIGTERM or --seconds; then a graceful
shutdown. Some handlers fail, panic or dead-letter on purpose: that is part of the show.

Usage: chronos-demo [OPTIONS]

Options:
  --role ROLE      all (default), worker, scheduler or producer; the roles other than all
                   run one part each and meet in the Redis of CHRONOS_REDIS_URL
  --rate N         tasks enqueued per second (default 200)
  --seconds N      stop after N seconds (default: run until Ctrl-C or SIGTERM)
  --grace SECS     how long running tasks get to finish on shutdown (default: the
                   library's shutdown timeout)
  --console ADDR   where role all serves the web console (default 127.0.0.1:8080, a free
                   port when taken); `off` for none
  -h, --help       this text

Environment:
  CHRONOS_REDIS_URL  the Redis to use (a password in it is never printed); without it,
                     role all starts a throwaway redis-server from PATH
";

/// The command line, or None when it asked for the help text.
fn parse_args(argv: impl IntoIterator<Item = String>) -> anyhow::Result<Option<Args>> {
    let mut args = Args {
        seconds: None,
        rate: 200,
        role: Role::All,
        grace: ServerConfig::default().shutdown_timeout,
        console: Some("127.0.0.1:8080".into()),
    };
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().context("missing value");
        let mut number = || value()?.parse::<u64>().context("not a number");
        match a.as_str() {
            "--seconds" => args.seconds = Some(number()?),
            "--rate" => args.rate = number()?.max(1),
            "--grace" => args.grace = Duration::from_secs(number()?),
            "--role" => args.role = Role::parse(&value()?)?,
            "--console" => {
                let v = value()?;
                args.console = (v != "off").then_some(v);
            }
            "-h" | "--help" => return Ok(None),
            other => anyhow::bail!(
                "unknown argument {other:?} (expected --seconds N, --rate N, \
                 --role all|worker|scheduler|producer, --grace SECS, --console ADDR|off; \
                 --help tells more)"
            ),
        }
    }
    Ok(Some(args))
}

/// How the payment handler's deliberate panics start: the panic hook condenses these only.
const DELIBERATE_PANIC: &str = "card processor returned garbage";

/// Handler panics whose message is printed; the rest are only counted in the progress line.
const PANICS_SHOWN: u64 = 3;

/// The line (if any) for the `n`-th handler panic: the first few with their message, then one
/// saying the rest are counted, then silence (at 300 tasks/s the demo panics about three
/// times a second: a line each would drown the progress lines).
fn panic_line(n: u64, message: &str) -> Option<String> {
    let message = chronos_admin::printable(message);
    match n {
        n if n <= PANICS_SHOWN => Some(format!(
            "(demo) handler panic #{n}, caught and retried: {message}"
        )),
        n if n == PANICS_SHOWN + 1 => Some(format!(
            "(demo) handler panic #{n}: further panics are counted in the progress line (\"panics\")"
        )),
        _ => None,
    }
}

/// The URL without its password or secret query parameters: in a container the URL comes
/// from a secret and the first line goes to the cluster's logs.
fn redact(url: &str) -> String {
    chronos_admin::redact_url(url)
}

/// Handler panics so far (counted by the panic hook, shown in the progress line).
static PANICS: AtomicU64 = AtomicU64::new(0);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(args) = parse_args(std::env::args().skip(1))? else {
        print!("{HELP}");
        return Ok(());
    };
    let role = args.role;
    // Handler panics are part of the show: the first few with their message (the task is
    // retried; a backtrace would bury the progress lines), then only a count in the progress
    // line.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        // Any other panic is a bug, and always shown in full.
        if !message.starts_with(DELIBERATE_PANIC) {
            let at = info
                .location()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            eprintln!(
                "(demo) unexpected panic{at}: {}",
                chronos_admin::printable(&message)
            );
            return;
        }
        let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(line) = panic_line(n, &message) {
            eprintln!("{line}");
        }
    }));
    let _redis; // keeps a throwaway server alive for the run
    let url = match std::env::var("CHRONOS_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Some(url) => url,
        // A throwaway Redis is private to this process: a lone worker or producer on it would
        // never meet the other roles.
        None if role != Role::All => anyhow::bail!(
            "--role {} needs CHRONOS_REDIS_URL: the roles meet in one Redis",
            role.name()
        ),
        None => {
            let server = chronos_testkit::RedisServer::start()?;
            let url = server.url();
            _redis = server;
            url
        }
    };
    if role == Role::All {
        println!(
            "chronos demo: redis at {}, {} tasks/s, Ctrl-C to stop",
            redact(&url),
            args.rate
        );
    } else {
        println!(
            "chronos demo, role {}: redis at {}, Ctrl-C or SIGTERM to stop",
            role.name(),
            redact(&url)
        );
    }
    let broker = RedisBroker::builder(&url)
        .namespace("chronos-demo")
        .connect()
        .await?;

    let console = match (&args.console, role) {
        (Some(addr), Role::All) => Some(console(&broker, &url, addr).await?),
        _ => None,
    };

    // Counts the runs of the scheduled task in this process (the worker side of it).
    let reconciled = Arc::new(AtomicU64::new(0));
    let server = if role.works() {
        let server = Server::new(broker.clone(), demo_mux(reconciled.clone())?, {
            ServerConfig {
                concurrency: 32,
                shutdown_timeout: args.grace,
                retry_delay: Arc::new(|retried, _| Duration::from_millis(500 * u64::from(retried))),
                ..ServerConfig::default()
            }
            .queues([("critical", 6), ("default", 3), ("partner", 2), ("low", 1)])
            .limit(
                "partner",
                QueueLimit::new()
                    .rate(40, Duration::from_secs(1))
                    .per_key_rate(4, Duration::from_secs(1)),
            )
        })?
        .start()
        .await?;
        Some(server)
    } else {
        None
    };

    let scheduler = if role.schedules() {
        let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
        scheduler.register_interval(
            Duration::from_secs(1),
            &Reconcile {
                ledger: "main".into(),
            },
            ScheduleOptions::new().id("reconcile"),
        )?;
        // An operator's schedule, stored in Redis: any instance may add it, the leader fires it.
        let digest = chronos::NewSchedule::interval(
            "team-digest",
            Duration::from_secs(10),
            &Digest { team: "ops".into() },
            ScheduleOptions::new(),
        )?;
        chronos::RuntimeSchedules::new(broker.clone())
            .add(digest)
            .await?;
        Some(scheduler.start().await?)
    } else {
        None
    };

    let enqueued = Arc::new(AtomicU64::new(0));
    let stop = tokio_stop(args.seconds);
    let producer = role.produces().then(|| {
        tokio::spawn(produce(
            Client::new(broker.clone()),
            args.rate,
            enqueued.clone(),
            stop.clone(),
        ))
    });
    if role == Role::Producer {
        println!("producing {} tasks/s", args.rate);
    }

    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut was_leader = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait() => break,
        }
        let secs = started.elapsed().as_secs();
        let leader = scheduler.as_ref().is_some_and(|s| s.is_leader());
        match (&server, role) {
            (Some(server), _) => {
                let s = server.stats();
                let rate = (s.succeeded - last.1) as f64 / last.0.elapsed().as_secs_f64();
                last = (Instant::now(), s.succeeded);
                if role == Role::All {
                    println!(
                        "[{:>4}s] enqueued {:>7}  done {:>7}  retried {:>5}  dead {:>4}  panics {:>4}  running {:>3}  {:>7.1} tasks/s  scheduled runs {:>3}{}",
                        secs,
                        enqueued.load(Ordering::Relaxed),
                        s.succeeded,
                        s.failed - s.dead.min(s.failed),
                        s.dead,
                        PANICS.load(Ordering::Relaxed),
                        s.running,
                        rate,
                        reconciled.load(Ordering::Relaxed),
                        if leader { " (leader)" } else { "" },
                    );
                } else {
                    println!(
                        "[{:>4}s] done {:>7}  retried {:>5}  dead {:>4}  panics {:>4}  running {:>3}  {:>7.1} tasks/s  scheduled runs {:>3}",
                        secs,
                        s.succeeded,
                        s.failed - s.dead.min(s.failed),
                        s.dead,
                        PANICS.load(Ordering::Relaxed),
                        s.running,
                        rate,
                        reconciled.load(Ordering::Relaxed),
                    );
                }
            }
            // Leadership changes are the news of a lone scheduler; a line per second of
            // "still following" would bury them.
            (None, Role::Scheduler) => {
                if was_leader != Some(leader) {
                    was_leader = Some(leader);
                    let what = if leader {
                        "leader: firing the reconcile schedule every second"
                    } else {
                        "follower: another instance fires the schedules"
                    };
                    println!("[{secs:>4}s] {what}");
                }
            }
            (None, _) => println!(
                "[{:>4}s] enqueued {:>7}",
                secs,
                enqueued.load(Ordering::Relaxed)
            ),
        }
    }
    let grace = args.grace.as_secs_f64();
    match role {
        Role::All => println!(
            "stopping: producer first, then a graceful server shutdown (running tasks get up to {grace} s)"
        ),
        Role::Worker => println!(
            "stopping: no new fetches; running tasks get up to {grace} s to finish, the rest are retried elsewhere"
        ),
        Role::Scheduler => println!("stopping: resigning the leadership if held"),
        Role::Producer => println!("stopping"),
    }
    if let Some(producer) = producer {
        producer.await??;
    }
    if let Some(scheduler) = scheduler {
        scheduler.shutdown().await;
    }
    if let Some(server) = server {
        server.shutdown().await;
    }
    if let Some(stop) = console {
        let _ = stop.send(());
    }
    if role == Role::All {
        // The same table as `chronos stats` prints.
        let queues = chronos_admin::Admin::new(broker.clone()).queues().await?;
        print!("{}", table::queue_table(&queues, None));
    } else {
        println!("stopped");
    }
    Ok(())
}

/// Serves the web console (`chronos dash`) on `addr`, or on a free port when that one is taken;
/// sending on the answer stops it.
async fn console(
    broker: &RedisBroker,
    url: &str,
    addr: &str,
) -> anyhow::Result<tokio::sync::oneshot::Sender<()>> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    let bound = listener.local_addr()?;
    let config = chronos_dash::DashConfig::default()
        .addr(bound)
        .redis_label(url);
    let dash = chronos_dash::Dash::new(chronos_admin::Admin::new(broker.clone()), config)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dash.serve_on(listener, async {
        let _ = stopped.await;
    }));
    println!("console: http://{bound}/ (chronos dash; `--console off` for none)");
    Ok(stop)
}

/// The handlers of the demo's task kinds.
fn demo_mux(reconciled: Arc<AtomicU64>) -> anyhow::Result<Mux> {
    let mut mux = Mux::new();
    // Emails: quick, and one in twenty fails once (a flaky SMTP relay) and is retried.
    mux.handle(|ctx: Context, t: Task<SendEmail>| async move {
        tokio::time::sleep(Duration::from_millis(2 + t.args.n % 8)).await;
        if t.args.n % 20 == 5 && ctx.attempt() == 1 {
            return Err(TaskError::retry(format!("relay refused {}", t.args.to)));
        }
        Ok(())
    })?;
    // Reports: slow; one in fifty has bad input and is dead-lettered at once.
    mux.handle(|_ctx: Context, t: Task<BuildReport>| async move {
        if t.args.n % 50 == 0 {
            return Err(TaskError::skip_retry("report template missing"));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(())
    })?;
    // Payments: one in a hundred panics on its first attempt; the panic is caught and retried.
    mux.handle(|ctx: Context, t: Task<ChargeCard>| async move {
        if t.args.n % 100 == 1 && ctx.attempt() == 1 {
            panic!("{DELIBERATE_PANIC} for charge {}", t.args.cents);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    })?;
    mux.handle(|_ctx: Context, _t: Task<SyncCrm>| async move {
        tokio::time::sleep(Duration::from_millis(3)).await;
        Ok(())
    })?;
    // Import files return the rows they read; one file in ten of a batch is corrupt.
    mux.handle(|_ctx: Context, t: Task<ImportFile>| async move {
        if t.args.file % 10 == 7 {
            return Err(TaskError::skip_retry("corrupt file"));
        }
        Ok(100 * (t.args.file + 1))
    })?;
    mux.handle(|ctx: Context, t: Task<ImportDone>| async move {
        if let Some(g) = ctx.group() {
            println!(
                "import batch {}: {} files read, {} failed (group callback, run once)",
                t.args.batch, g.succeeded, g.failed
            );
        }
        Ok(())
    })?;
    mux.handle(|_ctx: Context, _t: Task<Digest>| async move { Ok(()) })?;
    // Fired every second by the scheduler.
    mux.handle(move |_ctx: Context, _t: Task<Reconcile>| {
        let r = reconciled.clone();
        async move {
            r.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    })?;
    Ok(mux)
}

/// The demo's stop signal: a flag that stays set, so every loop sees it however busy it was
/// when it was set (a `Notify` wakes only the tasks waiting at that moment: a producer in the
/// middle of its enqueues missed it, and the demo never ended).
#[derive(Clone)]
struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    /// Completes once the stop was asked for (at once if it already was).
    async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Fires after `seconds`, or on Ctrl-C or SIGTERM (what a container runtime sends to stop).
fn tokio_stop(seconds: Option<u64>) -> Stop {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let timer = async {
            match seconds {
                Some(n) => tokio::time::sleep(Duration::from_secs(n)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = timer => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm() => {}
        }
        let _ = tx.send(true);
        // Keep the sender: a closed channel would end the waits with an error, not a stop.
        std::future::pending::<()>().await;
    });
    Stop(rx)
}

#[cfg(unix)]
async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        // Without the handler SIGTERM keeps its default (exit at once); Ctrl-C still works.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn sigterm() {
    std::future::pending().await
}

async fn produce(
    client: Client,
    rate: u64,
    enqueued: Arc<AtomicU64>,
    stop: Stop,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let per_tick = (rate / 10).max(1);
    let mut n = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait() => return Ok(()),
        }
        for _ in 0..per_tick {
            n += 1;
            match n % 10 {
                0 => client
                    .enqueue(&BuildReport { n }, EnqueueOptions::new())
                    .await
                    .map(|_| ())?,
                1..=3 => client
                    .enqueue(&ChargeCard { n, cents: n * 7 }, EnqueueOptions::new())
                    .await
                    .map(|_| ())?,
                4 => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        EnqueueOptions::new().process_in(Duration::from_secs(2)),
                    )
                    .await
                    .map(|_| ())?,
                _ => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        EnqueueOptions::new(),
                    )
                    .await
                    .map(|_| ())?,
            }
            enqueued.fetch_add(1, Ordering::Relaxed);
        }
        // Every 5 s: a partner sync per customer of ten, and an import batch of 20 files as a
        // group whose callback runs once they all finished.
        if n % (per_tick * 50) < per_tick {
            let batch = n / (per_tick * 50);
            for customer in 0..10 {
                client
                    .enqueue(
                        &SyncCrm { customer },
                        EnqueueOptions::new().rate_key(format!("customer-{customer}")),
                    )
                    .await?;
            }
            let group = Group::new(&ImportDone { batch }, EnqueueOptions::new())
                .members((0..20).map(|file| (ImportFile { batch, file }, EnqueueOptions::new())));
            client.enqueue_group(group).await?;
            enqueued.fetch_add(31, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> anyhow::Result<Option<Args>> {
        parse_args(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn help_is_an_answer_not_an_unknown_argument() {
        assert!(args(&["--help"]).expect("help").is_none());
        assert!(args(&["-h"]).expect("help").is_none());
        assert!(HELP.contains("Usage: chronos-demo") && HELP.contains("--role"));
        let err = args(&["--frobnicate"]).err().expect("unknown").to_string();
        assert!(err.contains("--help"), "{err}");
        let a = args(&["--role", "worker", "--rate", "300"])
            .expect("args")
            .expect("not help");
        assert_eq!((a.role, a.rate), (Role::Worker, 300));
    }

    #[test]
    fn only_the_first_panics_get_a_line_the_rest_are_counted() {
        let lines: Vec<String> = (1..=75).filter_map(|n| panic_line(n, "boom")).collect();
        assert_eq!(lines.len(), PANICS_SHOWN as usize + 1, "{lines:?}");
        assert!(lines[0].contains("#1") && lines[0].contains("boom"));
        assert!(lines
            .last()
            .is_some_and(|l| l.contains("counted in the progress line")));
        assert_eq!(
            panic_line(2, "evil\x1b[2J")
                .as_deref()
                .map(|l| l.contains('\x1b')),
            Some(false)
        );
    }

    #[test]
    fn the_first_line_never_shows_a_password() {
        let shown = redact("redis://app:hunter2@redis:6379/0?password=hunter2");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
