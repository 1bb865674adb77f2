//! The overview: every queue's counts, rates and latency, the throughput chart, the Redis.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Html;
use maud::{html, Markup};
use serde::Deserialize;

use super::{csrf, layout, Nav};
use crate::api::overview_data;
use crate::error::PageError;
use crate::format;
use crate::href::queue_href;
use crate::live::QueueLive;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    msg: Option<String>,
    sig: Option<String>,
}

pub(crate) async fn page(
    State(state): State<Arc<AppState>>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let d = overview_data(&state, true).await?;
    // An empty namespace is most often the wrong one: say where queues are (a bounded scan, only
    // when there is nothing to show).
    let elsewhere = if d.queues.is_empty() {
        state.admin.other_namespaces().await
    } else {
        Vec::new()
    };
    let body = html! {
        h1 { "Overview" }
        @if d.queues.is_empty() {
            p.notice #empty-namespace {
                "Namespace " code { (state.admin.broker().keyspace().namespace()) } " holds no queue."
                @if !elsewhere.is_empty() {
                    " Namespaces with queues on this Redis: " (elsewhere.join(", "))
                    " (start the console with --namespace)."
                }
            }
        }
        section.cards {
            div.card {
                h2 { "Tasks" }
                dl {
                    dt { "pending" } dd data-total="pending" { (format::thousands(d.total.row.pending)) }
                    dt { "active" } dd data-total="active" { (format::thousands(d.total.row.active)) }
                    dt { "processed/min" } dd data-total="processed_per_min" { (format::rate(d.total.processed_per_min)) }
                    dt { "failed/min" } dd data-total="failed_per_min" { (format::rate(d.total.failed_per_min)) }
                }
            }
            div.card {
                h2 { "Cluster" }
                dl {
                    dt { "servers" } dd data-total="servers" { a href="/servers" { (d.servers) } }
                    dt { "schedules" } dd data-total="schedules" { a href="/schedules" { (d.schedules) } }
                    dt { "leader" }
                    dd data-total="leader" {
                        @match &d.leader {
                            Some(l) => { (l.id) " (epoch " (l.epoch) ")" }
                            None => { span.muted { "none" } }
                        }
                    }
                }
            }
            div.card #redis {
                h2 { "Redis" }
                dl {
                    dt { "version" } dd { (d.redis.version) " " span.muted { (d.redis.mode) } }
                    dt { "memory" }
                    dd data-total="memory" {
                        (format::bytes(d.redis.used_memory))
                        @if d.redis.maxmemory > 0 { " of " (format::bytes(d.redis.maxmemory)) }
                    }
                    dt { "clients" } dd data-total="clients" { (d.redis.connected_clients) }
                    dt { "uptime" } dd { (format::duration(d.redis.uptime_seconds as i64)) }
                }
            }
        }
        section {
            h2 { "Throughput, last hour " span.muted { "(per minute)" } }
            div.chart #chart data-queue="" {
                p.muted { "loading…" }
            }
        }
        section {
            h2 { "Queues" }
            @if d.queues.is_empty() {
                p.muted #no-queues { "No queue yet: a worker or a producer creates one." }
            } @else {
                (queue_table(&state, &d.queues, &d.total))
            }
        }
    };
    Ok(layout(
        &state,
        "Overview",
        Nav::Overview,
        "overview",
        &[],
        state.notice(&p.msg, &p.sig),
        body,
    ))
}

fn queue_table(state: &AppState, queues: &[QueueLive], total: &QueueLive) -> Markup {
    html! {
        table #queues.grid {
            thead {
                tr {
                    th { "queue" }
                    th.num { "pending" } th.num { "active" } th.num { "scheduled" }
                    th.num { "retry" } th.num { "archived" } th.num { "completed" }
                    th.num { "processed/min" } th.num { "failed/min" } th.num { "oldest pending" }
                    @if !state.config.read_only { th { } }
                }
            }
            tbody {
                @for q in queues {
                    (queue_row(state, q))
                }
            }
            tfoot {
                tr data-q="" {
                    th { "total" }
                    td.num data-f="pending" { (format::thousands(total.row.pending)) }
                    td.num data-f="active" { (format::thousands(total.row.active)) }
                    td.num data-f="scheduled" { (format::thousands(total.row.scheduled)) }
                    td.num data-f="retry" { (format::thousands(total.row.retry)) }
                    td.num data-f="archived" { (format::thousands(total.row.archived)) }
                    td.num data-f="completed" { (format::thousands(total.row.completed)) }
                    td.num data-f="processed_per_min" { (format::rate(total.processed_per_min)) }
                    td.num data-f="failed_per_min" { (format::rate(total.failed_per_min)) }
                    td.num data-f="oldest_pending_s" { (age(total.oldest_pending_s)) }
                    @if !state.config.read_only { td { } }
                }
            }
        }
    }
}

fn queue_row(state: &AppState, q: &QueueLive) -> Markup {
    let r = &q.row;
    html! {
        tr data-q=(r.name) {
            td {
                a href=(queue_href(&r.name)) { (r.name) }
                @if r.paused { " " span.badge.paused { "paused" } }
            }
            td.num data-f="pending" { (format::thousands(r.pending)) }
            td.num data-f="active" { (format::thousands(r.active)) }
            td.num data-f="scheduled" { (format::thousands(r.scheduled)) }
            td.num data-f="retry" { (format::thousands(r.retry)) }
            td.num data-f="archived" { (format::thousands(r.archived)) }
            td.num data-f="completed" { (format::thousands(r.completed)) }
            td.num data-f="processed_per_min" { (format::rate(q.processed_per_min)) }
            td.num data-f="failed_per_min" { (format::rate(q.failed_per_min)) }
            td.num data-f="oldest_pending_s" { (age(q.oldest_pending_s)) }
            @if !state.config.read_only {
                td {
                    form.inline method="post" action={(queue_href(&r.name)) "/" (if r.paused { "resume" } else { "pause" })} {
                        (csrf(state))
                        input type="hidden" name="back" value="/";
                        button.small type="submit" { (if r.paused { "resume" } else { "pause" }) }
                    }
                }
            }
        }
    }
}

/// The age label of the oldest waiting task.
pub(crate) fn age(secs: Option<i64>) -> String {
    secs.map_or_else(|| "–".into(), format::duration)
}
