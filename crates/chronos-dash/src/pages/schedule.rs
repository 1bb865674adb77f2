//! One schedule: its definition and state, whether it is overdue, its last fires with what
//! became of their tasks, and (for a runtime schedule) pause, resume, run now and an edit form.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use axum::Extension;
use chronos_admin::{AdminError, FireRow};
use chronos_broker::{format_duration, parse_duration, DefSpec, ScheduleDef, ScheduleEntry};
use chronos_scheduler::{ScheduleEdit, Spec};
use maud::{html, Markup};
use serde::Deserialize;

use super::{csrf, layout, Nav};
use crate::error::{DashError, PageError};
use crate::format;
use crate::href::{queue_href, schedule_href, task_href};
use crate::notice::back_with;
use crate::security::{Actor, CheckedForm};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    msg: Option<String>,
    sig: Option<String>,
}

/// The listed entry of schedule `id`, or a 404.
async fn entry(st: &AppState, id: &str) -> Result<ScheduleEntry, PageError> {
    st.admin
        .schedules()
        .await?
        .into_iter()
        .find(|e| e.id == id)
        .ok_or_else(|| {
            PageError(DashError::Admin(AdminError::Schedule(
                chronos_scheduler::SchedulerError::UnknownSchedule(id.to_string()),
            )))
        })
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let e = entry(&st, &id).await?;
    let now = format::now_ms();
    let (overdue, fires, def) = tokio::try_join!(
        st.admin.overdue_schedules(std::slice::from_ref(&e), now),
        st.admin.schedule_fires(&e.queue, &e.id),
        async {
            match e.source {
                chronos_broker::ScheduleSource::Runtime => {
                    Ok(st.admin.runtime_schedules().get(&e.id).await?)
                }
                _ => Ok::<_, AdminError>(None),
            }
        },
    )?;
    let overdue = overdue.get(&e.id).copied();
    let here = schedule_href(&e.id);
    let body = html! {
        p.crumbs { a href="/schedules" { "schedules" } " / " (e.id) }
        h1 { "Schedule " span.mono #schedule-id { (e.id) } " " (super::schedules::status(&e, overdue.is_some())) }
        @if let Some(due) = overdue {
            p.warn #overdue {
                "Overdue: the trigger of " (format::time(due)) " (" (format::relative(due, now)) ") has not fired. "
                "A schedule fires only while a scheduler leads: check the leader on the schedules page and the schedulers' logs."
            }
        }
        @if !st.config.read_only {
            @match &def {
                Some(d) => { (actions(&st, d, &here)) }
                None => {
                    p.muted #code-schedule { "Registered in code: change, pause or run it in the code that registers it (its payload lives in that process)." }
                }
            }
        }
        section.cards { div.card.wide {
        h2 { "Definition" }
        dl {
            dt { "kind" } dd { (e.kind) }
            dt { "queue" } dd { a href=(queue_href(&e.queue)) { (e.queue) } }
            dt { "spec" } dd.mono { (e.spec) }
            dt { "next run" } dd #next-run {
                @match super::schedules::next_run(&e, now) {
                    Some(ms) => { (format::time(ms)) " (" (format::relative(ms, now)) ")" }
                    None => { span.muted { "–" } }
                }
            }
            dt { "last fired" } dd {
                @match e.last_fired_ms {
                    Some(ms) => { (format::time(ms)) " (" (format::relative(ms, now)) ")" }
                    None => { span.muted { "never" } }
                }
            }
            dt { "source" } dd { (e.source.as_str()) " · registered by " span.mono { (e.registered_by) } }
            @if let Some(d) = &def {
                dt { "payload" } dd.mono { (chronos_broker::payload_json(&d.payload)) }
            }
        }
        }
        @if !st.config.read_only { @if let Some(d) = &def { div.card.wide { (edit_form(&st, d)) } } }
        }
        h2 { "Last fires" }
        (fires_table(&e.queue, &fires, now))
    };
    Ok(layout(
        &st,
        &format!("Schedule {}", e.id),
        Nav::Schedules,
        "schedule",
        &[],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}

fn actions(st: &AppState, d: &ScheduleDef, here: &str) -> Markup {
    let act = |what: &str, label: &str| {
        html! {
            form.inline method="post" action={(here) "/" (what)} {
                (csrf(st))
                @if what == "run" {
                    // One id per rendered page: a form sent twice runs the schedule once.
                    input type="hidden" name="request" value=(format!("{:016x}", rand::random::<u64>()));
                }
                button.small type="submit" data-action=(what) { (label) }
            }
        }
    };
    html! {
        div.toolbar #schedule-actions {
            @if d.paused { (act("resume", "resume")) } @else { (act("pause", "pause")) }
            (act("run", "run now"))
        }
    }
}

fn edit_form(st: &AppState, d: &ScheduleDef) -> Markup {
    let (cron, zone, every) = match &d.spec {
        DefSpec::Cron { expr, zone } => (expr.clone(), zone.clone(), String::new()),
        DefSpec::Every { every_ms } => (
            String::new(),
            String::new(),
            format_duration(std::time::Duration::from_millis(*every_ms)),
        ),
        _ => (String::new(), String::new(), String::new()),
    };
    let payload = chronos_broker::payload_json(&d.payload);
    // Bytes that are not MessagePack show as a "0x.." string: they cannot be edited as JSON.
    let opaque = payload.starts_with("\"0x");
    html! {
        h2 { "Edit" }
        form #schedule-edit method="post" action={(schedule_href(&d.id)) "/edit"} {
            (csrf(st))
            p.muted { "A cron expression (with its zone) or an interval. Kind, queue and options stay; the next trigger follows the new spec." }
            label { "cron " input #edit-cron type="text" name="cron" value=(cron) placeholder="*/5 * * * *"; }
            " "
            label { "zone " input #edit-zone type="text" name="zone" value=(zone) placeholder="UTC"; }
            " "
            label { "or every " input #edit-every type="text" name="every" size="6" value=(every) placeholder="30s"; }
            br;
            label for="edit-payload" { "payload (JSON)" }
            br;
            // Sent back as it was shown: a payload left as it is stays byte for byte.
            input type="hidden" name="payload_was" value=(payload);
            textarea #edit-payload.mono name="payload" rows="4" cols="60" readonly[opaque] { (payload) }
            @if opaque { p.muted { "This payload is not MessagePack: it is kept as it is." } }
            br;
            button type="submit" { "save" }
        }
    }
}

fn fires_table(queue: &str, fires: &[FireRow], now: i64) -> Markup {
    if fires.is_empty() {
        return html! { p.muted #no-fires { "No fire recorded yet." } };
    }
    html! {
        table.grid #fires {
            thead { tr { th { "trigger" } th { "outcome" } th { "task" } th { "task now" } } }
            tbody {
                @for f in fires {
                    tr data-outcome=(f.outcome) {
                        td.time title=(format::time(f.at_ms)) { (format::time(f.at_ms)) " (" (format::relative(f.at_ms, now)) ")" }
                        td { (f.outcome) }
                        td.mono {
                            @if f.task_state.as_deref().is_some_and(|s| s != "gone") {
                                a href=(task_href(queue, &f.task_id)) { (f.task_id) }
                            } @else {
                                (f.task_id)
                            }
                        }
                        td data-f="task-state" {
                            @match f.task_state.as_deref() {
                                Some("gone") => { span.muted title="no record left: it completed without retention, or was deleted" { "gone" } }
                                Some(s) => { span.badge data-state=(s) { (s) } }
                                None => { span.muted { "skipped" } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `pause`, `resume`, `run` (now) or `edit` a runtime schedule.
pub(crate) async fn act(
    State(st): State<Arc<AppState>>,
    Path((id, action)): Path<(String, String)>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let rt = st.admin.runtime_schedules();
    let changed = |c: chronos_scheduler::Change| c == chronos_scheduler::Change::Done;
    let msg = match action.as_str() {
        "pause" => {
            let done = changed(rt.pause(&id).await.map_err(AdminError::from)?);
            tracing::info!(who = %who, schedule = %id, done, "console: schedule paused");
            format!("Schedule {id} paused: it fires nothing until resumed.")
        }
        "resume" => {
            let done = changed(rt.resume(&id).await.map_err(AdminError::from)?);
            tracing::info!(who = %who, schedule = %id, done, "console: schedule resumed");
            format!("Schedule {id} resumed: it fires from now on (the pause is not caught up).")
        }
        "run" => {
            let request = form.get("request").filter(|r| !r.is_empty());
            let r = rt.run_now(&id, request).await.map_err(AdminError::from)?;
            tracing::info!(who = %who, schedule = %id, task = %r.task_id, outcome = ?r.outcome, "console: schedule run now");
            match r.outcome {
                chronos_broker::FireOutcome::Fired => {
                    format!("Schedule {id} ran now: task {}.", r.task_id)
                }
                chronos_broker::FireOutcome::Duplicate => {
                    format!("Schedule {id}: this run was already sent; nothing new enqueued.")
                }
                chronos_broker::FireOutcome::Unique => format!(
                    "Schedule {id}: another task of the same kind and payload holds the unique lock; nothing enqueued."
                ),
                o => format!("Schedule {id}: {o:?}."),
            }
        }
        "edit" => {
            let edit = parse_edit(&form)?;
            let done = changed(rt.edit(&id, edit).await.map_err(AdminError::from)?);
            tracing::info!(who = %who, schedule = %id, done, "console: schedule edited");
            if done {
                format!("Schedule {id} saved; schedulers load it within a few seconds.")
            } else {
                format!("Schedule {id}: nothing changed.")
            }
        }
        other => {
            return Err(PageError(DashError::Admin(AdminError::Invalid(format!(
                "a schedule can be paused, resumed, run or edited, not {other:?}"
            )))))
        }
    };
    Ok(back_with(&st, &schedule_href(&id), &msg))
}

/// The edit a form asks for: a cron expression (and zone) or an interval, and a JSON payload.
fn parse_edit(form: &CheckedForm) -> Result<ScheduleEdit, PageError> {
    let field = |n: &str| crate::fields::given(form, n);
    let bad = |m: String| PageError(DashError::Admin(AdminError::Invalid(m)));
    let mut edit = ScheduleEdit::new();
    match (field("cron"), field("every")) {
        (Some(_), Some(_)) => {
            return Err(bad("give a cron expression or an interval, not both".into()))
        }
        (Some(expr), None) => {
            let zone = field("zone").unwrap_or("UTC");
            edit = edit.spec(Spec::cron(expr, zone).map_err(|e| AdminError::Schedule(e.into()))?);
        }
        (None, Some(every)) => {
            let d = parse_duration(every).ok_or_else(|| {
                bad(format!(
                    "every {every:?}: write a duration like 30s, 5m or 1h"
                ))
            })?;
            edit = edit.spec(Spec::interval(d).map_err(|e| AdminError::Schedule(e.into()))?);
        }
        (None, None) => {}
    }
    let was = form.get("payload_was").map(str::trim);
    if let Some(p) = field("payload").filter(|p| Some(*p) != was) {
        let v: serde_json::Value =
            serde_json::from_str(p).map_err(|e| bad(format!("payload is not JSON: {e}")))?;
        edit = edit.payload(v);
    }
    Ok(edit)
}
