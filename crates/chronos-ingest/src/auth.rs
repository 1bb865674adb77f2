//! Who may enqueue: with a token, whoever sends it as a bearer token; without one, only
//! requests addressed to a loopback host name (the ingest then listens on loopback only).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;
use crate::routes;
use crate::state::AppState;

/// Refuses a request without the token (401 `unauthorized`), or, on an ingest without a token,
/// a request addressed to a host name other than a loopback one (421 `misdirected_request`): a
/// web page that rebinds its DNS name to 127.0.0.1 must not reach a tokenless ingest.
pub(crate) async fn guard<B: Send + Sync + 'static>(
    State(st): State<Arc<AppState<B>>>,
    req: Request,
    next: Next,
) -> Response {
    if !st.has_token() {
        if !loopback_host(req.headers()) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_request",
                "this ingest answers only requests to 127.0.0.1, localhost or [::1]; \
                 give it a token to serve other addresses",
            )
            .into_response();
        }
        return next.run(req).await;
    }
    if routes::is_open(req.uri().path()) || sends_token(&st, req.headers()) {
        return next.run(req).await;
    }
    let message = if req.headers().contains_key(header::AUTHORIZATION) {
        "the bearer token is wrong"
    } else {
        "send the token as Authorization: Bearer <token>"
    };
    tracing::info!(path = %req.uri().path(), "ingest: request without a valid token refused");
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response()
}

/// True when the request sends the token as its bearer token.
pub(crate) fn sends_token<B>(st: &AppState<B>, headers: &HeaderMap) -> bool {
    bearer(headers).is_some_and(|t| st.token_matches(t))
}

/// The bearer token of the request, if it sends one (the scheme name is case-insensitive).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// True when the request's `Host` names this machine's loopback interface.
fn loopback_host(headers: &HeaderMap) -> bool {
    chronos_core::loopback_host(headers.get(header::HOST).and_then(|v| v.to_str().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_required() {
        assert_eq!(bearer(&h(&[("authorization", "Bearer abc")])), Some("abc"));
        assert_eq!(bearer(&h(&[("authorization", "bearer abc")])), Some("abc"));
        assert_eq!(bearer(&h(&[("authorization", "Basic abc")])), None);
        assert_eq!(bearer(&h(&[("authorization", "abc")])), None);
        assert_eq!(bearer(&h(&[])), None);
    }

    #[test]
    fn host_check_accepts_only_loopback_names() {
        assert!(loopback_host(&h(&[("host", "127.0.0.1:8090")])));
        assert!(loopback_host(&h(&[("host", "localhost")])));
        assert!(loopback_host(&h(&[("host", "[::1]:8090")])));
        assert!(!loopback_host(&h(&[("host", "evil.example:8090")])));
        assert!(!loopback_host(&h(&[("host", "10.0.0.5")])));
    }
}
