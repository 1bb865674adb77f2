//! The route table and the layers around it.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chronos_core::{Client, Enqueue, Inspect};

use crate::api_error::ApiError;
use crate::config::IngestConfig;
use crate::routes::{BATCH, HEALTHZ, OPENAPI, TASKS};
use crate::state::AppState;
use crate::{auth, enqueue, health, metrics};

/// The OpenAPI 3.1 document of this API, written by hand and served at `/openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("../openapi.json");

/// The ingest's routes over `client`, for serving with your own listener or nesting under
/// another router (see the crate docs for the routes). The token rule on the listening
/// address is checked by [`crate::serve`] and [`crate::serve_on`], not here: serve these
/// routes on a non-loopback address only with [`IngestConfig::token`] set.
pub fn router<B>(client: Client<B>, config: IngestConfig) -> Router
where
    B: Enqueue + Inspect + 'static,
{
    let state = Arc::new(AppState::new(client, config));
    let limit = state.config.body_limit;
    Router::new()
        .route(TASKS, post(enqueue::one::<B>))
        .route(BATCH, post(enqueue::batch::<B>))
        .route(HEALTHZ, get(health::healthz::<B>))
        .route(OPENAPI, get(openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(limit, declared_length))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard::<B>,
        ))
        // Outermost: refusals of the guard are counted too.
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(state)
}

/// Refuses a body whose declared `Content-Length` is past the limit before any of it is read.
/// (The body extractor stops reading at the limit, but only once that much has arrived: a
/// client that declares 10 MB and waits for an answer before sending would wait forever.)
async fn declared_length(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return ApiError::body_too_large(limit).into_response();
    }
    next.run(req).await
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON)
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route: see /openapi.json",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method: see /openapi.json",
    )
}

#[cfg(test)]
mod tests {
    use super::OPENAPI_JSON;
    use crate::routes::ALL;

    #[test]
    fn openapi_document_lists_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("valid JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().expect("paths");
        for (method, path) in ALL {
            assert!(
                paths.get(*path).and_then(|p| p.get(*method)).is_some(),
                "{method} {path} missing from openapi.json"
            );
        }
        assert_eq!(
            paths.len(),
            ALL.len(),
            "openapi.json lists a route we do not serve"
        );
    }
}
