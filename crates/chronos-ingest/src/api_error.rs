//! The one shape every refusal takes: an HTTP status and `{"error":{"code","message"}}`, with a
//! code a program can match on (the message is for people and may change).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use chronos_core::BrokerError;
use serde::Serialize;

/// A refused request (or, inside a batch answer, a refused task).
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

/// The JSON of an error: `{"code": "...", "message": "..."}`.
#[derive(Debug, Serialize)]
pub(crate) struct ErrorBody<'a> {
    code: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: ErrorBody<'a>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_json`: the body is not JSON.
    pub(crate) fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_json", message)
    }

    /// 400 `invalid_request`: JSON of the wrong shape (a missing `kind`, an unknown field).
    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 400 `invalid_option`: an option out of its range or two that exclude each other.
    pub(crate) fn invalid_option(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_option", message)
    }

    /// 413 `body_too_large`: past [`crate::IngestConfig::body_limit`].
    pub(crate) fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than the {limit} bytes this ingest accepts"),
        )
    }

    /// 503 `redis_unavailable`.
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "redis_unavailable",
            message,
        )
    }

    /// The body of this error inside a batch answer.
    pub(crate) fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            code: self.code,
            message: &self.message,
        }
    }

    /// A JSON body that failed to parse: bad syntax, or good syntax of the wrong shape.
    pub(crate) fn from_json(e: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => Self::invalid_request(e.to_string()),
            Category::Syntax | Category::Eof | Category::Io => Self::invalid_json(e.to_string()),
        }
    }
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> Self {
        let message = e.to_string();
        let (status, code) = match &e {
            BrokerError::InvalidQueue { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_queue"),
            BrokerError::PayloadTooLarge { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "payload_too_large")
            }
            BrokerError::InvalidTaskId { .. } => (StatusCode::BAD_REQUEST, "invalid_task_id"),
            BrokerError::InvalidOption(_) | BrokerError::InvalidDuration(_) => {
                (StatusCode::BAD_REQUEST, "invalid_option")
            }
            BrokerError::DuplicateTask { .. } => (StatusCode::CONFLICT, "duplicate_task"),
            BrokerError::TaskIdConflict { .. } => (StatusCode::CONFLICT, "id_conflict"),
            BrokerError::TenantFull { .. } => (StatusCode::TOO_MANY_REQUESTS, "tenant_full"),
            BrokerError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis_unavailable"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        Self {
            status,
            code,
            message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&Envelope { error: self.body() })
            .unwrap_or_else(|_| br#"{"error":{"code":"internal","message":""}}"#.to_vec());
        let mut res = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        res
    }
}
