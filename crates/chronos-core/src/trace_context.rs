//! W3C trace context (`traceparent`, `tracestate`) carried in task headers, from the producer's
//! span to the worker's.
//!
//! The few lines of the W3C format are written here rather than through an OpenTelemetry
//! propagator: the library then needs only the `opentelemetry` API crate, never the SDK, and
//! does not depend on which global propagator the application installed.

/// The header holding the producer's W3C `traceparent` (`00-<trace id>-<span id>-<flags>`).
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// The header holding the producer's W3C `tracestate`, when it has one.
pub const TRACESTATE_HEADER: &str = "tracestate";

#[cfg(feature = "opentelemetry")]
pub use self::otel::{current_trace_context, parse_trace_context};

#[cfg(feature = "opentelemetry")]
mod otel {
    use std::collections::BTreeMap;
    use std::str::FromStr;

    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::{TRACEPARENT_HEADER, TRACESTATE_HEADER};

    /// Writes the W3C trace context of the current `tracing` span (as the
    /// `tracing-opentelemetry` layer knows it) into `headers`. Writes nothing when there is no
    /// valid context (no OpenTelemetry layer, or no span), and never replaces a `traceparent`
    /// the caller set.
    pub fn current_trace_context(headers: &mut BTreeMap<String, String>) {
        if headers.contains_key(TRACEPARENT_HEADER) {
            return;
        }
        let cx = tracing::Span::current().context();
        let span = cx.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return;
        }
        headers.insert(
            TRACEPARENT_HEADER.to_string(),
            format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            ),
        );
        let state = sc.trace_state().header();
        if !state.is_empty() {
            headers.insert(TRACESTATE_HEADER.to_string(), state);
        }
    }

    /// The remote span context in `headers`, if they carry a well-formed `traceparent` (a
    /// malformed one is ignored, never an error: headers come from any producer).
    pub fn parse_trace_context(headers: &BTreeMap<String, String>) -> Option<SpanContext> {
        let value = headers.get(TRACEPARENT_HEADER)?.trim();
        let mut parts = value.split('-');
        let version = parts.next()?;
        let trace_id = parts.next()?;
        let span_id = parts.next()?;
        let flags = parts.next()?;
        // Version 00 has exactly four parts; later versions may append more, and `ff` is invalid.
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        if trace_id.len() != 32 || span_id.len() != 16 || flags.len() != 2 {
            return None;
        }
        let trace_id = TraceId::from_hex(trace_id).ok()?;
        let span_id = SpanId::from_hex(span_id).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        let state = headers
            .get(TRACESTATE_HEADER)
            .and_then(|s| TraceState::from_str(s).ok())
            .unwrap_or_default();
        let sc = SpanContext::new(trace_id, span_id, TraceFlags::new(flags), true, state);
        sc.is_valid().then_some(sc)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_traceparent_round_trips_and_junk_is_ignored() {
            let mut h = BTreeMap::new();
            h.insert(
                TRACEPARENT_HEADER.to_string(),
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
            );
            h.insert(
                TRACESTATE_HEADER.to_string(),
                "congo=t61rcWkgMzE".to_string(),
            );
            let sc = parse_trace_context(&h).expect("valid");
            assert_eq!(
                sc.trace_id().to_string(),
                "4bf92f3577b34da6a3ce929d0e0e4736"
            );
            assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
            assert!(sc.is_sampled() && sc.is_remote());
            assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
            for junk in [
                "",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            ] {
                h.insert(TRACEPARENT_HEADER.to_string(), junk.to_string());
                assert!(parse_trace_context(&h).is_none(), "{junk:?} was accepted");
            }
        }
    }
}
