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
                        input type="hidden" name="csrf" value=(st.csrf());
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
    if next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\") {
        next.to_string()
    } else {
        "/".to_string()
    }
}
