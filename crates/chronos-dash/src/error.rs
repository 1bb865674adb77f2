use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronos_admin::AdminError;
use chronos_broker::BrokerError;

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
}

impl From<BrokerError> for DashError {
    fn from(e: BrokerError) -> Self {
        DashError::Admin(AdminError::Broker(e))
    }
}

impl DashError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            DashError::Admin(AdminError::TaskNotFound { .. }) => StatusCode::NOT_FOUND,
            DashError::Admin(AdminError::Refused { .. }) => StatusCode::CONFLICT,
            DashError::Admin(AdminError::Invalid(_)) => StatusCode::BAD_REQUEST,
            DashError::Admin(AdminError::Broker(e)) if is_bad_input(e) => StatusCode::BAD_REQUEST,
            DashError::Admin(AdminError::Broker(BrokerError::QueueNotEmpty { .. })) => {
                StatusCode::CONFLICT
            }
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

fn is_bad_input(e: &BrokerError) -> bool {
    matches!(
        e,
        BrokerError::InvalidQueue { .. }
            | BrokerError::InvalidTaskId { .. }
            | BrokerError::InvalidOption(_)
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
        let body = crate::pages::error_page(status, &self.0.to_string());
        (status, body).into_response()
    }
}
