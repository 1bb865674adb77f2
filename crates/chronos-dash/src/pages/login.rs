//! Logging in with the console's token.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Extension;
use maud::{html, DOCTYPE};
use serde::Deserialize;

use crate::security::{over_https, Actor, CheckedForm, COOKIE};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(crate) struct Params {
    next: Option<String>,
}

pub(crate) async fn page(State(st): State<Arc<AppState>>, Query(p): Query<Params>) -> Response {
    if st.config.token.is_none() {
        return Redirect::to("/").into_response();
    }
    form(&st, p.next.as_deref().unwrap_or("/"), None).into_response()
}

fn form(st: &AppState, next: &str, error: Option<&str>) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Log in · chronos" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header.top { span.brand { "chronos" } }
                main.login {
                    h1 { "Log in" }
                    @if let Some(e) = error { p.error #login-error { (e) } }
                    form #login method="post" action="/login" {
                        input type="hidden" name="csrf" value=(st.login_csrf());
                        input type="hidden" name="next" value=(safe_next(next));
                        label { "token " input type="password" name="token" autocomplete="current-password" autofocus; }
                        button type="submit" { "log in" }
                    }
                }
            }
        }
    };
    Html(markup.into_string())
}

/// After a failed attempt, the next one (from anyone) is checked no sooner than this.
const AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(1);
/// Attempts that may wait in line; more are refused at once (429) without being checked.
const MAX_WAITING: usize = 16;

/// The cookie's attributes: `Secure` over https (or when configured), so a browser never sends
/// the session over plain HTTP.
fn cookie_attrs(st: &AppState, headers: &HeaderMap) -> &'static str {
    if st.config.secure_cookie || over_https(headers) {
        "Path=/; HttpOnly; SameSite=Strict; Secure"
    } else {
        "Path=/; HttpOnly; SameSite=Strict"
    }
}

pub(crate) async fn submit(
    State(st): State<Arc<AppState>>,
    Extension(who): Extension<Actor>,
    headers: HeaderMap,
    form_data: CheckedForm,
) -> Response {
    use std::sync::atomic::Ordering;
    let next = safe_next(form_data.get("next").unwrap_or("/"));
    let token = form_data.get("token").unwrap_or("");
    let Some(session) = st.session_value() else {
        return Redirect::to("/").into_response();
    };
    // Attempts are checked one at a time, and one second after a failure at the soonest, over
    // all connections: parallel guesses wait in line instead of getting one delay each. A
    // correct token waits behind them too (the check comes after the wait, so a burst of
    // guesses cannot learn the right one early).
    let gate = &st.login_gate;
    let waiting = gate.waiting.fetch_add(1, Ordering::SeqCst);
    let _leave = Leave(&gate.waiting);
    if waiting >= MAX_WAITING {
        tracing::warn!(who = %who, waiting, "console login refused: too many attempts at once");
        return (
            StatusCode::TOO_MANY_REQUESTS,
            form(
                &st,
                &next,
                Some("Too many login attempts; try again in a few seconds."),
            ),
        )
            .into_response();
    }
    let mut last_failure = gate.last_failure.lock().await;
    if let Some(at) = *last_failure {
        tokio::time::sleep_until((at + AFTER_FAILURE).into()).await;
    }
    if st.token_matches(token) {
        *last_failure = None;
        drop(last_failure);
        tracing::info!(who = %who, "console login");
        let cookie = format!("{COOKIE}={session}; {}", cookie_attrs(&st, &headers));
        return ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response();
    }
    *last_failure = Some(std::time::Instant::now());
    drop(last_failure);
    tracing::warn!(who = %who, "console login refused: wrong token");
    (
        StatusCode::UNAUTHORIZED,
        form(&st, &next, Some("Wrong token.")),
    )
        .into_response()
}

/// Counts an attempt out of the line when it ends, however it ends.
struct Leave<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

pub(crate) async fn logout(
    State(st): State<Arc<AppState>>,
    Extension(who): Extension<Actor>,
    headers: HeaderMap,
    _form: CheckedForm,
) -> Response {
    tracing::info!(who = %who, "console logout");
    let cookie = format!("{COOKIE}=; {}; Max-Age=0", cookie_attrs(&st, &headers));
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}

/// A local path to go back to, never another site (`//evil.example` or `https://...`).
pub(crate) fn safe_next(next: &str) -> String {
    // Browsers drop tabs and line breaks inside a Location and read a backslash as `/`, so
    // `/\t/evil.example` would leave the site: refuse control characters and backslashes
    // anywhere, and a second slash right after the first.
    let local = next.starts_with('/')
        && !next[1..].starts_with('/')
        && !next.bytes().any(|b| b < 0x20 || b == 0x7f || b == b'\\');
    if local {
        next.to_string()
    } else {
        "/".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(safe_next("/queues/a?state=retry"), "/queues/a?state=retry");
        for bad in [
            "//evil.example/",
            "/\\evil.example",
            "/\t/evil.example",
            "/\n/evil",
            "https://evil.example/",
            "evil",
            "/a\r\nSet-Cookie: x=1",
        ] {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
    }
}
