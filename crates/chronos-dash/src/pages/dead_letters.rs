//! A queue's dead letters grouped by error (`/queues/{queue}/dead`): each first line of error
//! with how many tasks died of it, of which kinds, since when, and a link to the archived
//! listing filtered to the group (where the bulk actions run them again or delete them).
//! Filtered by error text and kind (a trailing `*` makes a prefix).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_broker::{TaskFilter, TaskState};
use maud::html;
use serde::Deserialize;

use super::{layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{encode, listing_href, queue_href, task_href};
use crate::state::AppState;

/// Most dead letters one page reads (newest first) to group.
const MAX_READ: u64 = 5_000;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    kind: Option<String>,
    error: Option<String>,
}

/// The path of a queue's dead letters grouped by error.
pub(crate) fn dead_href(queue: &str) -> String {
    format!("/queues/{}/dead", encode(queue))
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let filter = TaskFilter {
        kind: p.kind.clone().filter(|k| !k.trim().is_empty()),
        error: p.error.clone().filter(|e| !e.is_empty()),
        ..TaskFilter::default()
    };
    let g = st
        .admin
        .dead_letter_groups(&queue, &filter, MAX_READ)
        .await?;
    let now = format::now_ms();
    let body = html! {
        p.crumbs { a href=(queue_href(&queue)) { "queue " (queue) } " / dead letters by error" }
        h1 { "Dead letters by error" }
        form.filter method="get" action=(dead_href(&queue)) {
            label { "error contains " input type="text" name="error" value=(filter.error.clone().unwrap_or_default()) placeholder="timeout"; }
            label title="a trailing * takes every kind that starts with it" { "kind " input type="text" name="kind" value=(filter.kind.clone().unwrap_or_default()) placeholder="email:*"; }
            button type="submit" { "filter" }
            @if !filter.is_empty() { a href=(dead_href(&queue)) { "clear" } }
        }
        p.muted #dead-read {
            (format::thousands(g.groups.iter().map(|x| x.count).sum::<u64>())) " dead letters"
            @if !filter.is_empty() { " matching" }
            " in " (g.groups.len()) " groups"
            @if g.read < g.in_state {
                ", from the newest " (format::thousands(g.read)) " of " (format::thousands(g.in_state)) " read"
            }
            "."
        }
        @if g.groups.is_empty() {
            p.muted #no-dead { "No dead letter" @if !filter.is_empty() { " matches" } "." }
        } @else {
            table.grid #groups {
                thead { tr { th { "error (first line)" } th.num { "tasks" } th { "kinds" } th { "newest" } th { "oldest" } th { "" } } }
                tbody {
                    @for x in &g.groups {
                        tr data-error=(x.error) {
                            td.error {
                                @if x.error.is_empty() { span.muted { "(no error recorded)" } } @else { (x.error) }
                            }
                            td.num data-f="count" { (format::thousands(x.count)) }
                            td {
                                @for (i, (k, n)) in x.kinds.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    (k) " " span.muted { "×" (n) }
                                }
                            }
                            td.time {
                                @if let Some(ms) = x.newest_ms { span title=(format::time(ms)) { (format::relative(ms, now)) } }
                            }
                            td.time {
                                @if let Some(ms) = x.oldest_ms { span title=(format::time(ms)) { (format::relative(ms, now)) } }
                            }
                            td.actions {
                                @if !x.error.is_empty() {
                                    a data-list=(x.error) href=(listing_href(&queue, TaskState::Archived, &TaskFilter { error: Some(x.error.clone()), ..filter.clone() }, None)) { "list" }
                                    " · "
                                }
                                a href=(task_href(&queue, &x.sample_id)) { "newest" }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Dead letters of {queue}"),
        Nav::None,
        "dead",
        &[],
        None,
        body,
    ))
}
