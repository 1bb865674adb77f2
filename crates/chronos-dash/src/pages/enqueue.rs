//! Enqueue a task from the console (`/queues/{queue}/enqueue`): kind, JSON payload and the
//! common options; or (`?from=<id>`) a copy of an existing task, its fields filled in to edit
//! before sending. The POST answers with the new task's page.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use axum::Extension;
use chronos_admin::AdminError;
use chronos_broker::{json_payload, parse_duration, EnqueueOptions, Priority};
use maud::html;
use serde::Deserialize;

use super::{csrf, layout, Nav};
use crate::error::{DashError, PageError};
use crate::fields::{given, RunTime};
use crate::href::{encode, queue_href, task_href};
use crate::notice::back_with;
use crate::security::{Actor, CheckedForm};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    /// The task to copy.
    from: Option<String>,
}

/// The path of a queue's enqueue form (`from`: a task to copy).
pub(crate) fn enqueue_href(queue: &str, from: Option<&str>) -> String {
    match from {
        Some(id) => format!("/queues/{}/enqueue?from={}", encode(queue), encode(id)),
        None => format!("/queues/{}/enqueue", encode(queue)),
    }
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    chronos_broker::QueueName::new(queue.as_str())?;
    let source = match p.from.as_deref().filter(|f| !f.is_empty()) {
        Some(id) => Some(st.admin.copy_of(&queue, id).await?),
        None => None,
    };
    let payload = source.as_ref().map_or_else(
        || "{}".to_string(),
        |(e, _)| chronos_broker::payload_json(&e.payload),
    );
    let kind = source
        .as_ref()
        .map(|(e, _)| e.kind.clone())
        .unwrap_or_default();
    let level = source
        .as_ref()
        .map_or(Priority::NORMAL.get(), |(_, p)| p.get());
    let max_retry = source
        .as_ref()
        .map(|(e, _)| e.max_retry.to_string())
        .unwrap_or_default();
    let timeout = source
        .as_ref()
        .and_then(|(e, _)| e.timeout_ms)
        .map(|ms| chronos_broker::format_duration(std::time::Duration::from_millis(ms)))
        .unwrap_or_default();
    let body = html! {
        p.crumbs { a href=(queue_href(&queue)) { "queue " (queue) } " / enqueue" }
        h1 {
            @match &p.from { Some(id) => { "Copy task " span.mono { (id) } } None => { "Enqueue a task" } }
        }
        @if st.config.read_only {
            p.muted #read-only { "This console is read-only: it enqueues nothing." }
        } @else {
            section.cards { div.card.wide {
            form #enqueue method="post" action=(enqueue_href(&queue, None)) {
                (csrf(&st))
                @if let Some(id) = &p.from {
                    input type="hidden" name="from" value=(id);
                    // Sent back as shown: an untouched payload is copied byte for byte.
                    input type="hidden" name="payload_was" value=(payload);
                }
                p.muted { "The handler registered for the kind decodes the payload (JSON, stored as MessagePack as a serde type with the same fields is)." }
                label { "kind " input #enqueue-kind type="text" name="kind" value=(kind) placeholder="email:send" required; }
                br;
                label for="enqueue-payload" { "payload (JSON)" }
                br;
                textarea #enqueue-payload.mono name="payload" rows="8" cols="60" { (payload) }
                br;
                label { "run at (UTC) " input #enqueue-at type="datetime-local" name="at" step="1"; }
                " or in "
                input #enqueue-in type="text" name="in" size="6" placeholder="30s";
                " "
                label { "level " select #enqueue-level name="level" {
                    @for l in 0..Priority::LEVELS {
                        option value=(l) selected[l == level] { (l) @if l == Priority::NORMAL.get() { " (default)" } }
                    }
                } }
                br;
                label { "max retry " input #enqueue-retry type="text" name="max_retry" size="4" value=(max_retry) placeholder="25"; }
                " "
                label { "timeout " input #enqueue-timeout type="text" name="timeout" size="6" value=(timeout) placeholder="30m"; }
                " "
                label title="an id already taken answers its task; nothing new is written" { "task id " input #enqueue-id type="text" name="task_id" placeholder="(new)"; }
                br;
                button type="submit" { "enqueue" }
            }
            } }
        }
    };
    Ok(layout(
        &st,
        &format!("Enqueue into {queue}"),
        Nav::None,
        "enqueue",
        &[],
        None,
        body,
    ))
}

/// Enqueues the form's task and answers with its page.
pub(crate) async fn submit(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let invalid = |m: String| PageError(DashError::Admin(AdminError::Invalid(m)));
    let field = |name: &str| given(&form, name);
    let kind = field("kind").ok_or_else(|| invalid("give the task's kind".into()))?;
    let text = field("payload").unwrap_or("{}");
    let from = field("from");
    let payload = match from {
        // An untouched copy keeps the source's bytes (JSON would reorder or retype them).
        Some(id) if field("payload_was") == Some(text) => {
            st.admin.copy_of(&queue, id).await?.0.payload
        }
        _ => json_payload(text)?,
    };
    let mut opts = EnqueueOptions::new();
    match crate::fields::run_time(&form)? {
        Some(RunTime::At(at)) => opts = opts.process_at(at),
        Some(RunTime::In(d)) => opts = opts.process_in(d),
        None => {}
    }
    if let Some(level) = crate::fields::level(&form)? {
        opts = opts.priority(level);
    }
    if let Some(n) = field("max_retry") {
        let n: u32 = n
            .parse()
            .map_err(|_| invalid(format!("max retry {n:?}: write a whole number")))?;
        opts = opts.max_retry(n);
    }
    if let Some(t) = field("timeout") {
        let d = parse_duration(t)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| invalid(format!("timeout {t:?}: write a duration like 30s or 5m")))?;
        opts = opts.timeout(d);
    }
    if let Some(id) = field("task_id") {
        opts = opts.task_id(id);
    }
    let info = st.admin.enqueue_raw(&queue, kind, payload, opts).await?;
    tracing::info!(who = %who, queue = %queue, task_id = %info.id, kind, copied_from = ?from, "console: task enqueued");
    let msg = match from {
        Some(src) => format!("Task {} enqueued, a copy of {src}.", info.id),
        None => format!("Task {} enqueued.", info.id),
    };
    Ok(back_with(&st, &task_href(&queue, &info.id), &msg))
}
