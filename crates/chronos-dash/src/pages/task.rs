//! One task: its payload as JSON, headers, attempts, last error, what is known of its history,
//! and the actions its state allows.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_admin::parse_state;
use chronos_broker::TaskState;
use maud::html;
use serde::Deserialize;

use super::queue::{actions_for, slug};
use super::{csrf, layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{queue_href, task_href};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    msg: Option<String>,
    sig: Option<String>,
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path((queue, id)): Path<(String, String)>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let (t, flows) = tokio::try_join!(st.admin.task(&queue, &id), st.admin.flow_of(&queue, &id))?;
    let now = format::now_ms();
    let state = parse_state(&t.state)?;
    let actions = if st.config.read_only {
        Vec::new()
    } else {
        actions_for(state)
    };
    let payload = serde_json::to_string_pretty(&t.payload).unwrap_or_default();
    let can_prioritize = !st.config.read_only
        && matches!(
            state,
            TaskState::Pending | TaskState::Scheduled | TaskState::Retry | TaskState::Archived
        );
    // Only a task that has not started can be edited (archived: run it first).
    let can_edit = !st.config.read_only
        && matches!(
            state,
            TaskState::Pending | TaskState::Scheduled | TaskState::Retry
        );
    let back = task_href(&queue, &id);
    let body = html! {
        p.crumbs { a href=(queue_href(&queue)) { "queue " (queue) } " / task" }
        h1 { "Task " span.mono #task-id { (t.id) } }
        div.toolbar {
            span.badge #task-state data-state=(t.state) { (t.state) }
            @for a in &actions {
                form.inline method="post" action={(task_href(&queue, &id)) "/" (slug(*a))} {
                    (csrf(&st))
                    input type="hidden" name="back" value=(back);
                    button.small type="submit" data-action=(slug(*a)) { (slug(*a)) }
                }
            }
            @if !st.config.read_only && t.decode_error.is_none() {
                a.button #duplicate href=(super::enqueue::enqueue_href(&queue, Some(&id))) title="enqueue a new task with this one's kind, payload and options, to edit first" { "duplicate…" }
            }
        }
        section.cards {
            div.card.wide {
                h2 { "Task" }
                dl {
                    dt { "kind" } dd { (t.kind) }
                    dt { "queue" } dd { a href=(queue_href(&queue)) { (queue) } }
                    dt { "state" } dd { (t.state) }
                    dt { "priority" } dd #task-priority { "level " (t.priority) }
                    dt { "attempts" } dd { (t.retried) " failed of " (t.max_retry) " retries allowed" }
                    @if t.snoozes > 0 { dt { "snoozed" } dd #task-snoozes { (t.snoozes) " times (no attempt spent)" } }
                    @if let Some(r) = &t.cancel_reason {
                        dt { "cancelled" }
                        dd #cancel-reason {
                            "by its handler"
                            @if let Some(at) = t.cancelled_at_ms { " at " (format::time(at)) }
                            ": " (r)
                        }
                    }
                    @if let Some(e) = &t.last_error { dt { "last error" } dd.error #last-error { (e) } }
                    @if let Some(e) = &t.decode_error { dt { "envelope" } dd.error { "does not decode: " (e) } }
                }
            }
            (super::flows::cards(&queue, &flows))
            @if t.progress.is_some() || state == TaskState::Active {
                div.card.wide #progress-card {
                    h2 { "Progress" }
                    @let pc = t.progress_percent;
                    @let note = t.progress.as_ref().and_then(|pr| pr.note());
                    progress #progress-bar max="100" value=[pc.map(format::percent)] {}
                    " "
                    span #progress-percent { @if let Some(pc) = pc { (format::percent(pc)) "%" } }
                    " "
                    span #progress-note { (note.unwrap_or_default()) }
                    @match &t.progress {
                        Some(pr) => {
                            p.muted {
                                "reported at " span #progress-at { (format::time(pr.at_ms)) }
                                " (" (format::relative(pr.at_ms, now)) ")"
                            }
                            pre.json #progress-value { (pr.value.to_string()) }
                        }
                        None => {
                            p.muted #progress-none { "no progress reported yet (a handler reports it with ctx.progress)" }
                        }
                    }
                }
            }
            @if can_prioritize {
                div.card.wide {
                    h2 { "Priority" }
                    form.inline #prioritize method="post" action={(task_href(&queue, &id)) "/prioritize"} {
                        (csrf(&st))
                        input type="hidden" name="back" value=(back);
                        label for="priority-level" { "level " }
                        select #priority-level name="level" {
                            @for l in 0..10u8 {
                                option value=(l) selected[l == t.priority] {
                                    (l) @if l == 0 { " (first)" } @else if l == 5 { " (default)" } @else if l == 9 { " (last)" }
                                }
                            }
                        }
                        " "
                        button.small type="submit" data-action="prioritize" { "set priority" }
                    }
                    p.muted { "0 runs first. A pending task moves to the end of its new level; a scheduled, retrying or archived one keeps the level for when it runs." }
                }
            }
            @if can_edit {
                div.card.wide {
                    h2 { "Edit" }
                    form #edit method="post" action={(task_href(&queue, &id)) "/edit"} {
                        (csrf(&st))
                        input type="hidden" name="back" value=(back);
                        input type="hidden" name="payload_was" value=(payload);
                        label for="edit-payload" { "payload (JSON)" }
                        br;
                        textarea #edit-payload.mono name="payload" rows="8" cols="60" { (payload) }
                        br;
                        label for="edit-at" { "run at (UTC) " }
                        input #edit-at type="datetime-local" name="at" step="1";
                        " or in "
                        input #edit-in type="text" name="in" size="6" placeholder="30s";
                        " "
                        label for="edit-level" { "level " }
                        select #edit-level name="level" {
                            option value="" selected { "unchanged" }
                            @for l in 0..10u8 {
                                option value=(l) { (l) }
                            }
                        }
                        " "
                        button.small type="submit" data-action="edit" { "save" }
                    }
                    p.muted { "One atomic step; a task that starts meanwhile is refused. A pending task whose payload or level changes goes to the end of its level (a tenant task keeps its place); a run time in the future makes it scheduled, one now or past makes a scheduled or retrying task due at once." }
                }
            }
            div.card.wide {
                h2 { "History" }
                ol.timeline #history {
                    @if let Some(ms) = t.enqueued_at_ms {
                        li { span.time title=(format::relative(ms, now)) { (format::time(ms)) } " enqueued" }
                    }
                    @for a in &t.attempts {
                        li.attempt data-outcome=(a.outcome.as_str()) {
                            span.time title=(format::relative(a.ended_at_ms, now)) {
                                (format::time(a.started_at_ms.unwrap_or(a.ended_at_ms)))
                            }
                            " attempt " (a.attempt) " "
                            strong.outcome { (a.outcome.as_str()) }
                            @if let Some(ms) = a.ran_ms { span.muted { " after " (ms) " ms" } }
                            @if let Some(w) = &a.worker { span.muted { " on " span.mono { (w) } } }
                            @if let Some(e) = &a.error { div.error.mono { (e) } }
                            @if let Some(l) = &a.logs {
                                details.logs {
                                    summary { "log (" (l.lines().count()) " lines)" }
                                    pre.logs { (l) }
                                }
                            }
                        }
                    }
                    @if t.attempts.is_empty() {
                        @if let (Some(ms), true) = (t.last_failed_at_ms, t.retried > 0) {
                            li {
                                span.time title=(format::relative(ms, now)) { (format::time(ms)) }
                                " failed (attempt " (t.retried) ")"
                            }
                        }
                    }
                    li { "now " strong { (t.state) } }
                }
                p.muted { "Each attempt that ended, as the step that settled it recorded it (the last 25): a task that succeeded at once without a retention keeps no record." }
            }
        }
        section {
            h2 { "Payload" }
            pre.json #payload { (payload) }
        }
        section {
            h2 { "Headers" }
            @if t.headers.is_empty() {
                p.muted { "none" }
            } @else {
                table.grid #headers {
                    tbody {
                        @for (k, v) in &t.headers {
                            tr { th.mono { (k) } td.mono { (v) } }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Task {}", t.id),
        Nav::None,
        "task",
        &[("arg", format!("/api{}", task_href(&queue, &id)))],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}
