//! The counters a request moves, read from a recorder installed for this test binary alone.

mod common;

use anyhow::Result;
use chronos_ingest::{metrics, IngestConfig};
use common::{ingest, Request};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;

/// A counter's name, labels and value.
type Counter = (String, Vec<(String, String)>, u64);

#[tokio::test]
async fn requests_and_accepted_tasks_are_counted_by_route_status_and_queue() -> Result<()> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    ::metrics::set_global_recorder(recorder)?;
    let ing = ingest(IngestConfig::default()).await?;
    let r = Request::post("/queues/counted/tasks", &json!({"kind": "job"}))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 201);
    let tasks: Vec<_> = (0..3).map(|_| json!({"kind": "job"})).collect();
    let r = Request::post("/queues/counted/tasks:batch", &json!({ "tasks": tasks }))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 200);
    let r = Request::post_raw("/queues/counted/tasks", b"{".to_vec())
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 400);
    assert_eq!(Request::get("/nope").send(ing.addr).await?.status, 404);

    let counters: Vec<Counter> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, v)| {
            let DebugValue::Counter(n) = v else {
                return None;
            };
            let k = key.key();
            let labels = k
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            Some((k.name().to_string(), labels, n))
        })
        .collect();
    let count = |name: &str, labels: &[(&str, &str)]| -> u64 {
        counters
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(.., c)| c)
            .sum()
    };
    let route = |r: &'static str, s: &'static str| [("route", r), ("status", s)];
    assert_eq!(
        count(metrics::REQUESTS, &route("/queues/{queue}/tasks", "201")),
        1
    );
    assert_eq!(
        count(
            metrics::REQUESTS,
            &route("/queues/{queue}/tasks:batch", "200")
        ),
        1
    );
    assert_eq!(
        count(metrics::REQUESTS, &route("/queues/{queue}/tasks", "400")),
        1
    );
    assert_eq!(count(metrics::REQUESTS, &route("unmatched", "404")), 1);
    assert_eq!(count(metrics::TASKS_ACCEPTED, &[("queue", "counted")]), 4);
    assert_eq!(
        count(metrics::TASKS_REFUSED, &[("code", "invalid_json")]),
        1
    );
    Ok(())
}
