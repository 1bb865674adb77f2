//! The pages: one module per page, all in one layout.

pub(crate) mod dead_letters;
pub(crate) mod enqueue;
pub(crate) mod events;
pub(crate) mod flows;
pub(crate) mod job;
pub(crate) mod limits;
pub(crate) mod locks;
pub(crate) mod login;
pub(crate) mod overview;
pub(crate) mod queue;
pub(crate) mod schedule;
pub(crate) mod schedules;
pub(crate) mod servers;
pub(crate) mod task;
pub(crate) mod tenants;
pub(crate) mod timing;

use axum::response::Html;
use maud::{html, Markup, DOCTYPE};

use crate::state::AppState;

/// Which entry of the navigation a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Overview,
    Schedules,
    Servers,
    None,
}

/// The frame of every page: navigation, the Redis looked at, the read-only badge, logout.
/// `page` names the page for the script (`data-page`), `data` adds what its polling needs.
pub(crate) fn layout(
    state: &AppState,
    title: &str,
    nav: Nav,
    page: &str,
    data: &[(&str, String)],
    notice: Option<&str>,
    body: Markup,
) -> Html<String> {
    let refresh = state.config.refresh.as_millis().max(1000).to_string();
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · chronos" }
                link rel="stylesheet" href="/assets/app.css";
                link rel="icon" href="data:,";
                script src="/assets/app.js" defer {}
            }
            body data-page=(page) data-refresh=(refresh)
                data-arg=(data.iter().find(|(k, _)| *k == "arg").map(|(_, v)| v.as_str()).unwrap_or("")) {
                header.top {
                    a.brand href="/" { "chronos" }
                    nav {
                        a.active[nav == Nav::Overview] href="/" { "Overview" }
                        a.active[nav == Nav::Schedules] href="/schedules" { "Schedules" }
                        a.active[nav == Nav::Servers] href="/servers" { "Servers" }
                    }
                    div.where {
                        @if !state.config.redis_label.is_empty() {
                            span.redis title="Redis" { (state.config.redis_label) }
                        }
                        span.ns title="namespace" { "ns " (state.admin.broker().keyspace().namespace()) }
                        @if state.config.read_only {
                            span.badge.ro title="actions are hidden and refused" { "read-only" }
                        }
                        span #live.live { "live" }
                        @if state.config.token.is_some() {
                            form.inline method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(state.csrf());
                                button.link type="submit" { "log out" }
                            }
                        }
                    }
                }
                main {
                    @if let Some(n) = notice.filter(|n| !n.is_empty()) {
                        p.notice role="status" { (n) }
                    }
                    (body)
                }
            }
        }
    };
    Html(markup.into_string())
}

/// A hidden CSRF field for a form.
pub(crate) fn csrf(state: &AppState) -> Markup {
    html! { input type="hidden" name="csrf" value=(state.csrf()); }
}
