//! The route table's paths, named once: the router, the guard, the metrics labels and the
//! OpenAPI test read them from here.

/// Enqueue one task.
pub(crate) const TASKS: &str = "/queues/{queue}/tasks";
/// Enqueue many tasks of one queue.
pub(crate) const BATCH: &str = "/queues/{queue}/tasks:batch";
/// Liveness and Redis reachability.
pub(crate) const HEALTHZ: &str = "/healthz";
/// This API's OpenAPI document.
pub(crate) const OPENAPI: &str = "/openapi.json";

/// Every route with its method, as the OpenAPI document must list them.
#[cfg(test)]
pub(crate) const ALL: &[(&str, &str)] = &[
    ("post", TASKS),
    ("post", BATCH),
    ("get", HEALTHZ),
    ("get", OPENAPI),
];

/// Paths anyone may reach, with or without the token: nothing in them is secret.
pub(crate) fn is_open(path: &str) -> bool {
    path == HEALTHZ || path == OPENAPI
}
