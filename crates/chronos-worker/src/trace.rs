//! The OpenTelemetry side of the task span (feature `opentelemetry`): messaging attributes and
//! a link to the producer's trace context.

use chronos_core::{parse_trace_context, Lease};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Adds the OpenTelemetry messaging attributes of a `process` span and links it to the trace
/// context the producer left in the task's headers.
///
/// A link and not a parent: a task fired by a repeating schedule, or retried for days, would
/// otherwise make one endless trace of everything that ever ran from it.
pub(crate) fn decorate(span: &Span, lease: &Lease) {
    span.set_attribute("messaging.system", "chronos");
    span.set_attribute("messaging.operation.name", "process");
    span.set_attribute("messaging.operation.type", "process");
    span.set_attribute(
        "messaging.destination.name",
        lease.id.queue.as_str().to_string(),
    );
    span.set_attribute("messaging.message.id", lease.id.task_id.clone());
    if let Ok(env) = &lease.envelope {
        if let Some(producer) = parse_trace_context(&env.headers) {
            span.add_link(producer);
        }
    }
}
