//! `GET /healthz`: for load balancers and Kubernetes probes.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chronos_core::Inspect;
use serde_json::json;

use crate::state::AppState;

/// 200 `{"status":"ok"}` when Redis answers within the configured time, 503
/// `{"status":"unavailable"}` otherwise. The reason (error text can name hosts and users) is
/// added only for a caller that sends the token, or on an ingest without one (loopback only).
pub(crate) async fn healthz<B: Inspect + 'static>(
    State(st): State<Arc<AppState<B>>>,
    headers: HeaderMap,
) -> Response {
    let limit = st.config.redis_timeout;
    let problem = match tokio::time::timeout(limit, st.client.broker().paused_queues()).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("no answer within {} ms", limit.as_millis())),
    };
    let Some(reason) = problem else {
        return (StatusCode::OK, Json(json!({"status": "ok"}))).into_response();
    };
    let trusted = !st.has_token() || crate::auth::sends_token(&st, &headers);
    let body = if trusted {
        json!({"status": "unavailable", "reason": reason})
    } else {
        json!({"status": "unavailable"})
    };
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}
