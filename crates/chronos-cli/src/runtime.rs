//! `chronos schedule add|update|pause|resume|remove|run`: runtime schedules, thin over
//! `chronos_scheduler::RuntimeSchedules` (which validates as `register_*` does).

use std::time::Duration;

use anyhow::Context as _;
use chronos_admin::{printable, Admin};
use chronos_broker::RedisBroker;
use chronos_scheduler::{
    Change, MisfirePolicy, NewSchedule, OverlapPolicy, RuntimeSpec, ScheduleOptions,
};
use clap::{Args, ValueEnum};

/// A schedule's definition on the command line.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("spec").required(true).args(["cron", "every"])))]
pub(crate) struct DefArgs {
    /// The schedule id (names its fire state and its tasks: `<id>:<trigger unix seconds>`).
    id: String,
    /// Task kind (the `KIND` of the task type its handler takes).
    #[arg(long)]
    kind: String,
    /// Task payload as JSON (stored as the MessagePack the task type decodes).
    #[arg(long, default_value = "{}")]
    payload: String,
    /// Queue of the tasks.
    #[arg(long, default_value = "default")]
    queue: String,
    /// Cron expression (5 fields, 6 with seconds first, or @daily-style).
    #[arg(long)]
    cron: Option<String>,
    /// IANA zone of --cron (default UTC).
    #[arg(long, requires = "cron")]
    zone: Option<String>,
    /// Interval, aligned to the unix epoch: 30s, 5m, 1h, 1500ms (at least 1s).
    #[arg(long, value_parser = crate::dates::parse_duration)]
    every: Option<Duration>,
    /// Retries of each task.
    #[arg(long)]
    max_retry: Option<u32>,
    /// Per-attempt timeout of each task (30s, 5m).
    #[arg(long, value_parser = crate::dates::parse_duration)]
    timeout: Option<Duration>,
    /// Each task holds the unique lock of its kind and payload this long; a trigger finding it
    /// held is skipped.
    #[arg(long, value_parser = crate::dates::parse_duration)]
    unique: Option<Duration>,
    /// Keep each completed task for inspection this long.
    #[arg(long, value_parser = crate::dates::parse_duration)]
    retention: Option<Duration>,
    /// Each task must run within this long of its trigger.
    #[arg(long, value_parser = crate::dates::parse_duration)]
    deadline_after: Option<Duration>,
    /// Drop instead of archive when retries are exhausted.
    #[arg(long)]
    discard: bool,
    /// A header on every task, `key=value` (repeatable).
    #[arg(long = "header", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Missed triggers after an outage: all (at most 10 of the last hour), latest, or skip.
    #[arg(long, value_enum, default_value_t = Misfire::All)]
    misfire: Misfire,
    /// Skip a trigger while the previous task of the schedule is unfinished.
    #[arg(long)]
    forbid_overlap: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Misfire {
    All,
    Latest,
    Skip,
}

impl DefArgs {
    fn schedule(&self) -> anyhow::Result<NewSchedule> {
        let payload: serde_json::Value =
            serde_json::from_str(&self.payload).context("--payload is not JSON")?;
        let spec = match (&self.cron, self.every) {
            (Some(expr), _) => RuntimeSpec::Cron {
                expr: expr.clone(),
                zone: self.zone.clone(),
            },
            (None, Some(every)) => RuntimeSpec::Every(every),
            (None, None) => anyhow::bail!("give --cron or --every"),
        };
        let mut opts = ScheduleOptions::new().queue(self.queue.clone());
        if let Some(n) = self.max_retry {
            opts = opts.max_retry(n);
        }
        if let Some(d) = self.timeout {
            opts = opts.timeout(d);
        }
        if let Some(d) = self.unique {
            opts = opts.unique(d);
        }
        if let Some(d) = self.retention {
            opts = opts.retention(d);
        }
        if let Some(d) = self.deadline_after {
            opts = opts.deadline_after(d);
        }
        if self.discard {
            opts = opts.discard_on_dead_letter();
        }
        for (k, v) in &self.headers {
            opts = opts.header(k.clone(), v.clone());
        }
        opts = opts.misfire(match self.misfire {
            Misfire::All => MisfirePolicy::default(),
            Misfire::Latest => MisfirePolicy::FireLatest,
            Misfire::Skip => MisfirePolicy::Skip,
        });
        if self.forbid_overlap {
            opts = opts.overlap(OverlapPolicy::Forbid);
        }
        Ok(NewSchedule::raw(
            self.id.clone(),
            &self.kind,
            &payload,
            spec,
            opts,
        )?)
    }
}

/// What a change command does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Pause,
    Resume,
    Remove,
}

/// `add` (update: false) or `update`; prints what happened.
pub(crate) async fn put(
    admin: &Admin<RedisBroker>,
    json: bool,
    args: &DefArgs,
    update: bool,
) -> anyhow::Result<()> {
    let s = args.schedule()?;
    let rt = admin.runtime_schedules();
    let change = if update {
        rt.update(s).await?
    } else {
        rt.add(s).await?
    };
    let verb = if update { "updated" } else { "added" };
    report(json, &args.id, verb, change)
}

/// `pause`, `resume` or `remove`.
pub(crate) async fn change(
    admin: &Admin<RedisBroker>,
    json: bool,
    id: &str,
    op: Op,
) -> anyhow::Result<()> {
    let rt = admin.runtime_schedules();
    let (change, verb) = match op {
        Op::Pause => (rt.pause(id).await?, "paused"),
        Op::Resume => (rt.resume(id).await?, "resumed"),
        Op::Remove => (rt.remove(id).await?, "removed"),
    };
    report(json, id, verb, change)
}

/// `run`: one task now, once per request id.
pub(crate) async fn run_now(
    admin: &Admin<RedisBroker>,
    json: bool,
    id: &str,
    request: Option<&str>,
) -> anyhow::Result<()> {
    let r = admin.runtime_schedules().run_now(id, request).await?;
    let outcome = format!("{:?}", r.outcome).to_lowercase();
    if json {
        println!(
            "{}",
            serde_json::json!({"schedule": id, "task": r.task_id, "outcome": outcome})
        );
    } else {
        println!(
            "schedule {}: task {} {outcome}",
            printable(id),
            printable(&r.task_id)
        );
    }
    Ok(())
}

fn report(json: bool, id: &str, verb: &str, change: Change) -> anyhow::Result<()> {
    let changed = change == Change::Done;
    if json {
        println!(
            "{}",
            serde_json::json!({"schedule": id, "action": verb, "changed": changed})
        );
    } else if changed {
        println!("schedule {} {verb}", printable(id));
    } else {
        println!("schedule {} already {verb}; nothing changed", printable(id));
    }
    Ok(())
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not key=value")),
    }
}
