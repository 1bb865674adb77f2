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
        default_value = "redis://127.0.0.1:6379"
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

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    for cause in e.chain() {
        let msg = cause.to_string();
        if !parts.last().is_some_and(|p| p.contains(&msg)) {
            parts.push(msg);
        }
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
