//! A queue's deduplication locks (`/queues/{queue}/locks`): each key with the task holding it,
//! that task's state and the time left, and (unless read-only) a button that releases it
//! (posted to `actions::release_lock`). Its own page, reached from the queue page's tabs, so
//! the queue page never pays for the SCAN it takes.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use maud::html;
use serde::Deserialize;

use super::{csrf, layout, Nav};
use crate::error::PageError;
use crate::href::{encode, queue_href, task_href};
use crate::state::AppState;

/// Locks the page lists at most (sorted by key).
const LISTED: usize = 200;

/// What the page reads from its URL: a notice written by the release action.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    pub(crate) msg: Option<String>,
    pub(crate) sig: Option<String>,
}

/// The path of a queue's locks page.
pub(crate) fn locks_href(queue: &str) -> String {
    format!("/queues/{}/locks", encode(queue))
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let locks = st.admin.dedup_locks(&queue, LISTED).await?;
    let here = locks_href(&queue);
    let body = html! {
        h1 { "Queue " a href=(queue_href(&queue)) { (queue) } ": deduplication locks" }
        p.muted {
            "A task enqueued with a deduplication key (or unique) holds its key until the lock is released "
            "(on start, on finish or at expiry, as it asked); an enqueue with a held key answers with its holder. "
            "Releasing a lock lets the next enqueue create a task; the holder keeps running. "
            "#<hash>: a lock on kind and payload."
        }
        @if locks.is_empty() {
            p.muted #no-locks { "No lock held." }
        } @else {
            table #locks.grid {
                thead { tr { th { "key" } th { "holder" } th { "state" } th { "expires in" } th { } } }
                tbody {
                    @for l in &locks {
                        tr data-key=(l.key) {
                            td.mono { (l.key) }
                            td.mono { a href=(task_href(&queue, &l.holder)) { (l.holder) } }
                            td { (l.holder_state.map(|s| s.as_str()).unwrap_or("gone")) }
                            td { (l.expires_in_ms.map(|ms| format!("{:.1} s", ms as f64 / 1000.0)).unwrap_or_else(|| "never".into())) }
                            td.actions {
                                @if !st.config.read_only {
                                    form.inline method="post" action={(queue_href(&queue)) "/locks/release"} {
                                        (csrf(&st))
                                        input type="hidden" name="back" value=(here);
                                        input type="hidden" name="key" value=(l.key);
                                        input type="hidden" name="holder" value=(l.holder);
                                        button.small type="submit" data-release=(l.key) { "release" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if locks.len() >= LISTED {
                p.muted { "The first " (LISTED) " by key; `chronos dedup ls` lists more." }
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Locks of {queue}"),
        Nav::None,
        "locks",
        &[("arg", queue.clone())],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}
