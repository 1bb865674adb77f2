//! `chronos`: inspect and operate chronos-rs queues, tasks, schedules and servers.
//!
//! Tables for people, JSON lines (`--json`) for scripts. Exit status: 0 on success, 1 on an
//! error (one line on stderr), 2 on a usage error.

use std::process::ExitCode;

use anyhow::Context as _;
use chronos_admin::{printable, redact_url, Admin, AdminError};
use chronos_broker::RedisBroker;
use clap::{Parser, Subcommand};

use crate::out::Out;

mod dash;
mod dates;
mod dedup;
mod events;
mod ingest;
mod limits;
mod logging;
mod out;
mod progress;
mod queues;
mod runtime;
mod schedules;
mod schema;
mod servers;
mod stats;
mod table;
mod tasks;
mod tenants;

#[derive(Parser, Debug)]
#[command(
    name = "chronos",
    version,
    about = "Inspect and operate chronos-rs task queues"
)]
struct Cli {
    /// Redis URL: redis://, rediss:// (TLS), redis-cluster://, redis-sentinel://; user and
    /// password in the URL.
    #[arg(
        long,
        global = true,
        env = "CHRONOS_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        value_parser = redis_url
    )]
    redis: String,
    /// Key namespace of the application.
    #[arg(
        long,
        global = true,
        env = "CHRONOS_NAMESPACE",
        default_value = "chronos"
    )]
    namespace: String,
    /// JSON lines instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Queues: list, show, pause, resume, delete, history, stored limits.
    #[command(subcommand)]
    Queue(queues::QueueCmd),
    /// Tasks: list, show, watch, and run now, delete, archive or cancel one task or all in a
    /// state.
    #[command(subcommand)]
    Task(tasks::TaskCmd),
    /// Tenants sharing a queue: list them with their counts, change their settings, pause and
    /// resume them.
    #[command(subcommand)]
    Tenant(tenants::TenantCmd),
    /// Deduplication locks held in a queue: list them with their holders, release one.
    #[command(subcommand)]
    Dedup(dedup::DedupCmd),
    /// A queue's event stream: turn it on or off, and follow it (`events tail`).
    #[command(subcommand)]
    Events(events::EventsCmd),
    /// Registered schedules (also those that never fired).
    #[command(subcommand)]
    Schedule(schedules::ScheduleCmd),
    /// Live worker servers.
    #[command(subcommand)]
    Server(servers::ServerCmd),
    /// JSON Schemas of task kinds published by workers: list them, export them to files.
    #[command(subcommand)]
    Schema(schema::SchemaCmd),
    /// The scheduler leader.
    Leader,
    /// Every queue's counts with totals, servers, leader and schedules.
    Stats,
    /// The web console, on 127.0.0.1:8080 by default (Ctrl-C or SIGTERM stops it).
    Dash(dash::DashArgs),
    /// The HTTP ingest: other services enqueue tasks with a JSON POST, on 127.0.0.1:8090 by
    /// default (Ctrl-C or SIGTERM stops it; the API is at /openapi.json).
    Ingest(ingest::IngestArgs),
}

/// A Redis URL's scheme is checked before connecting: the client takes any scheme as plain
/// Redis, so `http://host` would be tried as Redis and fail with a confusing protocol error.
fn redis_url(url: &str) -> Result<String, String> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let known = scheme.as_deref().is_some_and(|s| {
        let base = s
            .strip_suffix("-cluster")
            .or_else(|| s.strip_suffix("-sentinel"))
            .or_else(|| s.strip_suffix("+unix"))
            .unwrap_or(s);
        matches!(base, "redis" | "rediss" | "valkey" | "valkeys")
    });
    if known {
        Ok(url.to_string())
    } else {
        Err(format!(
            "{:?} is not a Redis URL: use redis://, rediss:// (TLS), redis-cluster:// or \
             redis-sentinel://",
            redact_url(url)
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The serving commands log (their actions and logins are an audit trail); the others
    // print their answers and keep stderr for their one error line.
    match &cli.cmd {
        Cmd::Dash(a) => logging::install(a.log_format),
        Cmd::Ingest(a) => logging::install(a.log_format),
        _ => {}
    }
    // The ingest serves many producers at once: it gets every core, the rest one thread.
    let mut rt = if matches!(cli.cmd, Cmd::Ingest(_)) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&anyhow::Error::from(e)),
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints the error as one line on stderr; exit status 1.
fn fail(e: &anyhow::Error) -> ExitCode {
    // The chain, each cause once (a wrapped error often repeats its source's message).
    let mut parts: Vec<String> = Vec::new();
    let io = io_failure(e);
    for cause in e.chain() {
        let msg = cause.to_string();
        if let Some((driver, _)) = &io {
            // The layers that carry the driver's text say nothing else worth a word.
            if msg.contains(driver.as_str()) {
                continue;
            }
        }
        if !parts.last().is_some_and(|p| p.contains(&msg)) {
            parts.push(msg);
        }
    }
    if let Some((_, plain)) = io {
        parts.push(plain);
    }
    let mut line = parts.join(": ");
    if let Some(AdminError::QueueNotFound(q)) = e.downcast_ref::<AdminError>() {
        if !q.other_namespaces.is_empty() {
            line.push_str(" (pass --namespace NAME or set CHRONOS_NAMESPACE)");
        }
    }
    eprintln!("chronos: error: {}", printable(&line));
    ExitCode::from(1)
}

/// A Redis connection that failed at the socket: the driver's text (which holds Rust's debug
/// form of the I/O error, `Os { code: 111, kind: ConnectionRefused, message: ... }`) and what
/// an operator reads instead (`connection refused`). The address is in the context above it.
fn io_failure(e: &anyhow::Error) -> Option<(String, String)> {
    use chronos_broker::fred::error::{Error as RedisError, ErrorKind};
    let Some(AdminError::Broker(chronos_broker::BrokerError::Store(s))) =
        e.chain().find_map(|c| c.downcast_ref::<AdminError>())
    else {
        return None;
    };
    let driver = s.downcast_ref::<RedisError>()?;
    if *driver.kind() != ErrorKind::IO {
        return None;
    }
    let d = driver.details();
    let after = |tag: &str| d.split(tag).nth(1);
    let plain = after("message: \"")
        .or_else(|| after("error: \""))
        .and_then(|r| r.split('"').next())
        .map(str::to_lowercase)
        .or_else(|| {
            // `kind: TimedOut` without a message: the kind's words.
            after("kind: ")
                .and_then(|r| r.split([',', ' ', '}']).next())
                .map(|k| {
                    k.chars().fold(String::new(), |mut out, c| {
                        if c.is_uppercase() && !out.is_empty() {
                            out.push(' ');
                        }
                        out.extend(c.to_lowercase());
                        out
                    })
                })
        })
        .unwrap_or_else(|| d.to_string());
    Some((driver.to_string(), plain))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let admin = chronos_admin::connect(&cli.redis, &cli.namespace)
        .await
        .with_context(|| format!("cannot connect to {}", redact_url(&cli.redis)))?;
    if let Cmd::Dash(args) = cli.cmd {
        return dash::run(admin, &cli.redis, args).await;
    }
    if let Cmd::Ingest(args) = cli.cmd {
        return ingest::run(admin.broker().clone(), args).await;
    }
    let out = Out { json: cli.json };
    let listing = matches!(cli.cmd, Cmd::Queue(queues::QueueCmd::Ls) | Cmd::Stats);
    let r = dispatch(&admin, &out, cli.cmd).await;
    // An empty listing is the sign of a wrong or forgotten --namespace: say where queues are.
    if r.is_ok() && listing {
        queues::hint_if_empty(&admin).await;
    }
    admin.broker().close().await;
    r
}

async fn dispatch(admin: &Admin<RedisBroker>, out: &Out, cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Queue(cmd) => queues::run(admin, out, cmd).await,
        Cmd::Task(cmd) => tasks::run(admin, out, cmd).await,
        Cmd::Tenant(cmd) => tenants::run(admin, out, cmd).await,
        Cmd::Dedup(cmd) => dedup::run(admin, out, cmd).await,
        Cmd::Events(cmd) => events::run(admin, out, cmd).await,
        Cmd::Schedule(cmd) => schedules::run(admin, out, cmd).await,
        Cmd::Server(cmd) => servers::run(admin, out, cmd).await,
        Cmd::Schema(cmd) => schema::run(admin, out, cmd).await,
        Cmd::Leader => servers::leader(admin, out).await,
        Cmd::Stats => stats::run(admin, out).await,
        Cmd::Dash(_) => anyhow::bail!("the console is served by `run`"),
        Cmd::Ingest(_) => anyhow::bail!("the ingest is served by `run`"),
    }
}
