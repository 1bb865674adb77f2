//! Trace context across the queue: `enqueue` inside a producer span writes its W3C
//! `traceparent`, and the worker's `process <queue>` span links to it (a link, not a parent),
//! as an in-memory OpenTelemetry exporter records them. One test in its own binary: the
//! tracing subscriber is global to the process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos::prelude::*;
use chronos::TRACEPARENT_HEADER;
use opentelemetry::trace::{SpanId, SpanKind, TraceContextExt, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

#[derive(Serialize, Deserialize)]
struct Traced;
impl TaskArgs for Traced {
    const KIND: &'static str = "trace:traced";
}

#[tokio::test]
async fn the_process_span_links_to_the_producers_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("chronos-test")));
    tracing::subscriber::set_global_default(subscriber).expect("subscriber");

    let url = chronos_testkit::shared_url().expect("redis");
    let broker = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let q = "traced";

    // The producer: an enqueue inside its own span.
    let produce = tracing::info_span!("produce");
    let producer = produce.context().span().span_context().clone();
    assert!(
        producer.is_valid(),
        "the OpenTelemetry layer gives the span a context"
    );
    let info = Client::new(broker.clone())
        .enqueue(&Traced, EnqueueOptions::new().queue(q))
        .instrument(produce)
        .await
        .expect("enqueue");

    let seen = Arc::new(Mutex::new(None::<String>));
    let s = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _: Task<Traced>| {
        let s = s.clone();
        async move {
            *s.lock().map_err(|_| TaskError::retry("poisoned"))? =
                ctx.header(TRACEPARENT_HEADER).map(str::to_string);
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(broker, mux, ServerConfig::default().queues([(q, 1)]))
        .expect("server")
        .start()
        .await
        .expect("start");
    chronos_testkit::eventually(Duration::from_secs(10), "the task ran", || async {
        seen.lock().map(|s| s.is_some()).unwrap_or(false)
    })
    .await;
    server.shutdown().await;
    provider.force_flush().expect("flush");

    let header = seen.lock().expect("lock").clone().expect("traceparent");
    assert_eq!(
        header,
        format!("00-{}-{}-01", producer.trace_id(), producer.span_id()),
        "the header carries the producer span's context"
    );
    let spans = exporter.get_finished_spans().expect("spans");
    let process = spans
        .iter()
        .find(|s| s.name == format!("process {q}"))
        .unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|s| s.name.clone()).collect();
            panic!("no `process {q}` span among {names:?}")
        });
    assert_eq!(process.span_kind, SpanKind::Consumer);
    let linked: Vec<_> = process
        .links
        .links
        .iter()
        .map(|l| (l.span_context.trace_id(), l.span_context.span_id()))
        .collect();
    assert_eq!(linked, vec![(producer.trace_id(), producer.span_id())]);
    // A link, not a parent: the handler's trace is its own.
    assert_ne!(process.span_context.trace_id(), producer.trace_id());
    assert_eq!(process.parent_span_id, SpanId::INVALID);
    let attr = |key: &str| {
        process
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    };
    assert_eq!(attr("messaging.system"), Some(Value::from("chronos")));
    assert_eq!(
        attr("messaging.operation.name"),
        Some(Value::from("process"))
    );
    assert_eq!(attr("messaging.destination.name"), Some(Value::from(q)));
    assert_eq!(
        attr("messaging.message.id"),
        Some(Value::from(info.id.clone()))
    );
    assert_eq!(attr("kind"), Some(Value::from(Traced::KIND)));
    assert_eq!(attr("attempt"), Some(Value::I64(1)));
}
