//! Chains and groups: the flow card of a task's page (each step of its chain with its state,
//! or its group's counts and callback), and a group's own page
//! (`/queues/{queue}/groups/{id}`, the queue being the callback's): counts, the callback and
//! each finished member's outcome.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_admin::{ChainView, FlowView, GroupView};
use maud::{html, Markup};

use super::{layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{encode, queue_href, task_href};
use crate::state::AppState;

/// Member outcomes a group page lists at most.
const MEMBERS_LISTED: usize = 500;

/// The path of a group's page (`members`: the queue its members' links go to, when known).
pub(crate) fn group_href(queue: &str, id: &str, members: Option<&str>) -> String {
    let mut href = format!("/queues/{}/groups/{}", encode(queue), encode(id));
    if let Some(m) = members {
        href.push_str(&format!("?members={}", encode(m)));
    }
    href
}

#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Params {
    /// The queue of the members (the task page of a member knows it).
    members: Option<String>,
}

/// The cards of the flows a task of `queue` belongs to (nothing for a plain task).
pub(crate) fn cards(queue: &str, flows: &[FlowView]) -> Markup {
    html! {
        @for f in flows {
            @match f {
                FlowView::Chain(c) => { (chain_card(c)) }
                FlowView::Group(g) => {
                    // A member's page knows where the members go; a callback's does not.
                    @let members = g.member.is_some().then_some(queue);
                    div.card.wide.flow #group-card { (group_summary(g, Some(members))) }
                }
            }
        }
    }
}

fn chain_card(c: &ChainView) -> Markup {
    html! {
        div.card.wide.flow #chain-card {
            h2 { "Chain " span.mono { (c.id) } }
            p #chain-status { "step " (c.step + 1) " of " (c.total) " · " strong { (c.status) } }
            table.grid #chain-steps {
                thead { tr { th.num { "step" } th { "task" } th { "queue" } th { "state" } } }
                tbody {
                    @for s in &c.steps {
                        tr data-step=(s.index) .current[s.index == c.step] {
                            td.num { (s.index + 1) }
                            td.mono {
                                @if s.state.as_deref().is_some_and(|st| st != "gone") {
                                    a href=(task_href(&s.queue, &s.task_id)) { (s.task_id) }
                                } @else { (s.task_id) }
                            }
                            td { (s.queue) }
                            td data-f="state" {
                                @match s.state.as_deref() {
                                    None => { span.muted { "not enqueued yet" } }
                                    Some("gone") => { span.muted title="no record here: expired, deleted, or in another queue" { "gone" } }
                                    Some(st) => { span.badge data-state=(st) { (st) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `link`: a link to the group's page (with its members' queue, when known).
fn group_summary(g: &GroupView, link: Option<Option<&str>>) -> Markup {
    let done = g.succeeded + g.failed;
    html! {
        h2 {
            "Group " span.mono { (g.id) }
            @if let Some(i) = g.member { " " span.muted { "(member " (i) ")" } }
        }
        @if g.total == 0 {
            p.muted #group-gone { "No record of this group (expired after its callback ran, or never opened)." }
        } @else {
            p #group-counts {
                (format::thousands(done)) " of " (format::thousands(g.total)) " members done: "
                span.ok-text data-f="succeeded" { (format::thousands(g.succeeded)) " succeeded" } ", "
                span.error data-f="failed" { (format::thousands(g.failed)) " failed" }
            }
            progress #group-progress max=(g.total) value=(done) {}
        }
        p #group-callback {
            "callback "
            @match g.callback_state.as_deref() {
                None => { span.mono { (g.callback_id) } " " span.muted { "(enqueued when every member is done)" } }
                Some("gone") => { span.mono { (g.callback_id) } " " span.muted { "gone" } }
                Some(st) => { a.mono href=(task_href(&g.queue, &g.callback_id)) { (g.callback_id) } " " span.badge data-state=(st) { (st) } }
            }
        }
        @if let Some(members) = link {
            p { a #group-link href=(group_href(&g.queue, &g.id, members)) { "the group's page »" } }
        }
    }
}

pub(crate) async fn group_page(
    State(st): State<Arc<AppState>>,
    Path((queue, id)): Path<(String, String)>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let members_queue = p
        .members
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| queue.clone());
    let (g, members) = tokio::try_join!(
        st.admin.group_view(&queue, &id, None, false),
        st.admin.group_members(&queue, &id, MEMBERS_LISTED),
    )?;
    let body = html! {
        p.crumbs { a href=(queue_href(&queue)) { "queue " (queue) } " / group" }
        section.cards { div.card.wide { (group_summary(&g, None)) } }
        h2 { "Members done" }
        @if members.is_empty() {
            p.muted #no-members { "No member has finished yet, or the group's record is gone." }
        } @else {
            p.muted { "Each member's outcome as the group kept it (the first " (MEMBERS_LISTED) " by index); their tasks in queue " (members_queue) "." }
            table.grid #members {
                thead { tr { th.num { "member" } th { "task" } th { "outcome" } } }
                tbody {
                    @for m in &members {
                        tr data-member=(m.index) {
                            td.num { (m.index) }
                            td.mono { a href=(task_href(&members_queue, &m.task_id)) { (m.task_id) } }
                            td {
                                @match &m.error {
                                    None => { span.badge.ok { "succeeded" } }
                                    Some(e) => { span.error { "failed: " (e) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(
        &st,
        &format!("Group {id}"),
        Nav::None,
        "group",
        &[],
        None,
        body,
    ))
}
