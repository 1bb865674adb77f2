//! The console's own links: percent-encoded parts, the paths of queue and task pages. A leaf
//! module, so the error pages can link to queues without reaching into the pages or security.

/// Percent-encodes a path for a query parameter.
pub(crate) fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The path of a queue page.
pub(crate) fn queue_href(queue: &str) -> String {
    format!("/queues/{}", encode(queue))
}

/// The path of a task page.
pub(crate) fn task_href(queue: &str, id: &str) -> String {
    format!("/queues/{}/tasks/{}", encode(queue), encode(id))
}

/// The path of a schedule page.
pub(crate) fn schedule_href(id: &str) -> String {
    format!("/schedules/{}", encode(id))
}
