//! Every registered schedule (also those that never fired), the leader and the trigger counters.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Html;
use chronos_broker::Schedules;
use maud::{html, Markup};
use serde::Deserialize;

use super::{layout, Nav};
use crate::error::{DashError, PageError};
use crate::format;
use crate::href::{queue_href, schedule_href, task_href};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    msg: Option<String>,
    sig: Option<String>,
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let (schedules, leader, counters) = tokio::try_join!(
        async { st.admin.schedules().await.map_err(DashError::from) },
        async { st.admin.leader().await.map_err(DashError::from) },
        async {
            st.admin
                .broker()
                .scheduler_metrics()
                .await
                .map_err(DashError::from)
        },
    )?;
    let now = format::now_ms();
    let overdue = st.admin.overdue_schedules(&schedules, now).await?;
    let body = html! {
        h1 { "Schedules" }
        section.cards {
            div.card #leader {
                h2 { "Leader" }
                @match &leader {
                    Some(l) => {
                        dl {
                            dt { "instance" } dd.mono { (l.id) }
                            dt { "epoch" } dd { (l.epoch) }
                            dt { "since" } dd { span title=(format::time(l.since_ms)) { (format::relative(l.since_ms, now)) } }
                        }
                    }
                    None => { p.muted { "No scheduler leads now (none running, or a failover under way)." } }
                }
            }
            div.card #triggers {
                h2 { "Triggers, whole cluster" }
                dl {
                    dt { "fired" } dd { (format::thousands(counters.fired)) }
                    dt { "missed" } dd title="skipped by a misfire policy during catch-up" { (format::thousands(counters.missed)) }
                    dt { "suppressed" } dd title="duplicates or held back by the overlap policy" { (format::thousands(counters.suppressed)) }
                }
            }
        }
        @if schedules.is_empty() {
            p.muted #no-schedules { "No schedule registered: a scheduler registers its schedules when it starts, and `chronos schedule add` stores one at run time." }
        } @else {
            table.grid #schedules {
                thead {
                    tr {
                        th { "id" } th { "kind" } th { "queue" } th { "spec" } th { "zone" }
                        th { "next run" } th { "last fired" } th { "last task" } th { "registered by" } th { "source" } th { "status" }
                    }
                }
                tbody {
                    @for s in &schedules {
                        tr data-id=(s.id) {
                            td.mono { a href=(schedule_href(&s.id)) { (s.id) } }
                            td { (s.kind) }
                            td { a href=(queue_href(&s.queue)) { (s.queue) } }
                            td.mono { (s.spec) }
                            td { (s.zone) }
                            td.time data-f="next" {
                                @match next_run(s, now) {
                                    Some(ms) => { span title=(format::time(ms)) { (format::relative(ms, now)) } }
                                    None => { span.muted { "–" } }
                                }
                            }
                            td.time {
                                @match s.last_fired_ms {
                                    Some(ms) => { span title=(format::time(ms)) { (format::relative(ms, now)) } }
                                    None => { span.muted { "never" } }
                                }
                            }
                            td.mono {
                                @if let Some(id) = &s.last_task_id { a href=(task_href(&s.queue, id)) { (id) } }
                            }
                            td.mono { (s.registered_by) }
                            td data-f="source" title=(source_title(s.source)) { (s.source.as_str()) }
                            td { (status(s, overdue.contains_key(&s.id))) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(
        &st,
        "Schedules",
        Nav::Schedules,
        "schedules",
        &[],
        st.notice(&p.msg, &p.sig),
        body,
    ))
}

/// A schedule's status badge: paused, overdue (a trigger fell due and was not fired), stale (no
/// instance that registers it seen lately) or live.
pub(crate) fn status(s: &chronos_broker::ScheduleEntry, overdue: bool) -> Markup {
    html! {
        @if s.paused {
            span.badge.stale data-status="paused" title="a paused runtime schedule fires nothing until resumed" { "paused" }
        } @else if overdue {
            span.badge.paused data-status="overdue" title="a trigger fell due more than a minute ago and was not fired" { "overdue" }
        } @else if s.stale {
            span.badge.stale data-status="stale" title={"no instance registering it was seen since " (format::time(s.last_seen_ms))} { "stale" }
        } @else {
            span.badge.ok data-status="live" { "live" }
        }
    }
}

/// The next trigger after `now`: recomputed for intervals (their stored value can lie in the
/// past), as published for cron.
pub(crate) fn next_run(s: &chronos_broker::ScheduleEntry, now: i64) -> Option<i64> {
    if s.paused {
        return None;
    }
    match s.every_ms {
        Some(every) if every > 0 => {
            let every = i64::try_from(every).ok()?;
            Some((now.div_euclid(every) + 1) * every)
        }
        _ => s.next_run_ms,
    }
}

fn source_title(source: chronos_broker::ScheduleSource) -> &'static str {
    match source {
        chronos_broker::ScheduleSource::Code => "registered in code by running instances",
        chronos_broker::ScheduleSource::Runtime => {
            "stored at run time (API or `chronos schedule add`)"
        }
    }
}
