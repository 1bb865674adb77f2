//! `chronos`: inspect and operate chronos-rs queues, tasks, schedules and servers.
//!
//! Tables for people, JSON lines (`--json`) for scripts. Exit status: 0 on success, 1 on an
//! error (one line on stderr), 2 on a usage error.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use chronos_admin::{Admin, AdminError, TaskRow};
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
        /// Only tasks of this kind.
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
    Run(ActArgs),
    /// Delete (any state but active).
    Rm(ActArgs),
    /// Archive: pending, scheduled or retry -> archived.
    Archive(ActArgs),
    /// Cancel an active task (its handler's context is cancelled).
    Cancel(ActArgs),
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "all"])))]
struct ActArgs {
    queue: String,
    /// The task id.
    id: Option<String>,
    /// Every task of --state (matching --kind and --grep).
    #[arg(long, requires = "state")]
    all: bool,
    /// State of the tasks to act on, with --all.
    #[arg(long, value_parser = parse_state, requires = "all")]
    state: Option<TaskState>,
    /// With --all: only tasks of this kind.
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
    let line = parts.join(": ").replace(['\n', '\r'], " ");
    eprintln!("chronos: error: {line}");
    ExitCode::from(1)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let admin = chronos_admin::connect(&cli.redis, &cli.namespace)
        .await
        .with_context(|| format!("cannot connect to {}", redact(&cli.redis)))?;
    if let Cmd::Dash(args) = cli.cmd {
        return dash(admin, &cli.redis, args).await;
    }
    let out = Out { json: cli.json };
    let r = dispatch(&admin, &out, cli.cmd).await;
    admin.broker().close().await;
    r
}

async fn dash(admin: Admin<RedisBroker>, url: &str, a: DashArgs) -> anyhow::Result<()> {
    let config = chronos_dash::DashConfig::default()
        .addr(a.addr)
        .token(a.token)
        .read_only(a.read_only)
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
                println!("next page: --cursor '{next}'");
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
                    l.id,
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
                o.leader.map_or("none".to_string(), |l| l.id)
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
        let r = admin.act_all(&a.queue, state, &filter, action).await?;
        return out.done(
            &serde_json::json!({"action": verb, "queue": a.queue, "state": state.as_str(), "report": r}),
            &format!(
                "{verb}: {} of {} matching tasks ({} scanned, {} skipped)",
                r.done, r.matched, r.scanned, r.skipped
            ),
        );
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

    fn done(&self, json: &serde_json::Value, text: &str) -> anyhow::Result<()> {
        if self.json {
            self.line(json)
        } else {
            println!("{text}");
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
        println!("{k:<w$}  {v}");
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

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}:***@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, datetime, redact};

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("rediss://ops:s3cret@cache.example:6380/0"),
            "rediss://ops:***@cache.example:6380/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    #[test]
    fn times_and_clipping_render_plainly() {
        assert_eq!(datetime(0), "1970-01-01 00:00:00Z");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
