//! A queue's run times and queue waits per kind (`/queues/{queue}/timing?span=hour|day`): p50,
//! p95 and p99 over the span in a table, and per kind two charts of them per step (drawn here
//! as SVG, log scale: a p99 ten times the median stays readable).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use chronos_admin::{KindTiming, Quantiles, TimingReport};
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;

use super::{layout, Nav};
use crate::error::PageError;
use crate::format;
use crate::href::{encode, queue_href};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    span: Option<String>,
}

/// The path of a queue's timing page.
pub(crate) fn timing_href(queue: &str) -> String {
    format!("/queues/{}/timing", encode(queue))
}

/// A duration in ms as people read it: `0.8 ms`, `12 ms`, `1.4 s`, `2m 5s`.
pub(crate) fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.1} ms")
    } else if v < 1_000.0 {
        format!("{v:.0} ms")
    } else if v < 60_000.0 {
        format!("{:.1} s", v / 1_000.0)
    } else {
        format::duration((v / 1_000.0) as i64)
    }
}

pub(crate) async fn page(
    State(st): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<Params>,
) -> Result<Html<String>, PageError> {
    let day = p.span.as_deref() == Some("day");
    let (span, step) = if day {
        (Duration::from_secs(86_400), Duration::from_secs(900))
    } else {
        (Duration::from_secs(3_600), Duration::from_secs(60))
    };
    let report = st.admin.timings(&queue, span, step).await?;
    let here = timing_href(&queue);
    let body = html! {
        p.crumbs { a href=(queue_href(&queue)) { "queue " (queue) } " / timing" }
        h1 { "Run time and wait per kind" }
        nav.tabs {
            a.active[!day] href=(here) #span-hour { "last hour (per minute)" }
            a.active[day] href={(here) "?span=day"} #span-day { "last day (per 15 minutes)" }
        }
        p.muted {
            "Run: from the handler's start to its end, every attempt. Wait: from when the task was ready (enqueued, due or retried) to its start. "
            "Counted by the workers per minute and written with their heartbeat; each figure is at most 25% above the true one."
        }
        @if report.kinds.is_empty() {
            p.muted #no-timing { "No attempt ended in this span." }
        } @else {
            table.grid #kinds {
                thead {
                    tr { th { "kind" } th.num { "attempts" } th.num { "run p50" } th.num { "p95" } th.num { "p99" } th.num { "wait p50" } th.num { "p95" } th.num { "p99" } }
                }
                tbody {
                    @for k in &report.kinds {
                        tr data-kind=(k.kind) {
                            td { a href={"#k-" (encode(&k.kind))} { (k.kind) } }
                            td.num data-f="count" { (format::thousands(k.count)) }
                            td.num data-f="run-p50" { (ms(k.run.p50_ms)) }
                            td.num { (ms(k.run.p95_ms)) }
                            td.num data-f="run-p99" { (ms(k.run.p99_ms)) }
                            td.num data-f="wait-p50" { (ms(k.wait.p50_ms)) }
                            td.num { (ms(k.wait.p95_ms)) }
                            td.num { (ms(k.wait.p99_ms)) }
                        }
                    }
                }
            }
            @for k in &report.kinds {
                section.kind-timing id={"k-" (encode(&k.kind))} {
                    h2 { (k.kind) }
                    div.cards {
                        div.card.chart { h3 { "run time" } (chart(&report, k, |s| s.run)) }
                        div.card.chart { h3 { "queue wait" } (chart(&report, k, |s| s.wait)) }
                    }
                }
            }
            p.legend { span.key.p50 { "p50" } span.key.p95 { "p95" } span.key.p99 { "p99" } }
        }
    };
    Ok(layout(
        &st,
        &format!("Timing of {queue}"),
        Nav::None,
        "timing",
        &[],
        None,
        body,
    ))
}

const W: f64 = 560.0;
const H: f64 = 180.0;
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 20.0;

/// One chart: p50, p95 and p99 per step on a log scale, with decade grid lines.
fn chart(
    r: &TimingReport,
    k: &KindTiming,
    pick: impl Fn(&chronos_admin::TimingStep) -> Quantiles,
) -> Markup {
    let points: Vec<(i64, Quantiles)> = k.steps.iter().map(|s| (s.at_ms, pick(s))).collect();
    let lo = points
        .iter()
        .map(|(_, q)| q.p50_ms)
        .fold(f64::INFINITY, f64::min)
        .max(0.1);
    let hi = points
        .iter()
        .map(|(_, q)| q.p99_ms)
        .fold(0.0f64, f64::max)
        .max(lo * 10.0);
    let (llo, lhi) = (lo.log10().floor(), hi.log10().ceil());
    let span = (r.to_ms - r.from_ms).max(1) as f64;
    let x = |at: i64| LEFT + (at - r.from_ms) as f64 / span * (W - LEFT - 8.0);
    let y = |v: f64| {
        let f = (v.max(0.1).log10() - llo) / (lhi - llo).max(1.0);
        (H - BOTTOM) - f * (H - BOTTOM - 8.0)
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg viewBox="0 0 {W} {H}" role="img" aria-label="p50, p95 and p99 of {}">"#,
        html_escape(&k.kind)
    );
    let mut d = llo;
    while d <= lhi {
        let v = 10f64.powf(d);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="axis" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            W - 8.0,
            LEFT - 6.0,
            y(v) + 4.0,
            ms(v),
            y = y(v)
        );
        d += 1.0;
    }
    let _ = write!(
        svg,
        r#"<text class="axis" x="{LEFT}" y="{}">{}</text><text class="axis" x="{}" y="{}" text-anchor="end">now</text>"#,
        H - 4.0,
        format::time(r.from_ms),
        W - 8.0,
        H - 4.0
    );
    for (class, pick) in [
        ("p50", (|q: &Quantiles| q.p50_ms) as fn(&Quantiles) -> f64),
        ("p95", |q: &Quantiles| q.p95_ms),
        ("p99", |q: &Quantiles| q.p99_ms),
    ] {
        let path: Vec<String> = points
            .iter()
            .map(|(at, q)| format!("{:.1},{:.1}", x(*at), y(pick(q))))
            .collect();
        if path.len() == 1 {
            let (cx, cy) = path[0].split_once(',').unwrap_or(("0", "0"));
            let _ = write!(
                svg,
                r#"<circle class="{class}" cx="{cx}" cy="{cy}" r="3"/>"#
            );
        } else {
            let _ = write!(
                svg,
                r#"<polyline class="{class}" points="{}"/>"#,
                path.join(" ")
            );
        }
    }
    svg.push_str("</svg>");
    html! { (PreEscaped(svg)) }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
