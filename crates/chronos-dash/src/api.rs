//! JSON for the pages' live parts: counts (polled at most once a second) and the throughput
//! history (polled every few seconds).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::Json;
use chronos_broker::HistorySpan;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, DashError};
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
) -> Result<Json<OverviewData>, ApiError> {
    Ok(Json(overview_data(&state, false).await?))
}

/// One queue's counts, for its page.
pub(crate) async fn queue(
    State(state): State<Arc<AppState>>,
    Path(queue): Path<String>,
) -> Result<Json<QueueLive>, ApiError> {
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
) -> Result<Json<Vec<EventLine>>, ApiError> {
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
    /// `hour` (default: per minute), `day` (per 15 minutes), `week` (per day) or `quarter`
    /// (90 days, per day).
    span: Option<String>,
    /// Per minute, the last `minutes` (at most 1,440): the older form of `span`.
    minutes: Option<usize>,
}

/// One step of the chart.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Step {
    pub(crate) start_ms: i64,
    pub(crate) processed: u64,
    pub(crate) failed: u64,
}

/// Processed and failed per step, oldest first: only whole steps, so the chart never dips at
/// its end for the step still under way, which comes apart in `partial`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct History {
    pub(crate) step_ms: i64,
    pub(crate) start_ms: Vec<i64>,
    pub(crate) processed: Vec<u64>,
    pub(crate) failed: Vec<u64>,
    /// The step under way, so far.
    pub(crate) partial: Option<Step>,
}

/// The history of one queue, or of all queues summed, over a span.
pub(crate) async fn history(
    State(state): State<Arc<AppState>>,
    Query(p): Query<HistoryParams>,
) -> Result<Json<History>, ApiError> {
    const MINUTE: i64 = 60_000;
    const DAY: i64 = 86_400_000;
    let (span, step_ms, steps) = match p.span.as_deref() {
        Some("day") => (HistorySpan::Minutes, 15 * MINUTE, 96usize),
        Some("week") => (HistorySpan::Days, DAY, 7),
        Some("quarter") => (HistorySpan::Days, DAY, 90),
        Some("hour") | None => (
            HistorySpan::Minutes,
            MINUTE,
            p.minutes.unwrap_or(60).clamp(1, 1440),
        ),
        Some(other) => {
            return Err(ApiError(crate::error::DashError::Admin(
                chronos_admin::AdminError::Invalid(format!(
                    "span {other:?}: hour, day, week or quarter"
                )),
            )))
        }
    };
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
    let all =
        futures::future::try_join_all(names.iter().map(|q| state.admin.history(q, span))).await?;
    // Sum the queues into steps: the step under way is the one holding now.
    let now = crate::format::now_ms();
    let current = now - now.rem_euclid(step_ms);
    let first = current - i64::try_from(steps).unwrap_or(0) * step_ms;
    let mut whole = vec![Step::default(); steps];
    for (i, s) in whole.iter_mut().enumerate() {
        s.start_ms = first + i64::try_from(i).unwrap_or(0) * step_ms;
    }
    let mut partial = Step {
        start_ms: current,
        ..Step::default()
    };
    for points in &all {
        for pt in points {
            let at = pt.start_ms - pt.start_ms.rem_euclid(step_ms);
            let slot = if at == current {
                Some(&mut partial)
            } else {
                usize::try_from((at - first) / step_ms)
                    .ok()
                    .filter(|_| at >= first)
                    .and_then(|i| whole.get_mut(i))
            };
            if let Some(s) = slot {
                s.processed += pt.processed;
                s.failed += pt.failed;
            }
        }
    }
    Ok(Json(History {
        step_ms,
        start_ms: whole.iter().map(|s| s.start_ms).collect(),
        processed: whole.iter().map(|s| s.processed).collect(),
        failed: whole.iter().map(|s| s.failed).collect(),
        partial: Some(partial),
    }))
}

/// One task as its page shows it, polled while the task may still change (its state, its
/// progress bar).
pub(crate) async fn task(
    State(state): State<Arc<AppState>>,
    Path((queue, id)): Path<(String, String)>,
) -> Result<Json<chronos_admin::TaskRow>, ApiError> {
    Ok(Json(state.admin.task(&queue, &id).await?))
}
