//! The POSTs: pause and resume a queue; store its limits (the settings form of its page); store
//! a tenant's settings, pause or resume a tenant (the tenants section of its page); run,
//! delete, archive or cancel one task, a selection, or everything a filter matches (after
//! confirming the count, as a background job with a progress page). Each answers with a
//! redirect back to the page it came from and a one-line notice, and leaves one log line: who,
//! what, how many.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Extension;
use chronos_admin::{parse_state, verb, AdminError};
use chronos_broker::{
    json_payload, parse_duration, Priority, Rate, Setting, SettingsChange, TaskAction, TaskEdit,
    TaskFilter, TenantChange,
};
use futures::StreamExt;
use maud::html;

use crate::error::{DashError, PageError};
use crate::fields::RunTime;
use crate::format;
use crate::href::listing_href;
use crate::href::queue_href;
use crate::notice::back_with;
use crate::pages::job::job_href;
use crate::pages::queue::{parse_action, slug};
use crate::pages::{csrf, layout, Nav};
use crate::security::{Actor, CheckedForm};
use crate::state::AppState;

/// Most tasks one selection may name.
const MAX_SELECTION: usize = 5_000;
/// How far the count before a filtered bulk action reads.
const MAX_COUNT_SCAN: u64 = 100_000;

pub(crate) async fn pause(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    st.admin.set_paused(&queue, true).await?;
    tracing::info!(who = %who, queue = %queue, "console: queue paused");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!("Queue {queue} paused: workers take no new task from it."),
    ))
}

pub(crate) async fn resume(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    st.admin.set_paused(&queue, false).await?;
    tracing::info!(who = %who, queue = %queue, "console: queue resumed");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!("Queue {queue} resumed."),
    ))
}

/// Lifts a handler-signalled block (`TaskError::rate_limited`): the form's `key`'s, or the
/// queue's own when it sends none. Tasks already held back keep their due time.
pub(crate) async fn unblock(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let key = form.get("key").filter(|k| !k.is_empty());
    let lifted = st.admin.unblock(&queue, key).await?;
    tracing::info!(who = %who, queue = %queue, key = ?key, lifted, "console: block lifted");
    let what = match key {
        Some(k) => format!("rate key {k}"),
        None => "the queue".to_string(),
    };
    let msg = if lifted {
        format!("Queue {queue}: the block of {what} is lifted; tasks already held back keep their time.")
    } else {
        format!("Queue {queue}: {what} was not blocked.")
    };
    Ok(back_with(&st, form.get("back").unwrap_or("/"), &msg))
}

/// Releases a deduplication lock (the form's `key`, only while the form's `holder` holds it),
/// so the next enqueue with the key creates a task.
pub(crate) async fn release_lock(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let key = form.get("key").unwrap_or("");
    let holder = form.get("holder").filter(|h| !h.is_empty());
    let released = st.admin.release_dedup_lock(&queue, key, holder).await?;
    tracing::info!(who = %who, queue = %queue, key, holder = ?holder, released, "console: dedup lock released");
    let msg = if released {
        format!("Queue {queue}: lock {key} released; the next enqueue with it creates a task.")
    } else {
        format!("Queue {queue}: lock {key} was not held by that task; nothing released.")
    };
    Ok(back_with(&st, form.get("back").unwrap_or("/"), &msg))
}

/// Turns a queue's event stream on or off (`switch`: `on` or `off`; off deletes its events).
pub(crate) async fn events(
    State(st): State<Arc<AppState>>,
    Path((queue, switch)): Path<(String, String)>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let on = match switch.as_str() {
        "on" => true,
        "off" => false,
        _ => {
            return Err(PageError(DashError::Admin(AdminError::Broker(
                chronos_broker::BrokerError::InvalidOption(format!(
                    "events can be turned on or off, not {switch:?}"
                )),
            ))))
        }
    };
    st.admin.set_events(&queue, on).await?;
    tracing::info!(who = %who, queue = %queue, on, "console: event stream switched");
    let msg = if on {
        format!("Queue {queue}: events on; running servers write them within about a second.")
    } else {
        format!("Queue {queue}: events off; its events and consumer groups are deleted.")
    };
    Ok(back_with(&st, form.get("back").unwrap_or("/"), &msg))
}

/// Stores the settings form of a queue page: each field sent is stored, a field sent blank is
/// removed (each server's configuration applies), `none` lifts a limit, and a field not sent
/// is kept. Nothing is stored when one field is out of range (400, with the reason).
pub(crate) async fn settings(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let change = settings_change(&form).map_err(|e| PageError(DashError::Admin(e)))?;
    let row = st.admin.change_queue_settings(&queue, &change).await?;
    tracing::info!(who = %who, queue = %queue, rate = ?row.rate, burst = ?row.burst, concurrency = ?row.concurrency, per_key_rate = ?row.per_key_rate, aging = ?row.aging, "console: queue settings stored");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!("Queue {queue}: limits saved; running servers apply them within about 2 s."),
    ))
}

/// The change a settings form asks for. Each field: not sent = keep, blank = remove, else the
/// value (`none` lifts a rate or concurrency limit).
fn settings_change(form: &CheckedForm) -> Result<SettingsChange, AdminError> {
    fn each<T>(
        form: &CheckedForm,
        name: &str,
        parse: impl Fn(&str) -> Result<T, AdminError>,
    ) -> Result<Option<Option<T>>, AdminError> {
        match form.get(name).map(str::trim) {
            None => Ok(None),
            Some("") => Ok(Some(None)),
            Some(v) => parse(v).map(|t| Some(Some(t))),
        }
    }
    let number = |name: &'static str| {
        move |v: &str| {
            v.parse::<u32>()
                .map_err(|_| AdminError::Invalid(format!("{name} {v:?}: write a whole number")))
        }
    };
    let rate = |label: &'static str| {
        move |v: &str| match v {
            "none" => Ok(Setting::Off),
            v => Rate::parse(v).map(Setting::On).map_err(|_| {
                AdminError::Invalid(format!(
                    "{label} {v:?}: write <n>/<period> like 100/1s, or none"
                ))
            }),
        }
    };
    let concurrency = |v: &str| match v {
        "none" => Ok(Setting::Off),
        v => number("concurrency")(v).map(Setting::On),
    };
    let aging = |v: &str| {
        parse_duration(v).ok_or_else(|| {
            AdminError::Invalid(format!("aging {v:?}: write a duration like 60s, 5m or 1h"))
        })
    };
    Ok(SettingsChange {
        rate: each(form, "rate", rate("rate"))?,
        burst: each(form, "burst", number("burst"))?,
        concurrency: each(form, "concurrency", concurrency)?,
        per_key_rate: each(form, "per_key_rate", rate("per-key rate"))?,
        aging: each(form, "aging", aging)?,
        retry_level: each(form, "retry_level", |v: &str| {
            v.parse::<Priority>()
                .map_err(|e| AdminError::Invalid(format!("retry level {v:?}: {e}")))
        })?,
    })
}

/// The tenant a tenants form names: None (blank or not sent) for the default for all tenants.
fn form_tenant(form: &CheckedForm) -> Option<&str> {
    form.get("tenant").map(str::trim).filter(|t| !t.is_empty())
}

/// "tenant acme" or "the default for all tenants", for a notice.
fn tenant_words(tenant: Option<&str>) -> String {
    tenant.map_or_else(
        || "the default for all tenants".to_string(),
        |t| format!("tenant {t}"),
    )
}

/// Stores the tenants form of a queue page: each field sent is stored, a field sent blank is
/// removed (the default's value applies to a tenant, the built-in one to the default), and a
/// field not sent is kept. Nothing is stored when one field is out of range (400, with the
/// reason).
pub(crate) async fn tenant_settings(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let tenant = form_tenant(&form);
    let change = tenant_change(&form).map_err(|e| PageError(DashError::Admin(e)))?;
    let done = st.admin.change_tenant(&queue, tenant, &change).await?;
    let s = &done.settings;
    tracing::info!(who = %who, queue = %queue, tenant = ?tenant, weight = ?s.weight, concurrency = ?s.concurrency, backlog = ?s.backlog, "console: tenant settings stored");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!(
            "Queue {queue}: settings of {} saved; running servers apply them at their next fetch.",
            tenant_words(tenant)
        ),
    ))
}

/// The change a tenants form asks for. Each field: not sent = keep, blank = remove, else a
/// whole number.
fn tenant_change(form: &CheckedForm) -> Result<TenantChange, AdminError> {
    fn each<T: std::str::FromStr>(
        form: &CheckedForm,
        name: &str,
    ) -> Result<Option<Option<T>>, AdminError> {
        match form.get(name).map(str::trim) {
            None => Ok(None),
            Some("") => Ok(Some(None)),
            Some(v) => v
                .parse()
                .map(|n| Some(Some(n)))
                .map_err(|_| AdminError::Invalid(format!("{name} {v:?}: write a whole number"))),
        }
    }
    let mut c = TenantChange::new();
    if let Some(w) = each(form, "weight")? {
        c = c.weight(w);
    }
    if let Some(n) = each(form, "concurrency")? {
        c = c.concurrency(n);
    }
    if let Some(n) = each(form, "backlog")? {
        c = c.backlog(n);
    }
    Ok(c)
}

pub(crate) async fn tenant_pause(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let tenant = form_tenant(&form);
    st.admin.pause_tenant(&queue, tenant).await?;
    tracing::info!(who = %who, queue = %queue, tenant = ?tenant, "console: tenant paused");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!(
            "Queue {queue}: {} paused; its waiting tasks start when it is resumed.",
            tenant_words(tenant)
        ),
    ))
}

pub(crate) async fn tenant_resume(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let tenant = form_tenant(&form);
    st.admin.resume_tenant(&queue, tenant).await?;
    tracing::info!(who = %who, queue = %queue, tenant = ?tenant, "console: tenant resumed");
    Ok(back_with(
        &st,
        form.get("back").unwrap_or("/"),
        &format!("Queue {queue}: {} resumed.", tenant_words(tenant)),
    ))
}

pub(crate) async fn one(
    State(st): State<Arc<AppState>>,
    Path((queue, id, action)): Path<(String, String, String)>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    if action == "prioritize" {
        return prioritize(&st, &queue, &id, &who, &form).await;
    }
    if action == "edit" {
        return edit(&st, &queue, &id, &who, &form).await;
    }
    let action = action_or_400(&action)?;
    let changed = st.admin.act(&queue, &id, action).await?;
    tracing::info!(who = %who, queue = %queue, task_id = %id, action = slug(action), changed, "console: task action");
    let msg = if changed {
        format!("Task {id}: {} done.", verb(action))
    } else {
        format!("Task {id}: nothing to {} (already done).", verb(action))
    };
    let mut back = form.get("back").unwrap_or("/").to_string();
    // A deleted task has no page left to go back to.
    if action == TaskAction::Delete && back.contains("/tasks/") {
        back = queue_href(&queue);
    }
    Ok(back_with(&st, &back, &msg))
}

/// The task page's priority form: gives the task the level the form names.
async fn prioritize(
    st: &AppState,
    queue: &str,
    id: &str,
    who: &Actor,
    form: &CheckedForm,
) -> Result<Response, PageError> {
    let level: Priority =
        form.get("level")
            .unwrap_or("")
            .parse()
            .map_err(|e: chronos_broker::BrokerError| {
                PageError(DashError::Admin(AdminError::Invalid(e.to_string())))
            })?;
    let changed = st.admin.prioritize(queue, id, level).await?;
    tracing::info!(who = %who, queue = %queue, task_id = %id, level = level.get(), changed, "console: task prioritized");
    let msg = if changed {
        format!("Task {id}: priority level {level} set.")
    } else {
        format!("Task {id}: already at priority level {level}.")
    };
    Ok(back_with(st, form.get("back").unwrap_or("/"), &msg))
}

/// The task page's edit form: a new payload (only when the JSON differs from what the page
/// showed, field `payload_was`: an untouched form must not move a pending task), a run time
/// (`at`, RFC 3339 or the browser's date and time, read as UTC; or `in`, a delay) and a level
/// (empty: unchanged), applied in one atomic step.
async fn edit(
    st: &AppState,
    queue: &str,
    id: &str,
    who: &Actor,
    form: &CheckedForm,
) -> Result<Response, PageError> {
    let invalid = |m: String| PageError(DashError::Admin(AdminError::Invalid(m)));
    let field = |name: &str| crate::fields::given(form, name);
    let mut edit = TaskEdit::new();
    let mut new_payload = false;
    if let Some(text) = field("payload") {
        let typed: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("the payload is not JSON: {e}")))?;
        let was = field("payload_was").and_then(|w| serde_json::from_str(w).ok());
        if was.as_ref() != Some(&typed) {
            edit = edit.payload(json_payload(text)?);
            new_payload = true;
        }
    }
    match crate::fields::run_time(form)? {
        Some(RunTime::At(at)) => edit = edit.run_at(at),
        Some(RunTime::In(d)) => edit = edit.run_in(d),
        None => {}
    }
    if let Some(level) = crate::fields::level(form)? {
        edit = edit.priority(level);
    }
    let back = form.get("back").unwrap_or("/");
    if edit.is_empty() {
        return Ok(back_with(
            st,
            back,
            &format!("Task {id}: nothing to change."),
        ));
    }
    let changed = st.admin.edit(queue, id, &edit).await?;
    tracing::info!(
        who = %who,
        queue = %queue,
        task_id = %id,
        payload = new_payload,
        run_at = ?field("at").or(field("in")),
        level = ?edit.new_priority().map(Priority::get),
        changed,
        "console: task edited"
    );
    let msg = if changed {
        format!("Task {id}: edited.")
    } else {
        format!("Task {id}: already as asked, nothing changed.")
    };
    Ok(back_with(st, back, &msg))
}

pub(crate) async fn selection(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let action = action_or_400(form.get("action").unwrap_or(""))?;
    let ids = form.all("id");
    let back = form.get("back").unwrap_or("/");
    if ids.is_empty() {
        return Ok(back_with(&st, back, "Nothing selected."));
    }
    if ids.len() > MAX_SELECTION {
        return Err(PageError(DashError::Admin(AdminError::Invalid(format!(
            "{} tasks selected; at most {MAX_SELECTION} (use the action on everything matching the filter)",
            ids.len()
        )))));
    }
    // An unknown queue is one 404, not 5,000 refusals.
    st.admin.require_queue(&queue).await?;
    let owned: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    let results: Vec<Result<bool, AdminError>> = futures::stream::iter(owned)
        .map(|id| {
            let (st, queue) = (st.clone(), queue.clone());
            async move { st.admin.act(&queue, &id, action).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    // A selected task deleted meanwhile (by a worker finishing it, or another operator) is
    // what the operator wanted: counted as already done, not as refused.
    let gone = |r: &Result<bool, AdminError>| {
        action == TaskAction::Delete && matches!(r, Err(AdminError::TaskNotFound { .. }))
    };
    let done = results.iter().filter(|r| matches!(r, Ok(true))).count();
    let already = results
        .iter()
        .filter(|r| matches!(r, Ok(false)) || gone(r))
        .count();
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !gone(r))
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    tracing::info!(who = %who, queue = %queue, action = slug(action), selected = ids.len(), done, already, failed = failed.len(), "console: selection action");
    let mut msg = format!(
        "{}: {done} of {} selected tasks done",
        verb(action),
        ids.len()
    );
    if already > 0 {
        msg.push_str(&format!(", {already} already done"));
    }
    if let Some(first) = failed.first() {
        msg.push_str(&format!(", {} refused (first: {first})", failed.len()));
    }
    msg.push('.');
    Ok(back_with(&st, back, &msg))
}

/// First POST: counts what the action would take and asks to confirm that count (a range when
/// counting stopped early). Second POST (with `confirm` = the count shown): starts it as a
/// background job and answers with the job's progress page.
pub(crate) async fn bulk(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Extension(who): Extension<Actor>,
    form: CheckedForm,
) -> Result<Response, PageError> {
    let action = action_or_400(form.get("action").unwrap_or(""))?;
    let state = parse_state(form.get("state").unwrap_or(""))?;
    let filter = TaskFilter {
        kind: form
            .get("kind")
            .filter(|k| !k.trim().is_empty())
            .map(str::to_string),
        grep: form.get("q").filter(|q| !q.is_empty()).map(str::to_string),
        error: form
            .get("error")
            .filter(|e| !e.is_empty())
            .map(str::to_string),
    };
    if !action.sources().contains(&state) {
        return Err(PageError(DashError::Admin(AdminError::Invalid(format!(
            "cannot {} {} tasks",
            verb(action),
            state.as_str()
        )))));
    }
    let listing = listing_href(&queue, state, &filter, None);
    let confirmed: Option<u64> = form.get("confirm").and_then(|c| c.parse().ok());
    let count = st
        .admin
        .count_matching(&queue, state, &filter, MAX_COUNT_SCAN)
        .await?;
    // The count confirmed is the promise: when more match now than the operator saw, ask again
    // with the new count. (A count that stopped at its scan bound was shown as "at least".)
    let grew = confirmed.is_some_and(|c| count.matched > c);
    if confirmed.is_none() || grew {
        let n = if count.exact {
            format::thousands(count.matched)
        } else {
            format!(
                "between {} and {}",
                format::thousands(count.matched),
                format::thousands(count.at_most)
            )
        };
        let button = if count.exact {
            format!("{} {}", verb(action), format::thousands(count.matched))
        } else {
            format!(
                "{} up to {}",
                verb(action),
                format::thousands(count.at_most)
            )
        };
        // An archive adds to the set the dead letters are in, which the servers' janitor keeps
        // under its cap by deleting the oldest: say what this one will delete before it runs.
        let cap = if action == TaskAction::Archive {
            st.admin.archive_cap(&queue).await.ok()
        } else {
            None
        };
        let body = html! {
            h1 { "Confirm" }
            @if let (true, Some(c)) = (grew, confirmed) {
                p.notice #count-changed { "The count changed since you asked: " (format::thousands(c)) " then, " (n) " now." }
            }
            p #confirm-text {
                (verb(action)) " " strong #confirm-count { (n) } " " (state.as_str()) " task"
                (if count.at_most == 1 { "" } else { "s" }) " of queue " (queue)
                @if !filter.is_empty() {
                    " matching"
                    @if let Some(k) = &filter.kind { " kind " code { (k) } }
                    @if let Some(q) = &filter.grep { " payload containing " code { (q) } }
                }
                "?"
            }
            @if !count.exact {
                p.muted #count-partial {
                    "Counting stopped after reading " (format::thousands(count.scanned)) " of the "
                    (format::thousands(count.in_state)) " " (state.as_str()) " tasks: "
                    (format::thousands(count.matched)) " matched so far; the rest is not counted. "
                    "The action goes through all of them and shows its progress as it goes."
                }
            }
            @if let Some(cap) = cap {
                @let deleted = cap.deleted_after(count.at_most);
                @if deleted > 0 {
                    p.notice #archive-cap {
                        "The archive of queue " (queue) " keeps at most " strong { (format::thousands(cap.max)) }
                        " tasks (" (cap.source()) ") and holds " (format::thousands(cap.archived)) " now: "
                        "archiving these makes the janitor delete the oldest "
                        strong #archive-cap-deletes { (format::thousands(deleted)) }
                        " archived tasks within a minute, dead letters among them. "
                        "Delete what need not be kept instead, or raise archive_max."
                    }
                } @else {
                    p.muted #archive-cap {
                        "The archive of queue " (queue) " holds " (format::thousands(cap.archived))
                        " of at most " (format::thousands(cap.max)) " tasks (" (cap.source())
                        "); past that the janitor deletes the oldest."
                    }
                }
            }
            p.muted { "It runs in the background with a progress page and can be cancelled. Tasks that reach this state while it runs may be included too." }
            form #confirm-form method="post" action={(queue_href(&queue)) "/bulk"} {
                (csrf(&st))
                input type="hidden" name="action" value=(slug(action));
                input type="hidden" name="state" value=(state.as_str());
                input type="hidden" name="kind" value=(filter.kind.clone().unwrap_or_default());
                input type="hidden" name="q" value=(filter.grep.clone().unwrap_or_default());
                input type="hidden" name="error" value=(filter.error.clone().unwrap_or_default());
                input type="hidden" name="confirm" value=(count.matched);
                button.danger type="submit" #confirm { (button) }
                " "
                a href=(listing) { "cancel" }
            }
        };
        return Ok(confirm_page(&st, &queue, body).into_response());
    }
    let job = st
        .jobs
        .start(
            &st.admin,
            &st.config,
            &queue,
            state,
            filter,
            action,
            count,
            who.to_string(),
        )
        .map_err(|_| PageError(DashError::Busy))?;
    tracing::info!(
        who = %who,
        job = %job.id,
        queue = %queue,
        action = slug(action),
        state = state.as_str(),
        expected = count.matched,
        expected_at_most = count.at_most,
        "console: bulk action started"
    );
    Ok(Redirect::to(&job_href(&job.id)).into_response())
}

fn confirm_page(st: &AppState, queue: &str, body: maud::Markup) -> Html<String> {
    layout(
        st,
        &format!("Confirm · {queue}"),
        Nav::None,
        "confirm",
        &[],
        None,
        body,
    )
}

fn action_or_400(s: &str) -> Result<TaskAction, PageError> {
    parse_action(s).ok_or_else(|| {
        PageError(DashError::Admin(AdminError::Invalid(format!(
            "unknown action {s:?} (run, delete, archive, cancel)"
        ))))
    })
}
