//! A queue's event stream (`/queues/{queue}/events`): the newest events, newest first, with new
//! ones added live (the page polls `api::events`), or, while the stream is off, what it would
//! show and (unless read-only) a button that turns it on. Reached from the queue page's tabs.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_broker::TaskEvent;
use maud::{html, Markup};

use super::locks::Params;
use super::{csrf, layout, Nav};
use crate::error::PageError;
use crate::format::time;
use crate::href::{encode, queue_href, task_href};
use crate::state::AppState;

/// Events the page starts with (newest first).
pub(crate) const SHOWN: usize = 100;

/// The path of a queue's events page.
pub(crate) fn events_href(queue: &str) -> String {
    format!("/queues/{}/events", encode(queue))
}

/// What an event says beyond its type, task and kind.
pub(crate) fn detail(e: &TaskEvent) -> String {
    e.event.detail(time)
}

fn row(queue: &str, e: &TaskEvent) -> Markup {
    html! {
        tr data-event=(e.id) data-type=(e.event.name()) {
            td.mono { (time(e.at_ms)) }
            td { span.badge { (e.event.name()) } }
            td.mono { a href=(task_href(queue, &e.task_id)) { (e.task_id) } }
            td.mono { (e.kind) }
            td { (detail(e)) }
        }
    }
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let (on, events) = st.admin.recent_events(&queue, SHOWN).await?;
    let here = events_href(&queue);
    let last = events
        .last()
        .map(|e| e.id.clone())
        .unwrap_or_else(|| "0-0".into());
    let toggle = |to: bool, label: &str| {
        html! {
            @if !st.config.read_only {
                form.inline method="post" action={(here) "/" (if to { "on" } else { "off" })} {
                    (csrf(&st))
                    input type="hidden" name="back" value=(here);
                    button.small type="submit" #(if to { "events-on" } else { "events-off" }) { (label) }
                }
            }
        }
    };
    let body = html! {
        h1 { "Queue " a href=(queue_href(&queue)) { (queue) } ": events" }
        @if on {
            p.muted {
                "Every transition of this queue's tasks, written by the script that made it (the newest 10,000 or so are kept). "
                "New events appear at the top as they are written. "
                (toggle(false, "turn events off (deletes them)"))
            }
            table #events.grid data-after=(last) data-queue=(queue) {
                thead { tr { th { "time" } th { "event" } th { "task" } th { "kind" } th { "detail" } } }
                tbody {
                    @for e in events.iter().rev() { (row(&queue, e)) }
                }
            }
            @if events.is_empty() {
                p.muted #no-events { "No event yet." }
            }
        } @else {
            p.muted #events-off {
                "This queue keeps no events. Turned on, every transition of its tasks (enqueued, started, progress, "
                "retried, forwarded, reclaimed, completed, dead-lettered, an operator's delete or archive, ...) is written to a capped stream "
                "that this page, `chronos events tail` and `Client::events` read; queues without it pay nothing. "
                (toggle(true, "turn events on"))
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Events of {queue}"),
        Nav::None,
        "events",
        &[("arg", queue.clone())],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}
