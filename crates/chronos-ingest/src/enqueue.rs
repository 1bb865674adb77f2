//! The two enqueue routes: one task (`POST /queues/{queue}/tasks`) and a batch
//! (`POST /queues/{queue}/tasks:batch`, written in one broker call).
//!
//! A request with an `Idempotency-Key` (or a task with its own `options.id`) names its task;
//! the broker writes a named task once, so a re-sent request answers the task the first one
//! wrote. To tell a re-send (200, outcome `existing`) from a first write (201), the task id is
//! looked up just before the enqueue: two first sends racing each other may both hear 201, but
//! they still write one task.

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chronos_core::{BrokerError, Enqueue, Inspect, NewTask, QueueName};
use serde::Serialize;

use crate::api_error::ApiError;
use crate::metrics;
use crate::request::{
    idempotency_key, idempotent_id, require_json, BatchRequest, TaskReply, TaskRequest,
};
use crate::state::AppState;

/// `POST /queues/{queue}/tasks`: 201 and the task, or 200 and the task an idempotency key or
/// explicit id already named; an error otherwise.
pub(crate) async fn one<B: Enqueue + Inspect + 'static>(
    State(st): State<Arc<AppState<B>>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match enqueue_one(&st, path, &headers, body).await {
        Ok(r) => r,
        Err(e) => {
            refused(&e);
            e.into_response()
        }
    }
}

async fn enqueue_one<B: Enqueue + Inspect>(
    st: &AppState<B>,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (queue, key) = prelude(path, headers)?;
    let req: TaskRequest = parse(body, st.config.body_limit)?;
    let task = req.into_task(&queue, key.map(|k| idempotent_id(&k, None)))?;
    let existing = if task.explicit_id() {
        let id = task.envelope.id.clone();
        within(st, st.client.broker().task(&queue, &id))
            .await?
            .is_some()
    } else {
        false
    };
    let mut results = within(st, st.client.broker().enqueue(vec![task])).await?;
    let info = results
        .pop()
        .unwrap_or_else(|| Err(BrokerError::Encode("no result for the task sent".into())))?;
    let reply = TaskReply::new(info, existing);
    let status = if reply.created() {
        metrics::accepted(queue.as_str(), 1);
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    tracing::debug!(queue = %queue, ?reply, "ingest: task answered");
    Ok((status, Json(reply)).into_response())
}

/// One task's answer inside a batch answer.
#[derive(Debug, Serialize)]
struct Item<'a> {
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<TaskReply>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<crate::api_error::ErrorBody<'a>>,
}

/// The answer to a batch: one item per task, in the order sent.
#[derive(Debug, Serialize)]
struct BatchReply<'a> {
    results: Vec<Item<'a>>,
}

/// `POST /queues/{queue}/tasks:batch`: per task, in order, its answer (`status` 201 or 200 and
/// the task, or the status and error it would have had alone); 200 when every task was
/// answered with its task, 207 otherwise.
pub(crate) async fn batch<B: Enqueue + Inspect + 'static>(
    State(st): State<Arc<AppState<B>>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match enqueue_batch(&st, path, &headers, body).await {
        Ok(r) => r,
        Err(e) => {
            refused(&e);
            e.into_response()
        }
    }
}

async fn enqueue_batch<B: Enqueue + Inspect>(
    st: &AppState<B>,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (queue, key) = prelude(path, headers)?;
    let req: BatchRequest = parse(body, st.config.body_limit)?;
    let limit = st.config.batch_limit;
    if req.tasks.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_tasks",
            format!(
                "{} tasks in one batch; at most {limit} are accepted",
                req.tasks.len()
            ),
        ));
    }
    // Per task: what it was refused with before reaching Redis, or its place in the call.
    let mut built: Vec<Result<usize, ApiError>> = Vec::with_capacity(req.tasks.len());
    let mut tasks: Vec<NewTask> = Vec::with_capacity(req.tasks.len());
    for (i, t) in req.tasks.into_iter().enumerate() {
        match t.into_task(&queue, key.as_deref().map(|k| idempotent_id(k, Some(i)))) {
            Ok(task) => {
                built.push(Ok(tasks.len()));
                tasks.push(task);
            }
            Err(e) => built.push(Err(e)),
        }
    }
    let named: Vec<String> = tasks
        .iter()
        .filter(|t| t.explicit_id())
        .map(|t| t.envelope.id.clone())
        .collect();
    let existing: std::collections::HashSet<String> = if named.is_empty() {
        Default::default()
    } else {
        let broker = st.client.broker();
        let lookups = named.iter().map(|id| broker.task(&queue, id));
        let found = within(st, async { futures::future::try_join_all(lookups).await }).await?;
        named
            .into_iter()
            .zip(found)
            .filter_map(|(id, rec)| rec.map(|_| id))
            .collect()
    };
    let stored = if tasks.is_empty() {
        Vec::new()
    } else {
        within(st, st.client.broker().enqueue(tasks)).await?
    };
    let mut stored: Vec<Option<Result<chronos_core::TaskInfo, BrokerError>>> =
        stored.into_iter().map(Some).collect();
    let mut errors: Vec<ApiError> = Vec::new();
    let mut items: Vec<(u16, Option<TaskReply>, Option<usize>)> = Vec::with_capacity(built.len());
    let mut created = 0u64;
    for b in built {
        let answer = match b {
            Ok(slot) => match stored.get_mut(slot).and_then(Option::take) {
                Some(Ok(info)) => {
                    let was = existing.contains(&info.id);
                    Ok(TaskReply::new(info, was))
                }
                Some(Err(e)) => Err(ApiError::from(e)),
                None => Err(ApiError::from(BrokerError::Encode(
                    "no result for the task sent".into(),
                ))),
            },
            Err(e) => Err(e),
        };
        match answer {
            Ok(reply) => {
                let status = if reply.created() {
                    created += 1;
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                items.push((status.as_u16(), Some(reply), None));
            }
            Err(e) => {
                refused(&e);
                items.push((e.status.as_u16(), None, Some(errors.len())));
                errors.push(e);
            }
        }
    }
    metrics::accepted(queue.as_str(), created);
    tracing::debug!(queue = %queue, tasks = items.len(), created, refused = errors.len(), "ingest: batch answered");
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    let results = items
        .into_iter()
        .map(|(status, task, err)| Item {
            status,
            task,
            error: err.map(|i| errors[i].body()),
        })
        .collect();
    Ok((status, Json(BatchReply { results })).into_response())
}

/// What both routes check before reading the body: a JSON content type, a valid queue name,
/// a well-formed `Idempotency-Key`.
fn prelude(
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
) -> Result<(QueueName, Option<String>), ApiError> {
    let Path(queue) = path.map_err(|e| ApiError::invalid_request(e.body_text()))?;
    require_json(headers)?;
    let queue = QueueName::new(queue)?;
    let key = idempotency_key(headers)?;
    Ok((queue, key))
}

/// The body as `T`: 413 `body_too_large` past the limit, 400 `invalid_json` or
/// `invalid_request` when it does not parse as `T`.
fn parse<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(limit)
        } else {
            ApiError::invalid_request(format!("could not read the body: {}", e.body_text()))
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::from_json(&e))
}

/// `fut`, or 503 `redis_unavailable` when Redis does not answer within the configured time.
/// The call may still take effect after the answer: a producer re-sends with the same
/// `Idempotency-Key` to be sure of one task.
async fn within<B, T>(
    st: &AppState<B>,
    fut: impl Future<Output = Result<T, BrokerError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(st.config.redis_timeout, fut).await {
        Ok(r) => r.map_err(ApiError::from),
        Err(_) => Err(ApiError::unavailable(format!(
            "no answer from Redis within {} ms (the task may have been written: re-send with \
             the same Idempotency-Key to be sure of one task)",
            st.config.redis_timeout.as_millis()
        ))),
    }
}

/// Logs and counts a refusal; a server-side failure is a warning, a client's mistake is not.
fn refused(e: &ApiError) {
    metrics::refused(e.code);
    if e.status.is_server_error() {
        tracing::warn!(code = e.code, message = %e.message, "ingest: request failed");
    } else {
        tracing::debug!(code = e.code, message = %e.message, "ingest: task refused");
    }
}
