//! The pages of a failed request, apart from the other pages: errors render them, and the
//! other pages depend on errors.

use axum::http::StatusCode;
use axum::response::Html;
use maud::{html, DOCTYPE};

use crate::href::queue_href;

/// A plain page for a failed request: its status and one line saying why.
pub(crate) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (status.as_u16()) " · chronos" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header.top { a.brand href="/" { "chronos" } }
                main {
                    h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                    p.error { (message) }
                    p { a href="/" { "Back to the overview" } }
                }
            }
        }
    };
    Html(markup.into_string())
}

/// The 404 page of a queue name that names no queue: what exists, as links, and the likely
/// meaning of a typo first.
pub(crate) fn unknown_queue_page(q: &chronos_admin::UnknownQueue) -> Html<String> {
    let status = StatusCode::NOT_FOUND;
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "404 · chronos" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header.top { a.brand href="/" { "chronos" } }
                main {
                    h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                    p.error #unknown-queue {
                        "No queue " code { (q.queue) }
                        @if !q.namespace.is_empty() { " in namespace " code { (q.namespace) } }
                        "."
                    }
                    @if let Some(s) = &q.suggestion {
                        p #suggestion { "Did you mean " a href=(queue_href(s)) { (s) } "?" }
                    }
                    @if q.known.is_empty() {
                        p { "This namespace holds no queue." }
                    } @else {
                        p #known-queues {
                            "Queues: "
                            @for (i, k) in q.known.iter().enumerate() {
                                @if i > 0 { ", " }
                                a href=(queue_href(k)) { (k) }
                            }
                            @if q.known_total > q.known.len() { " and " (q.known_total - q.known.len()) " more" }
                        }
                    }
                    @if !q.other_namespaces.is_empty() {
                        p #other-namespaces {
                            "Namespaces with queues on this Redis: "
                            (q.other_namespaces.join(", "))
                            " (this console looks at one namespace; start it with --namespace)."
                        }
                    }
                    p { a href="/" { "Back to the overview" } }
                }
            }
        }
    };
    Html(markup.into_string())
}
