//! The server registry: records published with a TTL, listed while they live.

mod common;

use std::time::Duration;

use chronos_broker::{now_ms, Inspect, Maintain, ServerRecord};
use common::broker;

fn record(id: &str) -> ServerRecord {
    ServerRecord {
        id: id.into(),
        host: "h".into(),
        pid: 1,
        queues: vec![("default".into(), 1)],
        concurrency: 1,
        started_at_ms: now_ms(),
        running: 0,
        last_seen_ms: now_ms(),
        tasks: Vec::new(),
        archive_max: None,
    }
}

#[tokio::test]
async fn live_servers_names_those_whose_record_has_not_expired() {
    let b = broker().await;
    b.publish_server(&record("long"), Duration::from_secs(60))
        .await
        .expect("publish");
    b.publish_server(&record("short"), Duration::from_millis(300))
        .await
        .expect("publish");
    let mut live = b.live_servers().await.expect("live");
    live.sort();
    assert_eq!(live, ["long", "short"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.live_servers().await.expect("live"), ["long"]);
    let records: Vec<String> = b
        .servers()
        .await
        .expect("servers")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(records, ["long"], "the same answer as the records");
}
