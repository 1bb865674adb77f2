//! `chronos`: inspect and operate chronos-rs queues, tasks, schedules and servers.
//!
//! Tables for people, JSON lines (`--json`) for scripts. Exit status: 0 on success, 1 on an
//! error (one line on stderr), 2 on a usage error.

use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chronos_admin::{
    printable, redact_url, Admin, AdminError, BulkJob, BulkStatus, CancelToken, TaskRow,
};
use chronos_broker::{HistorySpan, RedisBroker, TaskAction, TaskFilter, TaskState};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;

mod runtime;

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
    /// Queues: list, show, pause, resume, delete, history.
    #[command(subcommand)]
    Queue(QueueCmd),
    /// Tasks: list, show, and run now, delete, archive or cancel one task or all in a state.
    #[command(subcommand)]
    Task(TaskCmd),
    /// Registered schedules (also those that never fired).
    #[command(subcommand)]
    Schedule(ScheduleCmd),
    /// Live worker servers.
    #[command(subcommand)]
    Server(ServerCmd),
    /// The scheduler leader.
    Leader,
    /// Every queue's counts with totals, servers, leader and schedules.
    Stats,
    /// The web console, on 127.0.0.1:8080 by default (Ctrl-C or SIGTERM stops it).
    Dash(DashArgs),
}

#[derive(Args, Debug)]
struct DashArgs {
    /// Address to listen on; any but a loopback address requires a token.
    #[arg(long, env = "CHRONOS_DASH_ADDR", default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Login token (people log in once and get a cookie; scrapers send `Authorization: Bearer`).
    #[arg(long, env = "CHRONOS_DASH_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Hide every action and refuse its POST.
    #[arg(long, env = "CHRONOS_DASH_READ_ONLY")]
    read_only: bool,
    /// Seconds between an open page's polls (at least 1).
    #[arg(long, default_value_t = 1)]
    refresh: u64,
    /// Mark the session cookie Secure even when no proxy says the request came over https
    /// (it is Secure anyway when a proxy sends `X-Forwarded-Proto: https`).
    #[arg(long, env = "CHRONOS_DASH_SECURE_COOKIE")]
    secure_cookie: bool,
}

#[derive(Subcommand, Debug)]
enum QueueCmd {
    /// Every queue with its counts.
    Ls,
    /// One queue's counts and today's history.
    Show { queue: String },
    /// Workers stop fetching from the queue.
    Pause { queue: String },
    /// Workers fetch from the queue again.
    Resume { queue: String },
    /// Deletes the queue (refused while it holds tasks, unless --force).
    Rm {
        queue: String,
        /// Delete its tasks too, in every state.
        #[arg(long)]
        force: bool,
    },
    /// Processed and failed per day (last 90 days) or per minute (last 24 hours).
    History {
        queue: String,
        /// Bucket size.
        #[arg(long, value_enum, default_value_t = By::Day)]
        by: By,
        /// Show only the last N buckets (default: 14 days, or 60 minutes).
        #[arg(long)]
        last: Option<usize>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    Day,
    Minute,
}

#[derive(Subcommand, Debug)]
enum TaskCmd {
    /// Tasks of a queue in one state, a page at a time.
    Ls {
        queue: String,
        /// State to list.
        #[arg(long, value_parser = parse_state, default_value = "pending")]
        state: TaskState,
        /// Only tasks of exactly this kind (`email:send`; no prefix or pattern matching:
        /// `email` matches no task of kind `email:send`).
        #[arg(long)]
        kind: Option<String>,
        /// Only tasks whose payload (as JSON) contains this text.
        #[arg(long)]
        grep: Option<String>,
        /// Tasks per page.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Where to start (the `next` cursor a previous page printed).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One task with its payload.
    Show { queue: String, id: String },
    /// Run now: scheduled, retry or archived -> pending.
    // The queue comes first, then one id or --all: clap would print the required group first,
    // the reverse of what the command takes.
    #[command(
        override_usage = "chronos task run [OPTIONS] <QUEUE> <ID>\n       chronos task run [OPTIONS] <QUEUE> --all --state <STATE>"
    )]
    Run(ActArgs),
    /// Delete (any state but active).
    #[command(
        override_usage = "chronos task rm [OPTIONS] <QUEUE> <ID>\n       chronos task rm [OPTIONS] <QUEUE> --all --state <STATE>"
    )]
    Rm(ActArgs),
    /// Archive: pending, scheduled or retry -> archived.
    #[command(
        override_usage = "chronos task archive [OPTIONS] <QUEUE> <ID>\n       chronos task archive [OPTIONS] <QUEUE> --all --state <STATE>"
    )]
    Archive(ActArgs),
    /// Cancel an active task (its handler's context is cancelled).
    #[command(
        override_usage = "chronos task cancel [OPTIONS] <QUEUE> <ID>\n       chronos task cancel [OPTIONS] <QUEUE> --all --state active"
    )]
    Cancel(ActArgs),
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "all"])))]
struct ActArgs {
    queue: String,
    /// The task id.
    id: Option<String>,
    /// Every task of --state (matching --kind and --grep). Shows its progress on stderr;
    /// Ctrl-C stops it after the current step and reports what was done.
    #[arg(long, requires = "state")]
    all: bool,
    /// State of the tasks to act on, with --all.
    #[arg(long, value_parser = parse_state, requires = "all")]
    state: Option<TaskState>,
    /// With --all: only tasks of exactly this kind (`email:send`; no prefix or pattern
    /// matching: `email` matches no task of kind `email:send`).
    #[arg(long, requires = "all")]
    kind: Option<String>,
    /// With --all: only tasks whose payload (as JSON) contains this text.
    #[arg(long, requires = "all")]
    grep: Option<String>,
}

#[derive(Subcommand, Debug)]
enum ScheduleCmd {
    /// Every registered schedule: from code and stored at run time (SOURCE).
    #[command(alias = "list")]
    Ls,
    /// One schedule.
    Show { id: String },
    /// Stores a runtime schedule; every scheduler instance sees it within about a second.
    Add(runtime::DefArgs),
    /// Replaces a runtime schedule's definition (keeps it paused if it was).
    Update(runtime::DefArgs),
    /// Pauses a runtime schedule: it fires nothing until resumed.
    Pause { id: String },
    /// Resumes a paused runtime schedule, from now on (the pause is not caught up).
    Resume { id: String },
    /// Removes a runtime schedule and forgets its fire state.
    #[command(alias = "remove")]
    Rm { id: String },
    /// Enqueues one task of a runtime schedule now, once per --request id.
    Run {
        id: String,
        /// Request id: a repeated call with the same id (within a day) enqueues nothing more.
        #[arg(long)]
        request: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum ServerCmd {
    /// Every live worker server.
    Ls,
}

fn parse_state(s: &str) -> Result<TaskState, String> {
    chronos_admin::parse_state(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&anyhow::Error::from(e)),
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// A schedule's status column: paused, stale (no instance alive to fire it) or live.
fn status(s: &chronos_broker::ScheduleEntry) -> &'static str {
    if s.paused {
        "paused"
    } else if s.stale {
        "stale"
    } else {
        "live"
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
        return dash(admin, &cli.redis, args).await;
    }
    let out = Out { json: cli.json };
    let listing = matches!(cli.cmd, Cmd::Queue(QueueCmd::Ls) | Cmd::Stats);
    let r = dispatch(&admin, &out, cli.cmd).await;
    // An empty listing is the sign of a wrong or forgotten --namespace: say where queues are.
    if r.is_ok() && listing && admin.queues().await.is_ok_and(|q| q.is_empty()) {
        let ns = admin.broker().keyspace().namespace().to_string();
        let others = admin.other_namespaces().await;
        if others.is_empty() {
            eprintln!("chronos: namespace {ns:?} holds no queue");
        } else {
            eprintln!(
                "chronos: namespace {ns:?} holds no queue; namespaces with queues on this Redis: {} (pass --namespace NAME)",
                printable(&others.join(", "))
            );
        }
    }
    admin.broker().close().await;
    r
}

async fn dash(admin: Admin<RedisBroker>, url: &str, a: DashArgs) -> anyhow::Result<()> {
    let config = chronos_dash::DashConfig::default()
        .addr(a.addr)
        .token(a.token)
        .read_only(a.read_only)
        .secure_cookie(a.secure_cookie)
        .refresh(std::time::Duration::from_secs(a.refresh))
        .redis_label(url);
    let dash = chronos_dash::Dash::new(admin, config)?;
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .with_context(|| format!("cannot listen on {}", a.addr))?;
    eprintln!(
        "chronos dash: http://{}/{}",
        listener.local_addr()?,
        if a.read_only { " (read-only)" } else { "" }
    );
    dash.serve_on(listener, stop_signal()).await?;
    Ok(())
}

/// Ctrl-C, or SIGTERM (what a container runtime sends).
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn dispatch(admin: &Admin<RedisBroker>, out: &Out, cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Queue(QueueCmd::Ls) => out.queues(&admin.queues().await?),
        Cmd::Queue(QueueCmd::Show { queue }) => {
            let row = admin.queue(&queue).await?;
            let today = admin
                .history(&queue, HistorySpan::Days)
                .await?
                .last()
                .copied();
            if out.json {
                out.line(&serde_json::json!({ "queue": row, "today": today }))
            } else {
                out.queues(std::slice::from_ref(&row))?;
                if let Some(t) = today {
                    println!("today: processed {}, failed {}", t.processed, t.failed);
                }
                Ok(())
            }
        }
        Cmd::Queue(QueueCmd::Pause { queue }) => {
            admin.set_paused(&queue, true).await?;
            out.done(
                &serde_json::json!({"queue": queue, "paused": true}),
                &format!("queue {queue} paused"),
            )
        }
        Cmd::Queue(QueueCmd::Resume { queue }) => {
            admin.set_paused(&queue, false).await?;
            out.done(
                &serde_json::json!({"queue": queue, "paused": false}),
                &format!("queue {queue} resumed"),
            )
        }
        Cmd::Queue(QueueCmd::Rm { queue, force }) => {
            let n = admin.delete_queue(&queue, force).await?;
            out.done(
                &serde_json::json!({"queue": queue, "deleted": true, "tasks_deleted": n}),
                &format!("queue {queue} deleted ({n} tasks deleted)"),
            )
        }
        Cmd::Queue(QueueCmd::History { queue, by, last }) => {
            let (span, default) = match by {
                By::Day => (HistorySpan::Days, 14),
                By::Minute => (HistorySpan::Minutes, 60),
            };
            let rows = admin.history(&queue, span).await?;
            let n = last.unwrap_or(default).min(rows.len());
            let rows = rows.get(rows.len() - n..).unwrap_or_default();
            if out.json {
                return rows.iter().try_for_each(|r| out.line(r));
            }
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let at = if by == By::Day {
                        date(r.start_ms)
                    } else {
                        datetime(r.start_ms)
                    };
                    vec![at, r.processed.to_string(), r.failed.to_string()]
                })
                .collect();
            print_table(
                &[
                    if by == By::Day { "DAY" } else { "MINUTE" },
                    "PROCESSED",
                    "FAILED",
                ],
                &table,
            );
            Ok(())
        }
        Cmd::Task(TaskCmd::Ls {
            queue,
            state,
            kind,
            grep,
            limit,
            cursor,
        }) => {
            let filter = TaskFilter { kind, grep };
            let page = admin
                .tasks(&queue, state, &filter, cursor.as_deref(), limit)
                .await?;
            if out.json {
                page.tasks.iter().try_for_each(|t| out.line(t))?;
                if let Some(next) = &page.next {
                    out.line(&serde_json::json!({ "next": next }))?;
                }
                return Ok(());
            }
            let rows: Vec<Vec<String>> = page
                .tasks
                .iter()
                .map(|t| {
                    vec![
                        t.id.clone(),
                        t.kind.clone(),
                        t.state.clone(),
                        format!("{}/{}", t.retried, t.max_retry),
                        clip(&t.payload.to_string(), 60),
                        clip(t.last_error.as_deref().unwrap_or(""), 40),
                    ]
                })
                .collect();
            print_table(
                &["ID", "KIND", "STATE", "RETRIED", "PAYLOAD", "LAST ERROR"],
                &rows,
            );
            if let Some(next) = page.next {
                println!("next page: --cursor '{}'", printable(&next));
            }
            Ok(())
        }
        Cmd::Task(TaskCmd::Show { queue, id }) => {
            let t = admin.task(&queue, &id).await?;
            if out.json {
                out.line(&t)
            } else {
                show_task(&t);
                Ok(())
            }
        }
        Cmd::Task(TaskCmd::Run(a)) => act(admin, out, a, TaskAction::RunNow).await,
        Cmd::Task(TaskCmd::Rm(a)) => act(admin, out, a, TaskAction::Delete).await,
        Cmd::Task(TaskCmd::Archive(a)) => act(admin, out, a, TaskAction::Archive).await,
        Cmd::Task(TaskCmd::Cancel(a)) => act(admin, out, a, TaskAction::Cancel).await,
        Cmd::Schedule(ScheduleCmd::Ls) => {
            let all = admin.schedules().await?;
            if out.json {
                return all.iter().try_for_each(|s| out.line(s));
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        s.spec.clone(),
                        s.zone.clone(),
                        s.queue.clone(),
                        s.kind.clone(),
                        s.next_run_ms.map(datetime).unwrap_or_else(|| "-".into()),
                        s.last_fired_ms
                            .map(datetime)
                            .unwrap_or_else(|| "never".into()),
                        s.source.as_str().into(),
                        status(s).into(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "ID",
                    "SPEC",
                    "ZONE",
                    "QUEUE",
                    "KIND",
                    "NEXT RUN",
                    "LAST FIRED",
                    "SOURCE",
                    "STATUS",
                ],
                &rows,
            );
            Ok(())
        }
        Cmd::Schedule(ScheduleCmd::Show { id }) => {
            let s = admin
                .schedules()
                .await?
                .into_iter()
                .find(|s| s.id == id)
                .ok_or_else(|| AdminError::Invalid(format!("no schedule {id:?}")))?;
            if out.json {
                return out.line(&s);
            }
            let fields = [
                ("id", s.id.clone()),
                ("spec", s.spec.clone()),
                ("zone", s.zone.clone()),
                ("queue", s.queue.clone()),
                ("kind", s.kind.clone()),
                (
                    "next run",
                    s.next_run_ms.map(datetime).unwrap_or_else(|| "-".into()),
                ),
                (
                    "last fired",
                    s.last_fired_ms
                        .map(datetime)
                        .unwrap_or_else(|| "never".into()),
                ),
                (
                    "last task",
                    s.last_task_id.clone().unwrap_or_else(|| "-".into()),
                ),
                ("registered by", s.registered_by.clone()),
                ("last seen", datetime(s.last_seen_ms)),
                ("stale", s.stale.to_string()),
                ("source", s.source.as_str().to_string()),
                ("paused", s.paused.to_string()),
            ];
            print_fields(&fields);
            Ok(())
        }
        Cmd::Schedule(ScheduleCmd::Add(a)) => runtime::put(admin, out.json, &a, false).await,
        Cmd::Schedule(ScheduleCmd::Update(a)) => runtime::put(admin, out.json, &a, true).await,
        Cmd::Schedule(ScheduleCmd::Pause { id }) => {
            runtime::change(admin, out.json, &id, runtime::Op::Pause).await
        }
        Cmd::Schedule(ScheduleCmd::Resume { id }) => {
            runtime::change(admin, out.json, &id, runtime::Op::Resume).await
        }
        Cmd::Schedule(ScheduleCmd::Rm { id }) => {
            runtime::change(admin, out.json, &id, runtime::Op::Remove).await
        }
        Cmd::Schedule(ScheduleCmd::Run { id, request }) => {
            runtime::run_now(admin, out.json, &id, request.as_deref()).await
        }
        Cmd::Server(ServerCmd::Ls) => {
            let all = admin.servers().await?;
            if out.json {
                return all.iter().try_for_each(|s| out.line(s));
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|s| {
                    let queues: Vec<String> =
                        s.queues.iter().map(|(q, w)| format!("{q}:{w}")).collect();
                    vec![
                        s.id.clone(),
                        s.host.clone(),
                        s.pid.to_string(),
                        queues.join(","),
                        format!("{}/{}", s.running, s.concurrency),
                        datetime(s.started_at_ms),
                        datetime(s.last_seen_ms),
                    ]
                })
                .collect();
            print_table(
                &[
                    "ID",
                    "HOST",
                    "PID",
                    "QUEUES",
                    "BUSY",
                    "STARTED",
                    "LAST SEEN",
                ],
                &rows,
            );
            Ok(())
        }
        Cmd::Leader => {
            let l = admin.leader().await?;
            if out.json {
                return out.line(&serde_json::json!({ "leader": l }));
            }
            match l {
                Some(l) => println!(
                    "leader {} (epoch {}, since {})",
                    printable(&l.id),
                    l.epoch,
                    datetime(l.since_ms)
                ),
                None => println!("no leader"),
            }
            Ok(())
        }
        Cmd::Dash(_) => anyhow::bail!("the console is served by `run`"),
        Cmd::Stats => {
            let o = admin.overview().await?;
            if out.json {
                return out.line(&o);
            }
            out.queue_table(&o.queues, Some(&o.total))?;
            println!(
                "servers: {}   schedules: {}   leader: {}",
                o.servers,
                o.schedules,
                printable(&o.leader.map_or("none".to_string(), |l| l.id))
            );
            Ok(())
        }
    }
}

async fn act(
    admin: &Admin<RedisBroker>,
    out: &Out,
    a: ActArgs,
    action: TaskAction,
) -> anyhow::Result<()> {
    let verb = chronos_admin::verb(action);
    if a.all {
        let state = a
            .state
            .ok_or_else(|| AdminError::Invalid("--all needs --state".into()))?;
        let filter = TaskFilter {
            kind: a.kind,
            grep: a.grep,
        };
        // Without a filter the state's count says how much there is to do (one cheap call);
        // with one, counting would cost a pass of its own: the progress line shows what it
        // found so far instead.
        let expected = if filter.is_empty() {
            Some(
                admin
                    .count_matching(&a.queue, state, &filter, 0)
                    .await?
                    .matched,
            )
        } else {
            None
        };
        let job = BulkJob::new(a.queue.clone(), state, filter, action);
        let cancel = CancelToken::new();
        let on_signal = cancel.clone();
        let watcher = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
            }
        });
        let mut progress = Progress::new(verb, expected);
        let r = admin.run_bulk(&job, &cancel, |s| progress.show(s)).await;
        watcher.abort();
        progress.end();
        let r = r?;
        out.done(
            &serde_json::json!({"action": verb, "queue": a.queue, "state": state.as_str(), "report": r}),
            &format!(
                "{verb}: {} of {} matching tasks ({} read, {} left alone{})",
                r.done,
                r.matched,
                r.scanned,
                r.skipped,
                if r.failed > 0 { format!(", {} refused", r.failed) } else { String::new() }
            ),
        )?;
        if r.cancelled {
            anyhow::bail!(
                "cancelled: {} matching tasks found but not reached; the state may hold more",
                r.untouched()
            );
        }
        if let Some(e) = r.error {
            anyhow::bail!("stopped by an error after {} tasks: {e}", r.done);
        }
        return Ok(());
    }
    let id =
        a.id.ok_or_else(|| AdminError::Invalid("give a task id or --all".into()))?;
    let changed = admin.act(&a.queue, &id, action).await?;
    let text = match (action, changed) {
        (_, true) if action == TaskAction::Cancel => format!("task {id}: cancel requested"),
        (_, true) => format!("task {id}: {verb} done"),
        (TaskAction::Delete, false) => format!("task {id}: already gone"),
        (_, false) => format!("task {id}: nothing to do (already done)"),
    };
    out.done(
        &serde_json::json!({"action": verb, "queue": a.queue, "id": id, "changed": changed}),
        &text,
    )
}

struct Out {
    json: bool,
}

impl Out {
    fn line<T: Serialize + ?Sized>(&self, v: &T) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer(&mut stdout, v)?;
        writeln!(stdout)?;
        Ok(())
    }

    /// The JSON line, or the text line with its untrusted parts (ids, names) escaped.
    fn done(&self, json: &serde_json::Value, text: &str) -> anyhow::Result<()> {
        if self.json {
            self.line(json)
        } else {
            println!("{}", printable(text));
            Ok(())
        }
    }

    fn queues(&self, rows: &[chronos_admin::QueueRow]) -> anyhow::Result<()> {
        self.queue_table(rows, None)
    }

    /// The queue table, with a totals row (no state) when given.
    fn queue_table(
        &self,
        rows: &[chronos_admin::QueueRow],
        total: Option<&chronos_admin::QueueRow>,
    ) -> anyhow::Result<()> {
        if self.json {
            return rows.iter().try_for_each(|r| self.line(r));
        }
        print!("{}", chronos_admin::queue_table(rows, total));
        Ok(())
    }
}

fn show_task(t: &TaskRow) {
    let mut fields = vec![
        ("id", t.id.clone()),
        ("queue", t.queue.clone()),
        ("state", t.state.clone()),
        ("kind", t.kind.clone()),
        ("payload", t.payload.to_string()),
        ("retried", format!("{}/{}", t.retried, t.max_retry)),
        (
            "enqueued",
            t.enqueued_at_ms.map(datetime).unwrap_or_default(),
        ),
        ("last error", t.last_error.clone().unwrap_or_default()),
        (
            "last failed",
            t.last_failed_at_ms.map(datetime).unwrap_or_default(),
        ),
    ];
    for (k, v) in &t.headers {
        fields.push(("header", format!("{k}={v}")));
    }
    if let Some(e) = &t.decode_error {
        fields.push(("decode error", e.clone()));
    }
    print_fields(&fields);
}

fn print_fields(fields: &[(&str, String)]) {
    let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in fields {
        println!("{k:<w$}  {}", printable(v));
    }
}

/// Left-aligned columns, two spaces apart, headers first.
fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    print!("{}", chronos_admin::text_table(headers, rows));
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// `YYYY-MM-DD HH:MM:SSZ` (UTC).
fn datetime(ms: i64) -> String {
    match chronos_broker::time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(ms) * 1_000_000,
    ) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => ms.to_string(),
    }
}

/// `YYYY-MM-DD` (UTC).
fn date(ms: i64) -> String {
    datetime(ms).chars().take(10).collect()
}

/// The progress of a bulk action on stderr, so stdout keeps only the result (a JSON line with
/// `--json`). On a terminal one line rewritten in place (at most ten times a second); otherwise
/// a line at the first step and then at most every two seconds, for logs.
struct Progress {
    verb: &'static str,
    expected: Option<u64>,
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    fn new(verb: &'static str, expected: Option<u64>) -> Self {
        Self {
            verb,
            expected,
            tty: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    fn show(&mut self, s: &BulkStatus) {
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(2)
        };
        if !s.running() || self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let of = match self.expected {
            Some(n) => format!(" of about {n}"),
            None => String::new(),
        };
        let line = format!(
            "{}: {} done{of}, {} matching found, {} read",
            self.verb, s.done, s.matched, s.scanned
        );
        if self.tty {
            eprint!("\r\x1b[K{line} (Ctrl-C stops)");
        } else {
            eprintln!("chronos: {line}");
        }
        self.shown = true;
    }

    fn end(&self) {
        if self.tty && self.shown {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, datetime};

    #[test]
    fn times_and_clipping_render_plainly() {
        assert_eq!(datetime(0), "1970-01-01 00:00:00Z");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
