//! What the ingest reports through the `metrics` facade (free until a recorder is installed;
//! the worker's Prometheus exporter or any other serves it).
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `chronos_ingest_requests_total` | counter | `route`, `status` | requests answered, by route template (`/queues/{queue}/tasks`, ...; `unmatched` for an unknown path) and HTTP status |
//! | `chronos_ingest_request_duration_seconds` | histogram | `route` | time to answer |
//! | `chronos_ingest_tasks_accepted_total` | counter | `queue` | tasks written (a re-sent idempotency key answers its task again and is not counted) |
//! | `chronos_ingest_tasks_refused_total` | counter | `code` | tasks refused, by error code (`invalid_queue`, `id_conflict`, ...): each refused task of a batch once, and once a request refused as a whole by an enqueue route (`invalid_json`, `body_too_large`, `redis_unavailable`, ...; a refusal of the token check is counted in the requests only) |
//!
//! Routes are labelled by template, never by the path a client sent, and refusals by code, not
//! queue (a refused queue name may be anything): the label sets stay bounded.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

/// Requests answered, by `route` and `status`.
pub const REQUESTS: &str = "chronos_ingest_requests_total";
/// Seconds to answer a request, by `route`.
pub const REQUEST_DURATION: &str = "chronos_ingest_request_duration_seconds";
/// Tasks written, by `queue`.
pub const TASKS_ACCEPTED: &str = "chronos_ingest_tasks_accepted_total";
/// Tasks (or whole enqueue requests) refused, by error `code`.
pub const TASKS_REFUSED: &str = "chronos_ingest_tasks_refused_total";

/// Counts and times every request, under its route template.
pub(crate) async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let start = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    ::metrics::histogram!(REQUEST_DURATION, "route" => route.clone())
        .record(start.elapsed().as_secs_f64());
    ::metrics::counter!(REQUESTS, "route" => route, "status" => status).increment(1);
    res
}

/// Counts `n` tasks written into `queue`.
pub(crate) fn accepted(queue: &str, n: u64) {
    if n > 0 {
        ::metrics::counter!(TASKS_ACCEPTED, "queue" => queue.to_string()).increment(n);
    }
}

/// Counts one task refused with `code`.
pub(crate) fn refused(code: &'static str) {
    ::metrics::counter!(TASKS_REFUSED, "code" => code).increment(1);
}
