//! A bulk action's progress: what it does, how far it got, and a cancel button while it runs.
//! The page polls its JSON (`/api/jobs/{id}`) and reloads itself when the job ends.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use chronos_admin::verb;
use maud::html;

use super::{csrf, layout, Nav};
use crate::error::{DashError, PageError};
use crate::format;
use crate::href::encode;
use crate::href::listing_href;
use crate::jobs::{phase, Job, JobView};
use crate::security::{Actor, CheckedForm};
use crate::state::AppState;

/// The path of a job's page.
pub(crate) fn job_href(id: &str) -> String {
    format!("/jobs/{}", encode(id))
}

fn find(st: &AppState, id: &str) -> Result<Arc<Job>, DashError> {
    st.jobs
        .get(id)
        .ok_or_else(|| DashError::NoSuchJob(id.to_string()))
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Html<String>, PageError> {
    let job = find(&st, &id)?;
    let s = job.status();
    let v = job.view();
    let running = s.running();
    let listing = listing_href(&job.queue, job.state, &job.filter, None);
    let expected = if job.expected.exact {
        format::thousands(job.expected.matched)
    } else {
        format!(
            "between {} and {}",
            format::thousands(job.expected.matched),
            format::thousands(job.expected.at_most)
        )
    };
    let body = html! {
        p.crumbs { a href=(listing) { "queue " (job.queue) } " / bulk action" }
        h1 { "Bulk " (verb(job.action)) }
        p #job-what {
            (verb(job.action)) " " (job.state.as_str()) " tasks of queue " (job.queue)
            @if let Some(k) = &job.filter.kind { " of kind " code { (k) } }
            @if let Some(q) = &job.filter.grep { " whose payload contains " code { (q) } }
            ": " (expected) " when confirmed."
        }
        p.muted { "Started " (format::time(job.started_ms)) " by " (job.who) "." }
        div #job data-job=(job.id) data-state=(v.state) {
            progress #job-bar max=(job.expected.at_most.max(s.matched).max(1)) value=(s.done) {}
            p #job-status {
                span.badge #job-state data-f="state" { (phase(&s)) }
                " done " strong data-f="done" { (format::thousands(s.done)) }
                " of " (if job.expected.exact { "" } else { "up to " }) (format::thousands(job.expected.at_most))
                " · found " span data-f="matched" { (format::thousands(s.matched)) }
                " · read " span data-f="scanned" { (format::thousands(s.scanned)) }
                " · left alone " span data-f="skipped" { (format::thousands(s.skipped)) }
                " · running, left to their workers " span data-f="running" { (format::thousands(s.running)) }
                @if s.failed > 0 { " · refused " span data-f="failed" { (format::thousands(s.failed)) } }
                @if !running && s.untouched() > 0 {
                    " · not reached " strong #job-untouched { (format::thousands(s.untouched())) }
                }
            }
            @if s.cancelled {
                p.notice #job-cancelled {
                    "Cancelled after " (format::thousands(s.done)) " task" (if s.done == 1 { "" } else { "s" })
                    "; every other task was left as it was."
                }
            }
            @if let Some(e) = &s.error {
                p.error #job-error { "Stopped by an error: " (e) }
            }
            @if running && !st.config.read_only {
                form #job-cancel-form method="post" action={(job_href(&job.id)) "/cancel"} {
                    (csrf(&st))
                    button.danger type="submit" #job-cancel disabled[v.cancel_requested] {
                        (if v.cancel_requested { "cancelling…" } else { "cancel" })
                    }
                }
            }
            @if !running {
                p { a #job-back href=(listing) { "Back to the queue" } }
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Bulk {} · {}", verb(job.action), job.queue),
        Nav::None,
        "job",
        &[("arg", job.id.clone())],
        None,
        body,
    ))
}

/// The job's progress as JSON, for its page.
pub(crate) async fn api(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, crate::error::ApiError> {
    Ok(Json(find(&st, &id)?.view()))
}

/// Asks the job to stop: it finishes the step in flight and reports what it did.
pub(crate) async fn cancel(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Extension(who): Extension<Actor>,
    _form: CheckedForm,
) -> Result<Response, PageError> {
    let job = find(&st, &id)?;
    let s = job.status();
    if s.running() {
        job.cancel.cancel();
        tracing::info!(
            who = %who,
            job = %job.id,
            queue = %job.queue,
            action = verb(job.action),
            done = s.done,
            "console: bulk action cancel requested"
        );
    }
    Ok(Redirect::to(&job_href(&job.id)).into_response())
}
