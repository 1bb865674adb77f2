//! The console's own links: percent-encoded parts, the paths of queue, listing and task pages.
//! A leaf module, so pages and error pages link to each other without importing each other.

use chronos_broker::{TaskFilter, TaskState};

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

/// The URL of a listing: queue, state, filter and cursor.
pub(crate) fn listing_href(
    queue: &str,
    state: TaskState,
    f: &TaskFilter,
    cursor: Option<&str>,
) -> String {
    let mut href = format!("{}?state={}", queue_href(queue), state.as_str());
    if let Some(k) = &f.kind {
        href.push_str(&format!("&kind={}", encode(k)));
    }
    if let Some(q) = &f.grep {
        href.push_str(&format!("&q={}", encode(q)));
    }
    if let Some(e) = &f.error {
        href.push_str(&format!("&error={}", encode(e)));
    }
    if let Some(c) = cursor {
        href.push_str(&format!("&cursor={}", encode(c)));
    }
    href
}
