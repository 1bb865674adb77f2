use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronos_admin::AdminError;
use chronos_broker::BrokerError;

use crate::error_page::{error_page, unknown_queue_page};

/// What can stop the console or one of its requests.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashError {
    /// Listening on a non-loopback address needs a token.
    #[error(
        "refusing to listen on {0} without a token: anyone who can reach it could act on the \
         queues (set --token or CHRONOS_DASH_TOKEN, or listen on 127.0.0.1)"
    )]
    TokenRequired(std::net::SocketAddr),
    /// The address could not be bound, or the server failed.
    #[error("console server: {0}")]
    Io(#[from] std::io::Error),
    /// An operation failed (Redis unreachable, a missing task, a refused action).
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The Redis client is not connected; the reason is its last connection error. Transient:
    /// the client reconnects by itself.
    #[error("Redis is unavailable: {0} (the console reconnects by itself)")]
    RedisUnavailable(String),
    /// No bulk action of this id (another console's, or ended long ago).
    #[error("no bulk action {0:?} on this console (its page is kept a while after it ends)")]
    NoSuchJob(String),
    /// Too many bulk actions run at once; transient.
    #[error("too many bulk actions are running; wait for one to end")]
    Busy,
}

impl From<BrokerError> for DashError {
    fn from(e: BrokerError) -> Self {
        DashError::Admin(AdminError::Broker(e))
    }
}

impl DashError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            DashError::Admin(AdminError::TaskNotFound { .. })
            | DashError::Admin(AdminError::QueueNotFound(_))
            | DashError::NoSuchJob(_) => StatusCode::NOT_FOUND,
            DashError::Busy => StatusCode::TOO_MANY_REQUESTS,
            DashError::Admin(AdminError::Refused { .. }) => StatusCode::CONFLICT,
            DashError::Admin(AdminError::Invalid(_)) => StatusCode::BAD_REQUEST,
            DashError::Admin(AdminError::Schedule(e)) => schedule_status(e),
            DashError::Admin(AdminError::Broker(e)) if is_bad_input(e) => StatusCode::BAD_REQUEST,
            DashError::Admin(AdminError::Broker(BrokerError::QueueNotEmpty { .. })) => {
                StatusCode::CONFLICT
            }
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

fn schedule_status(e: &chronos_scheduler::SchedulerError) -> StatusCode {
    use chronos_scheduler::SchedulerError as E;
    match e {
        E::UnknownSchedule(_) => StatusCode::NOT_FOUND,
        E::Spec(_) | E::InvalidOption(_) | E::DurableSchedule(_) => StatusCode::BAD_REQUEST,
        E::CodeSchedule(_) | E::ScheduleExists(_) | E::DuplicateSchedule(_) | E::Contended(_) => {
            StatusCode::CONFLICT
        }
        E::Broker(b) if is_bad_input(b) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

fn is_bad_input(e: &BrokerError) -> bool {
    matches!(
        e,
        BrokerError::InvalidQueue { .. }
            | BrokerError::InvalidTaskId { .. }
            | BrokerError::InvalidOption(_)
            | BrokerError::PayloadTooLarge { .. }
    )
}

/// A failed page: the error's one-line message in a plain page, with its status.
pub(crate) struct PageError(pub(crate) DashError);

impl<E: Into<DashError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "console request failed");
        }
        let body = match &self.0 {
            DashError::Admin(AdminError::QueueNotFound(q)) => unknown_queue_page(q),
            e => error_page(status, &e.to_string()),
        };
        (status, body).into_response()
    }
}

/// A failed `/api/...` request: scripts and the pages' polls parse JSON, so the error comes as
/// `{"error": "...", "status": 503}` rather than an HTML page.
pub(crate) struct ApiError(pub(crate) DashError);

impl<E: Into<DashError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "console request failed");
        }
        json_error(status, &self.0.to_string())
    }
}

/// A failed `/metrics` scrape: Prometheus shows a scrape error's body as text, so plain text.
pub(crate) struct MetricsError(pub(crate) DashError);

impl<E: Into<DashError>> From<E> for MetricsError {
    fn from(e: E) -> Self {
        MetricsError(e.into())
    }
}

impl IntoResponse for MetricsError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "console request failed");
        }
        text_error(status, &self.0.to_string())
    }
}

pub(crate) fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(serde_json::json!({ "error": message, "status": status.as_u16() })),
    )
        .into_response()
}

pub(crate) fn text_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        format!("{message}\n"),
    )
        .into_response()
}

/// An error answered in the form the path's clients read: JSON under `/api/`, plain text for
/// `/metrics`, an HTML page elsewhere.
pub(crate) fn for_path(path: &str, e: DashError) -> Response {
    if path.starts_with("/api/") {
        ApiError(e).into_response()
    } else if path == "/metrics" {
        MetricsError(e).into_response()
    } else {
        PageError(e).into_response()
    }
}
