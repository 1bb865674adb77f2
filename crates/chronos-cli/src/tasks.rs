//! `chronos task ...`: listing and showing tasks, and acting on one task or all in a state.

use std::time::Duration;

use chronos_admin::{printable, Admin, AdminError, BulkJob, CancelToken, TaskEdit, TaskRow};
use chronos_broker::{
    json_payload, Client, Events, Priority, QueueName, RedisBroker, TaskAction, TaskFilter,
    TaskState, Timestamp,
};
use clap::{Args, Subcommand};

use crate::dates::datetime;
use crate::out::Out;
use crate::progress::Progress;
use crate::table::{clip, print_fields, print_table};

/// The `task` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum TaskCmd {
    /// Tasks of a queue in one state, a page at a time.
    Ls {
        queue: String,
        /// State to list.
        #[arg(long, value_parser = parse_state, default_value = "pending")]
        state: TaskState,
        /// Only tasks of exactly this kind (`email:send`), or, with a trailing `*`, of every
        /// kind that starts with it (`email:*`).
        #[arg(long)]
        kind: Option<String>,
        /// Only tasks whose payload (as JSON) contains this text.
        #[arg(long)]
        grep: Option<String>,
        /// Only tasks whose last error (a cancelled task's reason) contains this text.
        #[arg(long)]
        error: Option<String>,
        /// Tasks per page (1 to 5000).
        #[arg(long, default_value_t = 20,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5000))]
        limit: usize,
        /// Where to start (the `next` cursor a previous page printed).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One task with its payload.
    Show { queue: String, id: String },
    /// Follow one task until it ends: a line each time its state or its progress changes
    /// (read every --every; exits 0 once it completed, was cancelled or dead-lettered, or is
    /// no longer stored, and 1 when --timeout passed first). A plain task (id `<ms>-<seq>`)
    /// is not stored once it completed: watching one that already did answers "no longer
    /// stored" (exit 0). On a queue whose event stream is on, its state and then each of its
    /// events as it is written.
    Watch {
        queue: String,
        id: String,
        /// How often to read the task.
        #[arg(long, value_parser = crate::dates::parse_duration, default_value = "500ms")]
        every: Duration,
        /// Give up after this long (default: never).
        #[arg(long, value_parser = crate::dates::parse_duration)]
        timeout: Option<Duration>,
    },
    /// The log lines of a task's attempts (`Context::log`, captured `tracing` events), oldest
    /// attempt first; only attempts kept in its history (the newest 25) have them.
    Logs {
        queue: String,
        id: String,
        /// Only this attempt.
        #[arg(long)]
        attempt: Option<u32>,
    },
    /// Run now: scheduled, retry, archived or cancelled -> pending.
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
    /// Give a waiting, scheduled, retrying or archived task another priority level (0 runs
    /// first, 9 last, 5 is the default); a pending task moves to the end of its new level.
    Prioritize {
        queue: String,
        id: String,
        /// The level: 0 to 9, or highest, high, normal, low, lowest.
        #[arg(long, value_parser = parse_priority)]
        level: Priority,
    },
    /// Edit a waiting (pending, scheduled or retry) task: its payload, run time and/or level,
    /// in one atomic step. A task that already started, finished or died is refused. A pending
    /// task whose payload or level changes goes to the end of its level (a tenant task keeps
    /// its place); one given a later run time waits as scheduled.
    #[command(group(
        clap::ArgGroup::new("change")
            .required(true)
            .multiple(true)
            .args(["payload_json", "at", "run_in", "level"])
    ))]
    Edit {
        queue: String,
        id: String,
        /// The new payload as JSON (stored as MessagePack, as `task show` displays it); the
        /// kind stays.
        #[arg(long)]
        payload_json: Option<String>,
        /// Run at this time: RFC 3339, like 2026-12-24T08:00:00Z (a past time: now).
        #[arg(long, value_parser = parse_at, conflicts_with = "run_in")]
        at: Option<Timestamp>,
        /// Run this long from now: 30s, 5m, 2h, 1d (0: now).
        #[arg(long = "in", value_name = "DELAY", value_parser = parse_in)]
        run_in: Option<Duration>,
        /// The new level: 0 to 9, or highest, high, normal, low, lowest.
        #[arg(long, value_parser = parse_priority)]
        level: Option<Priority>,
    },
}

/// One task or, with --all, every task of a state: what an action applies to.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "all"])))]
pub(crate) struct ActArgs {
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
    /// With --all: only tasks of exactly this kind (`email:send`), or, with a trailing `*`, of
    /// every kind that starts with it (`email:*`).
    #[arg(long, requires = "all")]
    kind: Option<String>,
    /// With --all: only tasks whose payload (as JSON) contains this text.
    #[arg(long, requires = "all")]
    grep: Option<String>,
    /// With --all: only tasks whose last error (a cancelled task's reason) contains this text.
    #[arg(long, requires = "all")]
    error: Option<String>,
}

/// Runs one `task` subcommand.
pub(crate) async fn run(admin: &Admin<RedisBroker>, out: &Out, cmd: TaskCmd) -> anyhow::Result<()> {
    match cmd {
        TaskCmd::Ls {
            queue,
            state,
            kind,
            grep,
            error,
            limit,
            cursor,
        } => {
            let filter = TaskFilter { kind, grep, error };
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
        TaskCmd::Show { queue, id } => {
            let t = admin.task(&queue, &id).await?;
            if out.json {
                out.line(&t)
            } else {
                show_task(&t);
                Ok(())
            }
        }
        TaskCmd::Watch {
            queue,
            id,
            every,
            timeout,
        } => watch(admin, out, &queue, &id, every, timeout).await,
        TaskCmd::Logs { queue, id, attempt } => {
            let t = admin.task(&queue, &id).await?;
            let rows: Vec<_> = t
                .attempts
                .iter()
                .filter(|a| attempt.is_none_or(|n| a.attempt == n))
                .collect();
            if out.json {
                for a in &rows {
                    out.line(&serde_json::json!({
                        "attempt": a.attempt,
                        "outcome": a.outcome,
                        "ended_at_ms": a.ended_at_ms,
                        "logs": a.logs,
                    }))?;
                }
                return Ok(());
            }
            if rows.is_empty() {
                println!(
                    "task {}: no attempt kept{}",
                    printable(&id),
                    match attempt {
                        Some(n) => format!(" numbered {n}"),
                        None => String::new(),
                    }
                );
            }
            for a in rows {
                println!(
                    "== attempt {} {} at {}",
                    a.attempt,
                    a.outcome.as_str(),
                    datetime(a.ended_at_ms)
                );
                match &a.logs {
                    // One line each: only the breaks between them pass unescaped.
                    Some(l) => println!(
                        "{}",
                        chronos_admin::printable_lines(l.trim_end_matches(['\n', '\r']))
                    ),
                    None => println!("(no lines)"),
                }
            }
            Ok(())
        }
        TaskCmd::Run(a) => act(admin, out, a, TaskAction::RunNow).await,
        TaskCmd::Rm(a) => act(admin, out, a, TaskAction::Delete).await,
        TaskCmd::Archive(a) => act(admin, out, a, TaskAction::Archive).await,
        TaskCmd::Cancel(a) => act(admin, out, a, TaskAction::Cancel).await,
        TaskCmd::Prioritize { queue, id, level } => {
            let changed = admin.prioritize(&queue, &id, level).await?;
            let text = if changed {
                format!("task {id} now has priority level {level}")
            } else {
                format!("task {id} already had priority level {level}")
            };
            out.done(
                &serde_json::json!({"queue": queue, "id": id, "level": level.get(), "changed": changed}),
                &text,
            )
        }
        TaskCmd::Edit {
            queue,
            id,
            payload_json,
            at,
            run_in,
            level,
        } => {
            let mut edit = TaskEdit::new();
            if let Some(json) = &payload_json {
                edit = edit.payload(json_payload(json)?);
            }
            if let Some(at) = at {
                edit = edit.run_at(at);
            }
            if let Some(d) = run_in {
                edit = edit.run_in(d);
            }
            if let Some(l) = level {
                edit = edit.priority(l);
            }
            let changed = admin.edit(&queue, &id, &edit).await?;
            let t = admin.task(&queue, &id).await?;
            let text = if changed {
                format!("task {id} edited: now {}", t.state)
            } else {
                format!("task {id} already was as asked: {}", t.state)
            };
            out.done(
                &serde_json::json!({"queue": queue, "id": id, "changed": changed, "task": t}),
                &text,
            )
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
            error: a.error,
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
        let cap = archive_note(admin, &a.queue, action).await;
        let mut text = format!(
            "{verb}: {} of {} matching tasks ({} read, {} left alone: gone or moved meanwhile",
            r.done, r.matched, r.scanned, r.skipped
        );
        if r.running > 0 {
            text.push_str(&format!(
                ", {} running: a worker holds them, left to it",
                r.running
            ));
        }
        if r.failed > 0 {
            text.push_str(&format!(", {} refused: corrupt records", r.failed));
        }
        text.push(')');
        if let Some((_, note)) = &cap {
            text.push('\n');
            text.push_str(note);
        }
        out.done(
            &serde_json::json!({
                "action": verb, "queue": a.queue, "state": state.as_str(), "report": r,
                "archive": cap.as_ref().map(|(c, _)| c),
                "archive_cap_deletes": cap.as_ref().map_or(0, |(c, _)| c.deleted_after(0)),
            }),
            &text,
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
        if r.failed > 0 {
            anyhow::bail!(
                "{} matching tasks were not reached: their records are corrupt (chronos task show Q ID)",
                r.failed
            );
        }
        return Ok(());
    }
    let id =
        a.id.ok_or_else(|| AdminError::Invalid("give a task id or --all".into()))?;
    let changed = admin.act(&a.queue, &id, action).await?;
    let mut text = match (action, changed) {
        (_, true) if action == TaskAction::Cancel => format!("task {id}: cancel requested"),
        (_, true) => format!("task {id}: {verb} done"),
        (TaskAction::Delete, false) => format!("task {id}: already gone"),
        (_, false) => format!("task {id}: nothing to do (already done)"),
    };
    if let (true, Some((_, note))) = (changed, archive_note(admin, &a.queue, action).await) {
        text.push('\n');
        text.push_str(&note);
    }
    out.done(
        &serde_json::json!({"action": verb, "queue": a.queue, "id": id, "changed": changed}),
        &text,
    )
}
/// After an archive: the queue's archive and, when it is over its cap, the sentence that says
/// what the janitor will delete (the oldest archived tasks, dead letters among them). None for
/// other actions, or when the cap cannot be read (the action itself went through).
async fn archive_note(
    admin: &Admin<RedisBroker>,
    queue: &str,
    action: TaskAction,
) -> Option<(chronos_admin::ArchiveCap, String)> {
    if action != TaskAction::Archive {
        return None;
    }
    let cap = admin.archive_cap(queue).await.ok()?;
    let over = cap.deleted_after(0);
    let note = if over > 0 {
        format!(
            "warning: the archive of {queue} holds {} tasks, over its cap of {} ({}): the janitor \
             deletes the oldest {over} within a minute, dead letters among them. Run or delete what \
             must stay, or raise archive_max.",
            cap.archived,
            cap.max,
            cap.source()
        )
    } else {
        format!(
            "the archive of {queue} holds {} of at most {} tasks ({}); past that the oldest are deleted",
            cap.archived,
            cap.max,
            cap.source()
        )
    };
    Some((cap, note))
}

/// The lines of `chronos task watch`: one per change of state or progress.
async fn watch(
    admin: &Admin<RedisBroker>,
    out: &Out,
    queue: &str,
    id: &str,
    every: Duration,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let q = QueueName::new(queue)?;
    if admin.broker().events_on(&q).await? {
        return watch_events(admin, out, queue, id, timeout).await;
    }
    let started = std::time::Instant::now();
    let mut last: Option<(String, Option<i64>)> = None;
    loop {
        let t = match admin.task(queue, id).await {
            Ok(t) => Some(t),
            // Seen before and gone now: it completed without a retention, or was deleted.
            Err(AdminError::TaskNotFound { .. }) if last.is_some() || issued_plain_id(id) => None,
            Err(e) => return Err(e.into()),
        };
        let Some(t) = t else {
            return gone(out, queue, id);
        };
        let now = (t.state.clone(), t.progress.as_ref().map(|p| p.at_ms));
        if last.as_ref() != Some(&now) {
            print_state(out, queue, &t)?;
            last = Some(now);
        }
        if ended(&t) {
            return Ok(());
        }
        if timeout.is_some_and(|d| started.elapsed() >= d) {
            anyhow::bail!(
                "task {id} did not end within {:?}",
                timeout.unwrap_or_default()
            );
        }
        tokio::time::sleep(every).await;
    }
}

/// `task watch` on a queue whose event stream is on: the task's state now, then each of its
/// events as it is written, until its final one. The events are followed from before the
/// state is read, so nothing falls in between.
async fn watch_events(
    admin: &Admin<RedisBroker>,
    out: &Out,
    queue: &str,
    id: &str,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let mut events = Client::new(admin.broker().clone()).watch(queue, id).await?;
    let t = match admin.task(queue, id).await {
        Ok(t) => t,
        Err(AdminError::TaskNotFound { .. }) if issued_plain_id(id) => return gone(out, queue, id),
        Err(e) => return Err(e.into()),
    };
    print_state(out, queue, &t)?;
    if ended(&t) {
        return Ok(());
    }
    let follow = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(e) if out.json => out.line(&e)?,
                Ok(e) => println!("{}", crate::events::line(&e)),
                Err(e) => eprintln!("chronos: reading events: {e} (reading on)"),
            }
        }
        anyhow::Ok(())
    };
    match timeout {
        Some(d) => tokio::time::timeout(d, follow)
            .await
            .map_err(|_| anyhow::anyhow!("task {id} did not end within {d:?}"))?,
        None => follow.await,
    }
}

/// A plain task (id `<ms>-<seq>`, a stream entry's) is stored only while it waits or runs: it
/// has no record to keep once it completed. So an id of that shape that Redis' clock has
/// already passed, and that is not stored, names a task that ended (or was deleted), not a
/// typo that `watch` should fail on. (A minute's slack for a CLI clock behind Redis'.)
fn issued_plain_id(id: &str) -> bool {
    chronos_broker::names::is_plain_id(id)
        && id
            .split('-')
            .next()
            .and_then(|ms| ms.parse::<i64>().ok())
            .is_some_and(|ms| ms <= chronos_broker::now_ms() + 60_000)
}

/// `task watch`'s last line for a task no longer stored (exit status 0, as its help says).
fn gone(out: &Out, queue: &str, id: &str) -> anyhow::Result<()> {
    out.done(
        &serde_json::json!({"queue": queue, "id": id, "state": "gone"}),
        &format!("task {id}: no longer stored (completed without a retention, or deleted)"),
    )
}

/// One `task watch` line: the task's state and progress (a JSON line with `--json`).
fn print_state(out: &Out, queue: &str, t: &TaskRow) -> anyhow::Result<()> {
    if out.json {
        out.line(&serde_json::json!({
            "queue": queue,
            "id": t.id,
            "state": t.state,
            "progress": t.progress,
            "progress_percent": t.progress_percent,
        }))
    } else {
        println!("{}", printable(&watch_line(t)));
        Ok(())
    }
}

/// The task is in a state it does not leave by itself.
fn ended(t: &TaskRow) -> bool {
    matches!(t.state.as_str(), "completed" | "archived" | "cancelled")
}

fn watch_line(t: &TaskRow) -> String {
    let mut line = format!("{} {}", datetime(chronos_broker::now_ms()), t.state);
    if let Some(p) = &t.progress {
        match (p.percent(), p.note()) {
            (Some(pc), Some(note)) => line.push_str(&format!(" {pc:.0}% {note}")),
            (Some(pc), None) => line.push_str(&format!(" {pc:.0}%")),
            _ => line.push_str(&format!(" {}", p.value)),
        }
    }
    if let Some(r) = &t.cancel_reason {
        line.push_str(&format!(" ({r})"));
    } else if t.state == "archived" {
        if let Some(e) = &t.last_error {
            line.push_str(&format!(" ({e})"));
        }
    }
    line
}

fn show_task(t: &TaskRow) {
    let mut fields = vec![
        ("id", t.id.clone()),
        ("queue", t.queue.clone()),
        ("state", t.state.clone()),
        ("priority", t.priority.to_string()),
        ("kind", t.kind.clone()),
        ("payload", t.payload.to_string()),
        ("retried", format!("{}/{}", t.retried, t.max_retry)),
        ("snoozed", t.snoozes.to_string()),
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
    if let Some(p) = &t.progress {
        let shown = match (p.percent(), p.note()) {
            (Some(pc), Some(note)) => format!("{pc:.0}% {note}"),
            (Some(pc), None) => format!("{pc:.0}%"),
            _ => p.value.to_string(),
        };
        fields.push(("progress", shown));
        fields.push(("progress at", datetime(p.at_ms)));
    }
    if let Some(r) = &t.cancel_reason {
        fields.push(("cancel reason", r.clone()));
        fields.push((
            "cancelled",
            t.cancelled_at_ms.map(datetime).unwrap_or_default(),
        ));
    }
    if let Some(e) = &t.decode_error {
        fields.push(("decode error", e.clone()));
    }
    print_fields(&fields);
    if !t.attempts.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = t
            .attempts
            .iter()
            .map(|a| {
                vec![
                    a.attempt.to_string(),
                    a.outcome.as_str().to_string(),
                    a.started_at_ms.map(datetime).unwrap_or_default(),
                    datetime(a.ended_at_ms),
                    a.ran_ms.map(|ms| format!("{ms} ms")).unwrap_or_default(),
                    a.worker.clone().unwrap_or_default(),
                    clip(a.error.as_deref().unwrap_or(""), 60),
                ]
            })
            .collect();
        print_table(
            &[
                "ATTEMPT", "OUTCOME", "STARTED", "ENDED", "RAN", "WORKER", "ERROR",
            ],
            &rows,
        );
    }
}

fn parse_priority(s: &str) -> Result<Priority, String> {
    s.parse::<Priority>().map_err(|e| e.to_string())
}

fn parse_at(s: &str) -> Result<Timestamp, String> {
    chronos_admin::parse_run_at(s).map_err(|e| e.to_string())
}

fn parse_in(s: &str) -> Result<Duration, String> {
    chronos_admin::parse_run_in(s).map_err(|e| e.to_string())
}

fn parse_state(s: &str) -> Result<TaskState, String> {
    chronos_admin::parse_state(s).map_err(|e| e.to_string())
}
