//! JSON for the pages' live parts: counts (polled at most once a second) and the throughput
//! history (polled every few seconds).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::Json;
use chronos_broker::HistorySpan;
use serde::{Deserialize, Serialize};

use crate::error::{DashError, PageError};
use crate::live::{OverviewData, QueueLive};
use crate::state::AppState;

/// The overview, at most a second old unless `fresh`: the polls of every open tab and every
/// scraper share one read of Redis (the lock makes it single-flight); a page rendered after an
/// action reads afresh so that it shows what the action did.
pub(crate) async fn overview_data(
    state: &AppState,
    fresh: bool,
) -> Result<OverviewData, DashError> {
    let mut cache = state.overview_cache.lock().await;
    if let (false, Some((at, d))) = (fresh, cache.as_ref()) {
        if at.elapsed() < std::time::Duration::from_millis(900) {
            return Ok(d.clone());
        }
    }
    let d = read_overview(state).await?;
    *cache = Some((std::time::Instant::now(), d.clone()));
    Ok(d)
}

async fn read_overview(state: &AppState) -> Result<OverviewData, DashError> {
    let admin = &state.admin;
    let (overview, redis) = tokio::try_join!(
        async { admin.overview().await.map_err(DashError::from) },
        async { admin.redis_info().await.map_err(DashError::from) },
    )?;
    // A queue whose age cannot be read shows none rather than failing the whole overview.
    let oldest: Vec<Option<i64>> = futures::future::join_all(
        overview
            .queues
            .iter()
            .map(|q| async { admin.oldest_pending_ms(&q.name).await.ok().flatten() }),
    )
    .await;
    let now = crate::format::now_ms();
    let rates = state.rates.observe(
        overview
            .queues
            .iter()
            .map(|q| (q.name.clone(), (q.processed, q.failed)))
            .collect::<BTreeMap<_, _>>(),
    );
    let mut total_p = None::<f64>;
    let mut total_f = None::<f64>;
    let queues: Vec<QueueLive> = overview
        .queues
        .into_iter()
        .zip(oldest)
        .map(|(row, oldest)| {
            let r = rates.get(&row.name).copied();
            if let Some((p, f)) = r {
                *total_p.get_or_insert(0.0) += p;
                *total_f.get_or_insert(0.0) += f;
            }
            QueueLive {
                processed_per_min: r.map(|r| r.0),
                failed_per_min: r.map(|r| r.1),
                oldest_pending_s: oldest.map(|t| (now.saturating_sub(t) / 1000).max(0)),
                row,
            }
        })
        .collect();
    let oldest_all = queues.iter().filter_map(|q| q.oldest_pending_s).max();
    Ok(OverviewData {
        total: QueueLive {
            row: overview.total,
            processed_per_min: total_p,
            failed_per_min: total_f,
            oldest_pending_s: oldest_all,
        },
        queues,
        servers: overview.servers,
        schedules: overview.schedules,
        leader: overview.leader,
        redis,
        now_ms: now,
    })
}

pub(crate) async fn overview(
    State(state): State<Arc<AppState>>,
) -> Result<Json<OverviewData>, PageError> {
    Ok(Json(overview_data(&state, false).await?))
}

/// One queue's counts, for its page.
pub(crate) async fn queue(
    State(state): State<Arc<AppState>>,
    Path(queue): Path<String>,
) -> Result<Json<QueueLive>, PageError> {
    let (row, oldest) = tokio::try_join!(
        state.admin.queue(&queue),
        state.admin.oldest_pending_ms(&queue)
    )?;
    let now = crate::format::now_ms();
    Ok(Json(QueueLive {
        row,
        processed_per_min: None,
        failed_per_min: None,
        oldest_pending_s: oldest.map(|t| (now.saturating_sub(t) / 1000).max(0)),
    }))
}

/// What the events page asks for: the events after this id.
#[derive(Debug, Deserialize)]
pub(crate) struct EventsParams {
    after: String,
}

/// One event as the events page adds it to its table.
#[derive(Debug, Serialize)]
pub(crate) struct EventLine {
    id: String,
    time: String,
    r#type: String,
    task_id: String,
    task_href: String,
    kind: String,
    detail: String,
}

/// The events of a queue after `after`, oldest first (at most a page's worth).
pub(crate) async fn events(
    State(state): State<Arc<AppState>>,
    Path(queue): Path<String>,
    Query(p): Query<EventsParams>,
) -> Result<Json<Vec<EventLine>>, PageError> {
    let events = state
        .admin
        .events_after(&queue, &p.after, crate::pages::events::SHOWN)
        .await?;
    Ok(Json(
        events
            .iter()
            .map(|e| EventLine {
                id: e.id.clone(),
                time: crate::format::time(e.at_ms),
                r#type: e.event.name().to_string(),
                task_id: e.task_id.clone(),
                task_href: crate::href::task_href(&queue, &e.task_id),
                kind: e.kind.clone(),
                detail: crate::pages::events::detail(e),
            })
            .collect(),
    ))
}

#[derive(Debug, Deserialize)]
pub(crate) struct HistoryParams {
    queue: Option<String>,
    minutes: Option<usize>,
}

/// Processed and failed per minute, oldest first.
#[derive(Debug, Default, Serialize)]
pub(crate) struct History {
    pub(crate) start_ms: Vec<i64>,
    pub(crate) processed: Vec<u64>,
    pub(crate) failed: Vec<u64>,
}

/// The last `minutes` (default 60, at most 1,440) of one queue, or of all queues summed.
pub(crate) async fn history(
    State(state): State<Arc<AppState>>,
    Query(p): Query<HistoryParams>,
) -> Result<Json<History>, PageError> {
    let minutes = p.minutes.unwrap_or(60).clamp(1, 1440);
    let names = match p.queue.filter(|q| !q.is_empty()) {
        Some(q) => vec![q],
        None => state
            .admin
            .queues()
            .await?
            .into_iter()
            .map(|q| q.name)
            .collect(),
    };
    let all = futures::future::try_join_all(
        names
            .iter()
            .map(|q| state.admin.history(q, HistorySpan::Minutes)),
    )
    .await?;
    let mut out = History::default();
    for points in all {
        let tail = &points[points.len().saturating_sub(minutes)..];
        if out.start_ms.is_empty() {
            out.start_ms = tail.iter().map(|p| p.start_ms).collect();
            out.processed = vec![0; tail.len()];
            out.failed = vec![0; tail.len()];
        }
        for (i, p) in tail.iter().enumerate().take(out.start_ms.len()) {
            out.processed[i] += p.processed;
            out.failed[i] += p.failed;
        }
    }
    Ok(Json(out))
}

/// One task as its page shows it, polled while the task may still change (its state, its
/// progress bar).
pub(crate) async fn task(
    State(state): State<Arc<AppState>>,
    Path((queue, id)): Path<(String, String)>,
) -> Result<Json<chronos_admin::TaskRow>, PageError> {
    Ok(Json(state.admin.task(&queue, &id).await?))
}
