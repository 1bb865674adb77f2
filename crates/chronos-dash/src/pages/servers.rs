//! Live worker processes: their queues, concurrency and the tasks each runs.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;
use maud::html;

use super::{layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{queue_href, task_href};
use crate::state::AppState;

pub(crate) async fn page(State(st): State<Arc<AppState>>) -> Result<Html<String>, PageError> {
    let mut servers = st.admin.servers().await?;
    servers.sort_by(|a, b| a.host.cmp(&b.host).then(a.pid.cmp(&b.pid)));
    let now = format::now_ms();
    let running: u64 = servers.iter().map(|s| u64::from(s.running)).sum();
    let slots: u64 = servers.iter().map(|s| u64::from(s.concurrency)).sum();
    let body = html! {
        h1 { "Servers" }
        p.muted { (servers.len()) " live, running " (running) " of " (slots) " slots" }
        @if servers.is_empty() {
            p.muted #no-servers { "No live worker server." }
        } @else {
            table.grid #servers {
                thead {
                    tr {
                        th { "id" } th { "host" } th.num { "pid" } th { "queues (weight)" }
                        th.num { "running" } th.num { "concurrency" } th { "started" } th { "last seen" }
                    }
                }
                tbody {
                    @for s in &servers {
                        tr {
                            td.mono { (s.id) }
                            td { (s.host) }
                            td.num { (s.pid) }
                            td {
                                @for (i, (q, w)) in s.queues.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    a href=(queue_href(q)) { (q) } " (" (w) ")"
                                }
                            }
                            td.num { (s.running) }
                            td.num { (s.concurrency) }
                            td.time title=(format::time(s.started_at_ms)) { (format::relative(s.started_at_ms, now)) }
                            td.time title=(format::time(s.last_seen_ms)) { (format::relative(s.last_seen_ms, now)) }
                        }
                    }
                }
            }
            h2 { "Running tasks" }
            @if servers.iter().all(|s| s.tasks.is_empty()) {
                p.muted #no-running { "No task running (as of each server's last heartbeat)." }
            } @else {
                p.muted { "As each server published them at its last heartbeat, longest running first (at most " (chronos_broker::RUNNING_LISTED) " per server)." }
                table.grid #running {
                    thead {
                        tr { th { "server" } th { "queue" } th { "task" } th { "kind" } th { "started" } th.num { "running for" } }
                    }
                    tbody {
                        @for s in &servers {
                            @for t in &s.tasks {
                                tr data-server=(s.id) data-id=(t.id) {
                                    td.mono { (s.id) }
                                    td { a href=(queue_href(&t.queue)) { (t.queue) } }
                                    td.mono { a href=(task_href(&t.queue, &t.id)) { (t.id) } }
                                    td { (t.kind) }
                                    td.time title=(format::time(t.started_at_ms)) { (format::relative(t.started_at_ms, now)) }
                                    td.num data-f="running-for" { (format::duration(now.saturating_sub(t.started_at_ms).max(0) / 1000)) }
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
        "Servers",
        Nav::Servers,
        "servers",
        &[],
        None,
        body,
    ))
}
