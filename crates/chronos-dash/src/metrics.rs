//! `/metrics`: queue gauges and counters in the Prometheus text format, read from the queues'
//! own counters (no scan, no `MEMORY USAGE`), and cached for a second so that several scrapers
//! cost Redis what one does.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::api::overview_data;
use crate::error::MetricsError;
use crate::state::AppState;

const FRESH: Duration = Duration::from_secs(1);

pub(crate) async fn page(State(st): State<Arc<AppState>>) -> Result<Response, MetricsError> {
    let mut cache = st.metrics_cache.lock().await;
    let text = match cache.as_ref() {
        Some((at, text)) if at.elapsed() < FRESH => text.clone(),
        _ => {
            let text = render(&st).await?;
            *cache = Some((Instant::now(), text.clone()));
            text
        }
    };
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn render(st: &AppState) -> Result<String, MetricsError> {
    let d = overview_data(st, false).await?;
    let counters = {
        use chronos_broker::Schedules;
        st.admin.broker().scheduler_metrics().await?
    };
    let schedules = st.admin.schedules().await?;
    let overdue = st
        .admin
        .overdue_schedules(&schedules, crate::format::now_ms())
        .await?;
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in rows {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let states = |q: &chronos_admin::QueueRow| {
        [
            ("pending", q.pending),
            ("active", q.active),
            ("scheduled", q.scheduled),
            ("retry", q.retry),
            ("archived", q.archived),
            ("completed", q.completed),
            ("cancelled", q.cancelled),
        ]
    };
    family(
        "chronos_queue_tasks",
        "gauge",
        "Tasks in the queue by state (completed: kept for retention; cancelled: by their handler, kept as dead letters are).",
        d.queues
            .iter()
            .flat_map(|q| {
                states(&q.row).map(|(s, n)| {
                    (
                        format!("{{queue=\"{}\",state=\"{s}\"}}", label(&q.row.name)),
                        n.to_string(),
                    )
                })
            })
            .collect(),
    );
    family(
        "chronos_queue_paused",
        "gauge",
        "1 when the queue is paused.",
        d.queues
            .iter()
            .map(|q| (queue_label(&q.row.name), u8::from(q.row.paused).to_string()))
            .collect(),
    );
    family(
        "chronos_queue_processed_total",
        "counter",
        "Tasks completed since the queue was created.",
        d.queues
            .iter()
            .map(|q| (queue_label(&q.row.name), q.row.processed.to_string()))
            .collect(),
    );
    family(
        "chronos_queue_deduplicated_total",
        "counter",
        "Enqueues that wrote no new task because a task held their deduplication key, by mode.",
        d.queues
            .iter()
            .flat_map(|q| {
                q.row.deduplicated.by_mode().map(|(m, n)| {
                    (
                        format!("{{queue=\"{}\",mode=\"{m}\"}}", label(&q.row.name)),
                        n.to_string(),
                    )
                })
            })
            .collect(),
    );
    family(
        "chronos_queue_failed_total",
        "counter",
        "Failed attempts since the queue was created.",
        d.queues
            .iter()
            .map(|q| (queue_label(&q.row.name), q.row.failed.to_string()))
            .collect(),
    );
    family(
        "chronos_queue_latency_seconds",
        "gauge",
        "Age of the oldest task waiting in the queue (0 when none waits).",
        d.queues
            .iter()
            .map(|q| {
                (
                    queue_label(&q.row.name),
                    q.oldest_pending_s.unwrap_or(0).to_string(),
                )
            })
            .collect(),
    );
    family(
        "chronos_servers",
        "gauge",
        "Live worker servers.",
        vec![(String::new(), d.servers.to_string())],
    );
    family(
        "chronos_schedules",
        "gauge",
        "Registered schedules.",
        vec![(String::new(), d.schedules.to_string())],
    );
    family(
        "chronos_schedule_overdue",
        "gauge",
        "1 when a trigger of the schedule fell due more than a minute ago and was not fired (no scheduler leads, or its leader is stuck); 0 otherwise.",
        schedules
            .iter()
            .map(|s| {
                (
                    format!(
                        "{{schedule=\"{}\",queue=\"{}\"}}",
                        label(&s.id),
                        label(&s.queue)
                    ),
                    u8::from(overdue.contains_key(&s.id)).to_string(),
                )
            })
            .collect(),
    );
    family(
        "chronos_scheduler_leader_epoch",
        "gauge",
        "Epoch of the scheduler leader (0 when none leads).",
        vec![(
            String::new(),
            d.leader.as_ref().map_or(0, |l| l.epoch).to_string(),
        )],
    );
    family(
        "chronos_scheduler_triggers_total",
        "counter",
        "Schedule triggers by outcome, whole cluster.",
        vec![
            ("{outcome=\"fired\"}".into(), counters.fired.to_string()),
            ("{outcome=\"missed\"}".into(), counters.missed.to_string()),
            (
                "{outcome=\"suppressed\"}".into(),
                counters.suppressed.to_string(),
            ),
        ],
    );
    family(
        "chronos_redis_used_memory_bytes",
        "gauge",
        "used_memory of the Redis server.",
        vec![(String::new(), d.redis.used_memory.to_string())],
    );
    family(
        "chronos_redis_connected_clients",
        "gauge",
        "connected_clients of the Redis server.",
        vec![(String::new(), d.redis.connected_clients.to_string())],
    );
    Ok(out)
}

fn queue_label(name: &str) -> String {
    format!("{{queue=\"{}\"}}", label(name))
}

/// A label value escaped as the text format asks.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
