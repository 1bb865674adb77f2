//! Who may see and do what: login, the host check, origin and CSRF checks, response headers.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRequest, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::href::encode;
use crate::state::AppState;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "chronos_dash";

/// No inline script or style, nothing from another origin, no framing, forms only to us.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Paths anyone may reach: the login page, the assets it needs, the health probe.
fn is_open(path: &str) -> bool {
    path == "/login" || path == "/healthz" || path.starts_with("/assets/")
}

/// Security headers on every response.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// Who sent a request, for the log lines of actions and logins: how they are let in and from
/// where. Never holds a secret (no token, no cookie value).
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    /// `bearer` (a token in the header), `session` (logged in with the token), `local` (a
    /// console without a token, loopback only) or `anonymous` (not logged in).
    via: &'static str,
    peer: Option<SocketAddr>,
    /// The client a proxy says it forwards for (`X-Forwarded-For`), escaped and clipped.
    forwarded_for: Option<String>,
}

impl Actor {
    fn of(state: &AppState, req: &Request) -> Self {
        let h = req.headers();
        let via = if state.config.token.is_none() {
            "local"
        } else if bearer(h).is_some_and(|t| state.token_matches(t)) {
            "bearer"
        } else if cookie(h, COOKIE).is_some_and(|c| state.session_matches(&c)) {
            "session"
        } else {
            "anonymous"
        };
        let forwarded_for = h
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                chronos_admin::printable(&v.chars().take(100).collect::<String>()).into_owned()
            });
        Actor {
            via,
            peer: req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
            forwarded_for,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@", self.via)?;
        match self.peer {
            Some(p) => write!(f, "{p}")?,
            None => write!(f, "unknown")?,
        }
        if let Some(x) = &self.forwarded_for {
            write!(f, " (forwarded for {x})")?;
        }
        Ok(())
    }
}

/// True when the request reached us over https: a TLS-terminating proxy says so in
/// `X-Forwarded-Proto` or `Forwarded` (the console itself serves plain HTTP).
pub(crate) fn over_https(headers: &HeaderMap) -> bool {
    let xfp = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .next()
                .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
        });
    let fwd = headers
        .get(header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("proto=https"));
    xfp || fwd
}

/// Answers at once with the reason when Redis is unreachable, instead of letting the page's
/// commands wait for the client's timeout. Pages that need no Redis (login, assets) and the
/// health probe (which says it its own way) pass.
pub(crate) async fn redis_gate(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if is_open(path) || path == "/logout" {
        return next.run(req).await;
    }
    if let Some(reason) = state.health.down(state.admin.broker()) {
        return crate::error::for_path(path, crate::error::DashError::RedisUnavailable(reason));
    }
    next.run(req).await
}

/// Refuses what this visitor may not do: a foreign host name on a console without a token, a
/// request without login on a console with one, a POST from another site or to a read-only
/// console. Lets the rest through with an [`Actor`] in the request's extensions.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    if state.config.token.is_none() && !loopback_host(req.headers()) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this console answers only requests to 127.0.0.1, localhost or [::1]; \
             give it a token to serve other addresses",
        )
            .into_response();
    }
    if state.config.token.is_some() && !is_open(&path) && !logged_in(&state, req.headers()) {
        let wants_page = req.method() == Method::GET
            && req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("text/html"));
        if wants_page {
            let next = req
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            return Redirect::to(&format!("/login?next={}", encode(&next))).into_response();
        }
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "log in first (or send Authorization: Bearer <token>)",
        )
            .into_response();
    }
    if req.method() == Method::POST {
        if cross_site(req.headers()) {
            return (StatusCode::FORBIDDEN, "cross-site request refused").into_response();
        }
        if state.config.read_only && path != "/login" && path != "/logout" {
            return (
                StatusCode::FORBIDDEN,
                "this console is read-only: actions are refused",
            )
                .into_response();
        }
    }
    let actor = Actor::of(&state, &req);
    req.extensions_mut().insert(actor);
    next.run(req).await
}

/// The bearer token of the request, if it sends one. The scheme name is case-insensitive
/// (RFC 7235): clients and proxies that send `bearer` are as right as those that send `Bearer`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// True when the request carries the token (bearer) or a session cookie of this console.
pub(crate) fn logged_in(state: &AppState, headers: &HeaderMap) -> bool {
    if bearer(headers).is_some_and(|t| state.token_matches(t)) {
        return true;
    }
    cookie(headers, COOKIE).is_some_and(|c| state.session_matches(&c))
}

/// The value of cookie `name`, if the request carries it.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// True when the request's `Host` names this machine's loopback interface.
fn loopback_host(headers: &HeaderMap) -> bool {
    chronos_broker::loopback_host(headers.get(header::HOST).and_then(|v| v.to_str().ok()))
}

/// True when the browser says the request comes from another site: `Sec-Fetch-Site`, or an
/// `Origin` whose host differs from `Host`.
fn cross_site(headers: &HeaderMap) -> bool {
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(site, Some("cross-site") | Some("same-site")) {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin.split_once("://").map_or("", |(_, h)| h);
    origin == "null" || !origin_host.eq_ignore_ascii_case(host)
}

/// A POSTed form whose CSRF token was checked: fields in order, repeated names kept (a
/// selection sends one `id` per task).
#[derive(Debug)]
pub(crate) struct CheckedForm(pub(crate) Vec<(String, String)>);

impl CheckedForm {
    /// The first value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// A form body larger than this is refused (a selection of 5,000 ids fits).
const MAX_FORM: usize = 512 * 1024;

impl FromRequest<Arc<AppState>> for CheckedForm {
    type Rejection = Response;

    async fn from_request(req: Request<Body>, state: &Arc<AppState>) -> Result<Self, Response> {
        let login = req.uri().path() == "/login";
        let body = axum::body::to_bytes(req.into_body(), MAX_FORM)
            .await
            .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "form too large").into_response())?;
        let form = parse_form(&body);
        let ok = form
            .iter()
            .find(|(k, _)| k == "csrf")
            .is_some_and(|(_, v)| {
                if login {
                    state.login_csrf_matches(v)
                } else {
                    state.csrf_matches(v)
                }
            });
        if !ok {
            return Err((
                StatusCode::FORBIDDEN,
                "missing or stale form token: reload the page and try again",
            )
                .into_response());
        }
        Ok(CheckedForm(form))
    }
}

fn parse_form(body: &Bytes) -> Vec<(String, String)> {
    form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        for v in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR  abc "] {
            assert_eq!(bearer(&h(&[("authorization", v)])), Some("abc"), "{v}");
        }
        for v in ["Basic abc", "Bearerabc", "abc", "Bearer_abc"] {
            assert_eq!(bearer(&h(&[("authorization", v)])), None, "{v}");
        }
    }

    #[test]
    fn host_check_accepts_only_loopback_names() {
        assert!(loopback_host(&h(&[("host", "127.0.0.1:8080")])));
        assert!(loopback_host(&h(&[("host", "localhost:8080")])));
        assert!(loopback_host(&h(&[("host", "[::1]:8080")])));
        assert!(!loopback_host(&h(&[("host", "evil.example:8080")])));
        assert!(!loopback_host(&h(&[("host", "10.0.0.5")])));
    }

    #[test]
    fn cross_site_posts_are_recognised() {
        assert!(!cross_site(&h(&[("host", "127.0.0.1:8080")])));
        assert!(!cross_site(&h(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(cross_site(&h(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(cross_site(&h(&[
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(cross_site(&h(&[("host", "a"), ("origin", "null")])));
    }

    #[test]
    fn cookies_are_found_among_others() {
        let m = h(&[("cookie", "a=1; chronos_dash=xyz; b=2")]);
        assert_eq!(cookie(&m, COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&m, "c"), None);
    }
}
