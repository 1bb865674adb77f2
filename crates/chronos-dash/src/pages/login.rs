//! Logging in with the console's token.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{html, DOCTYPE};
use serde::Deserialize;

use crate::security::{CheckedForm, COOKIE};
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

pub(crate) async fn submit(State(st): State<Arc<AppState>>, form_data: CheckedForm) -> Response {
    let next = safe_next(form_data.get("next").unwrap_or("/"));
    let token = form_data.get("token").unwrap_or("");
    match st.session_value() {
        Some(session) if st.token_matches(token) => {
            let cookie = format!("{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict");
            ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response()
        }
        Some(_) => {
            tracing::warn!("console login refused: wrong token");
            // Slows guessing down to one try a second per connection.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            (
                StatusCode::UNAUTHORIZED,
                form(&st, &next, Some("Wrong token.")),
            )
                .into_response()
        }
        None => Redirect::to("/").into_response(),
    }
}

pub(crate) async fn logout(_form: CheckedForm) -> Response {
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
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
