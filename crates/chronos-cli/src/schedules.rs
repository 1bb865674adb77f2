//! `chronos schedule ...`: every registered schedule, and the runtime schedules' changes (their
//! handlers are in `runtime`).

use chronos_admin::{Admin, AdminError};
use chronos_broker::RedisBroker;
use clap::Subcommand;

use crate::dates::datetime;
use crate::out::Out;
use crate::runtime;
use crate::table::{print_fields, print_table};

/// The `schedule` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum ScheduleCmd {
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

/// A schedule's spec without the ` (<zone>)` a cron entry's spec ends with: the zone has a
/// column (a field) of its own.
fn spec_text(s: &chronos_broker::ScheduleEntry) -> &str {
    s.spec
        .strip_suffix(&format!(" ({})", s.zone))
        .unwrap_or(&s.spec)
}

/// Runs one `schedule` subcommand.
pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: ScheduleCmd,
) -> anyhow::Result<()> {
    match cmd {
        ScheduleCmd::Ls => {
            let all = admin.schedules().await?;
            if out.json {
                return all.iter().try_for_each(|s| out.line(s));
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        spec_text(s).to_string(),
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
        ScheduleCmd::Show { id } => {
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
                ("spec", spec_text(&s).to_string()),
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
        ScheduleCmd::Add(a) => runtime::put(admin, out.json, &a, false).await,
        ScheduleCmd::Update(a) => runtime::put(admin, out.json, &a, true).await,
        ScheduleCmd::Pause { id } => {
            runtime::change(admin, out.json, &id, runtime::Op::Pause).await
        }
        ScheduleCmd::Resume { id } => {
            runtime::change(admin, out.json, &id, runtime::Op::Resume).await
        }
        ScheduleCmd::Rm { id } => runtime::change(admin, out.json, &id, runtime::Op::Remove).await,
        ScheduleCmd::Run { id, request } => {
            runtime::run_now(admin, out.json, &id, request.as_deref()).await
        }
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
