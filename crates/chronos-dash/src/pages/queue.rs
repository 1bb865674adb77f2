//! A queue: its counts, its chart, its tasks by state with filter and cursor, the actions on
//! one task, on a selection and on everything the filter matches, and its stored limits
//! (limits.rs) and its tenants (tenants.rs).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_admin::{parse_state, QueueRow, TaskRow, TenantList};
use chronos_broker::{TaskAction, TaskFilter, TaskState};
use maud::{html, Markup};
use serde::Deserialize;

use super::tenants::Editing;
use super::{csrf, layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{listing_href, queue_href, task_href};
use crate::state::AppState;

/// The states a queue page has a tab for, in the order of a task's life.
pub(crate) const STATES: [TaskState; 7] = [
    TaskState::Pending,
    TaskState::Active,
    TaskState::Scheduled,
    TaskState::Retry,
    TaskState::Archived,
    TaskState::Completed,
    TaskState::Cancelled,
];

/// The actions, in the order buttons show them.
pub(crate) const ACTIONS: [TaskAction; 4] = [
    TaskAction::RunNow,
    TaskAction::Archive,
    TaskAction::Cancel,
    TaskAction::Delete,
];

/// The path segment and button label of an action.
pub(crate) fn slug(a: TaskAction) -> &'static str {
    match a {
        TaskAction::RunNow => "run",
        TaskAction::Delete => "delete",
        TaskAction::Archive => "archive",
        TaskAction::Cancel => "cancel",
    }
}

/// The action a path segment or form value names.
pub(crate) fn parse_action(s: &str) -> Option<TaskAction> {
    ACTIONS.into_iter().find(|a| slug(*a) == s)
}

/// The actions that take tasks in `state`.
pub(crate) fn actions_for(state: TaskState) -> Vec<TaskAction> {
    ACTIONS
        .into_iter()
        .filter(|a| a.sources().contains(&state))
        .collect()
}

pub(crate) fn count(row: &QueueRow, s: TaskState) -> u64 {
    match s {
        TaskState::Pending => row.pending,
        TaskState::Active => row.active,
        TaskState::Scheduled => row.scheduled,
        TaskState::Retry => row.retry,
        TaskState::Archived => row.archived,
        TaskState::Completed => row.completed,
        TaskState::Cancelled => row.cancelled,
        _ => 0,
    }
}

/// What the queue page reads from its URL.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    pub(crate) state: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) q: Option<String>,
    /// Only tasks whose last error contains this text.
    pub(crate) error: Option<String>,
    pub(crate) cursor: Option<String>,
    pub(crate) msg: Option<String>,
    pub(crate) sig: Option<String>,
    /// The tenant the tenants form edits (none: the default for all tenants).
    pub(crate) tenant: Option<String>,
}

impl Params {
    pub(crate) fn filter(&self) -> TaskFilter {
        TaskFilter {
            kind: self.kind.clone().filter(|k| !k.trim().is_empty()),
            grep: self.q.clone().filter(|q| !q.is_empty()),
            error: self.error.clone().filter(|e| !e.is_empty()),
        }
    }
}

/// Most blocked rate keys listed on a queue page (soonest end first).
const BLOCKED_KEYS_LISTED: usize = 50;

/// The handler-signalled blocks of a queue (`TaskError::rate_limited`), each with its end and,
/// unless read-only, a button that lifts it. Nothing when none is in force.
fn blocks_section(
    st: &AppState,
    queue: &str,
    blocks: &chronos_broker::QueueBlocks,
    now: i64,
    here: &str,
) -> Markup {
    if blocks.queue_until_ms.is_none() && blocks.keys.is_empty() {
        return html! {};
    }
    let lift = |key: Option<&str>| {
        html! {
            @if !st.config.read_only {
                form.inline method="post" action={(queue_href(queue)) "/unblock"} {
                    (csrf(st))
                    input type="hidden" name="back" value=(here);
                    @if let Some(k) = key { input type="hidden" name="key" value=(k); }
                    button.small type="submit" { "lift" }
                }
            }
        }
    };
    html! {
        section #blocks {
            h2 { "Throttled" }
            p.muted { "A handler was rate limited: blocked work is held back, without spending attempts, until the end (plus a jitter)." }
            table.grid {
                thead { tr { th { "blocked" } th { "until" } th { "" } } }
                tbody {
                    @if let Some(until) = blocks.queue_until_ms {
                        tr data-block="" {
                            td { "the whole queue" }
                            td { "throttled until " (format::time(until)) " (" (format::relative(until, now)) ")" }
                            td { (lift(None)) }
                        }
                    }
                    @for (key, until) in &blocks.keys {
                        tr data-block=(key) {
                            td { "rate key " code { (key) } }
                            td { "throttled until " (format::time(*until)) " (" (format::relative(*until, now)) ")" }
                            td { (lift(Some(key))) }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let state = parse_state(p.state.as_deref().unwrap_or("pending"))?;
    let filter = p.filter();
    let (row, list, oldest, settings, tenants, blocks) = tokio::try_join!(
        st.admin.queue(&queue),
        st.admin.tasks(
            &queue,
            state,
            &filter,
            p.cursor.as_deref(),
            st.config.page_size.clamp(1, 500)
        ),
        st.admin.oldest_pending_ms(&queue),
        st.admin.queue_settings(&queue),
        st.admin.tenants(&queue, super::tenants::LISTED),
        st.admin.queue_blocks(&queue, BLOCKED_KEYS_LISTED),
    )?;
    let editing = editing(&st, &queue, &tenants, p.tenant.as_deref()).await?;
    let now = format::now_ms();
    let here = listing_href(&queue, state, &filter, p.cursor.as_deref());
    let actions = if st.config.read_only {
        Vec::new()
    } else {
        actions_for(state)
    };
    let body = html! {
        h1 {
            "Queue " span #queue-name { (row.name) }
            @if row.paused { " " span.badge.paused { "paused" } }
            @if let Some(until) = blocks.queue_until_ms {
                " " span.badge.paused #throttled title="a handler was rate limited (TaskError::rate_limited(..).queue_wide()): no server fetches this queue until then" {
                    "throttled until " (format::time(until))
                }
            }
        }
        div.toolbar {
            span.muted {
                "oldest pending: " span data-f="oldest_pending_s" { (super::overview::age(oldest.map(|t| (now.saturating_sub(t) / 1000).max(0)))) }
                " · processed " span data-f="processed" { (format::thousands(row.processed)) }
                " · failed " span data-f="failed" { (format::thousands(row.failed)) }
                @if blocks.throttled_today > 0 {
                    " · throttled today " span #throttled-today { (format::thousands(blocks.throttled_today)) }
                }
            }
            @if !st.config.read_only {
                form.inline method="post" action={(queue_href(&row.name)) "/" (if row.paused { "resume" } else { "pause" })} {
                    (csrf(&st))
                    input type="hidden" name="back" value=(here);
                    button.small type="submit" { (if row.paused { "resume queue" } else { "pause queue" }) }
                }
                a.button #enqueue-link href=(super::enqueue::enqueue_href(&row.name, None)) { "enqueue a task…" }
            }
        }
        div.chart #chart data-queue=(row.name) { p.muted { "loading…" } }
        @if !row.levels.is_empty() {
            section #levels {
                h2 { "Priority levels" }
                table.grid {
                    thead { tr { th { "level" } th.num { "pending" } th.num { "active" } th.num { "oldest pending" } } }
                    tbody {
                        @for l in &row.levels {
                            tr data-level=(l.level) {
                                td { (l.level) @if l.level == 5 { span.muted { " (default)" } } }
                                td.num data-l="pending" { (format::thousands(l.pending)) }
                                td.num data-l="active" { (format::thousands(l.active)) }
                                td.num { (super::overview::age(l.oldest_pending_ms.map(|ms| (ms / 1000) as i64))) }
                            }
                        }
                    }
                }
                p.muted { "0 runs first; a task that waited longer than the queue's aging time goes ahead of newer, more urgent work." }
            }
        }
        nav.tabs {
            @for s in STATES {
                a.active[s == state] href=(listing_href(&row.name, s, &filter, None)) data-state=(s.as_str()) data-listed=[(s == state).then(|| count(&row, s))] {
                    (s.as_str()) " " span.count data-f=(s.as_str()) { (format::thousands(count(&row, s))) }
                }
            }
            a href=(super::timing::timing_href(&row.name)) #timing-tab title="run time and queue wait per kind: p50, p95, p99" { "timing" }
            a href=(super::dead_letters::dead_href(&row.name)) #dead-tab title="the dead letters (archived tasks) grouped by error" { "dead by error" }
            a href=(super::locks::locks_href(&row.name)) #locks-tab title="deduplication locks held in this queue" { "locks" }
            a href=(super::events::events_href(&row.name)) #events-tab title="this queue's event stream, live" { "events" }
        }
        form.filter method="get" action=(queue_href(&row.name)) {
            input type="hidden" name="state" value=(state.as_str());
            label title="a trailing * takes every kind that starts with it" { "kind " input type="text" name="kind" value=(filter.kind.clone().unwrap_or_default()) placeholder="email:*"; }
            label { "payload contains " input type="text" name="q" value=(filter.grep.clone().unwrap_or_default()) placeholder="text"; }
            label { "error contains " input type="text" name="error" value=(filter.error.clone().unwrap_or_default()) placeholder="timeout"; }
            button type="submit" { "filter" }
            @if !filter.is_empty() {
                a href=(listing_href(&row.name, state, &TaskFilter::default(), None)) { "clear" }
            }
        }
        @if !actions.is_empty() && count(&row, state) > 0 {
            form.bulk.inline method="post" action={(queue_href(&row.name)) "/bulk"} {
                (csrf(&st))
                input type="hidden" name="state" value=(state.as_str());
                input type="hidden" name="kind" value=(filter.kind.clone().unwrap_or_default());
                input type="hidden" name="q" value=(filter.grep.clone().unwrap_or_default());
                input type="hidden" name="error" value=(filter.error.clone().unwrap_or_default());
                span.muted { "every " (state.as_str()) " task" @if !filter.is_empty() { " matching the filter" } ": " }
                @for a in &actions {
                    button.small type="submit" name="action" value=(slug(*a)) data-bulk=(slug(*a)) { (slug(*a)) " all…" }
                }
            }
        }
        p.muted #stale-rows hidden {
            "These rows were read when " (state.as_str()) " held " span data-f="listed" {} "; it holds "
            span data-f="now" {} " now. "
            a href=(here) { "Read them again" }
        }
        @if list.tasks.is_empty() && list.next.is_some() {
            p.muted #no-match-yet {
                "No match among the tasks read for this page (a page reads a bounded number of them). "
                a href=(listing_href(&row.name, state, &filter, list.next.as_deref())) { "Continue »" }
            }
        } @else {
            (task_table(&st, &row.name, state, &list.tasks, &actions, &here, now))
        }
        nav.pager {
            @if p.cursor.is_some() {
                a href=(listing_href(&row.name, state, &filter, None)) { "« first page" }
            }
            @if let Some(next) = &list.next {
                a #next-page href=(listing_href(&row.name, state, &filter, Some(next))) { "next page »" }
            }
        }
        (blocks_section(&st, &row.name, &blocks, now, &here))
        (super::tenants::section(&st, &tenants, &editing, now, &here))
        (super::limits::section(&st, &settings, &here))
    };
    Ok(layout(
        &st,
        &format!("Queue {}", row.name),
        Nav::None,
        "queue",
        &[("arg", row.name.clone())],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}

/// What the tenants form edits: the tenant the URL names (its settings from the listing when it
/// is there, else read), or the default.
async fn editing<'a>(
    st: &AppState,
    queue: &str,
    list: &TenantList,
    tenant: Option<&'a str>,
) -> Result<Editing<'a>, PageError> {
    let Some(t) = tenant.filter(|t| !t.is_empty()) else {
        return Ok(Editing {
            tenant: None,
            settings: list.default.clone(),
        });
    };
    let settings = match list.tenants.iter().find(|r| r.tenant == t) {
        Some(r) => r.settings.clone(),
        None => st.admin.tenant_settings(queue, Some(t)).await?,
    };
    Ok(Editing {
        tenant: Some(t),
        settings,
    })
}

fn task_table(
    st: &AppState,
    queue: &str,
    state: TaskState,
    tasks: &[TaskRow],
    actions: &[TaskAction],
    here: &str,
    now: i64,
) -> Markup {
    if tasks.is_empty() {
        return html! { p.muted #no-tasks { "No " (state.as_str()) " task." } };
    }
    let cancelled = state == TaskState::Cancelled;
    let table = html! {
    table #tasks.grid {
        thead {
            tr {
                @if !actions.is_empty() { th { input #select-all type="checkbox" title="select all"; } }
                th { "id" } th { "kind" } th { "payload" } th.num { "attempts" }
                th { (if cancelled { "reason" } else { "last error" }) }
                th { "enqueued" }
                th #when { (when_header(state)) }
                @if state == TaskState::Active { th { "server" } }
                @if !actions.is_empty() { th { } }
            }
        }
        tbody {
            @for t in tasks {
                tr data-id=(t.id) {
                    @if !actions.is_empty() {
                        td { input.pick type="checkbox" name="id" value=(t.id); }
                    }
                    td.mono { a href=(task_href(queue, &t.id)) { (t.id) } }
                    td { (t.kind) @if let Some(e) = &t.decode_error { span.error title=(e) { "undecodable" } } }
                    td.mono.payload { (short(&t.payload.to_string(), 80)) }
                    td.num { (t.retried) "/" (t.max_retry) }
                    @if cancelled {
                        td.reason { (t.cancel_reason.as_deref().map(|e| short(e, 80)).unwrap_or_default()) }
                    } @else {
                        td.error { (t.last_error.as_deref().map(|e| short(e, 80)).unwrap_or_default()) }
                    }
                    td.time title=(t.enqueued_at_ms.map(format::time).unwrap_or_default()) {
                        (t.enqueued_at_ms.map(|m| format::relative(m, now)).unwrap_or_default())
                    }
                    @let when = when_of(state, t);
                    td.time data-f="when" title=(when.map(format::time).unwrap_or_default()) {
                        (when.map(|m| format::relative(m, now)).unwrap_or_default())
                    }
                    @if state == TaskState::Active {
                        td.mono data-f="server" {
                            @match &t.running_on {
                                Some((server, _)) => { (server) }
                                None => { span.muted title="not in a live server's last record (it just started, or its server stopped heartbeating)" { "–" } }
                            }
                        }
                    }
                    @if !actions.is_empty() {
                        td.actions {
                            @for a in actions {
                                button.small type="submit"
                                    formaction={(task_href(queue, &t.id)) "/" (slug(*a))}
                                    data-action=(slug(*a)) { (slug(*a)) }
                            }
                        }
                    }
                }
            }
        }
    }
    };
    if actions.is_empty() {
        return table;
    }
    html! {
        form #tasks-form method="post" action={(queue_href(queue)) "/selection"} {
            (csrf(st))
            input type="hidden" name="back" value=(here);
            div.selection {
                span.muted { "selected: " }
                @for a in actions {
                    button.small type="submit" name="action" value=(slug(*a)) data-selection=(slug(*a)) { (slug(*a)) }
                }
            }
            (table)
        }
    }
}

/// The time column of a state's listing: what an operator looks for in that state.
fn when_header(state: TaskState) -> &'static str {
    match state {
        TaskState::Active => "started",
        TaskState::Scheduled => "runs",
        TaskState::Retry => "next attempt",
        TaskState::Archived => "archived",
        TaskState::Completed => "kept until",
        TaskState::Cancelled => "cancelled",
        _ => "last failed",
    }
}

/// The time [`when_header`] names, for one row.
fn when_of(state: TaskState, t: &TaskRow) -> Option<i64> {
    match state {
        TaskState::Active => t.running_on.as_ref().map(|(_, at)| *at),
        TaskState::Cancelled => t.cancelled_at_ms.or(t.state_time_ms),
        TaskState::Scheduled | TaskState::Retry | TaskState::Archived | TaskState::Completed => {
            t.state_time_ms
        }
        _ => t.last_failed_at_ms,
    }
}

/// The first `n` characters of `s`, with an ellipsis when cut.
pub(crate) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}
