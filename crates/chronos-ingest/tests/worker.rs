//! A Rust worker runs tasks that came in over HTTP: the JSON payload reaches its handler
//! decoded into the handler's serde type, as if a Rust producer had enqueued it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use chronos_broker::TaskArgs;
use chronos_ingest::IngestConfig;
use chronos_worker::{Context, Mux, Server, ServerConfig, Task};
use common::{ingest, Request};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Email {
    to: String,
    attempts: u32,
    tags: Vec<String>,
    #[serde(default)]
    cc: Option<String>,
}

impl TaskArgs for Email {
    const KIND: &'static str = "email:send";
}

/// Each run: task id, its args, its producer header.
type Runs = Arc<Mutex<Vec<(String, Email, Option<String>)>>>;

#[tokio::test]
async fn a_worker_runs_http_tasks_with_their_args_decoded() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let seen: Runs = Arc::default();
    let log = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Email>| {
        let log = log.clone();
        async move {
            let producer = t.headers.get(chronos_broker::PRODUCER_HEADER).cloned();
            log.lock()
                .expect("lock")
                .push((ctx.task_id().to_string(), t.args, producer));
            Ok(())
        }
    })?;
    let config = ServerConfig {
        concurrency: 2,
        shutdown_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    }
    .queues([("mail", 1)]);
    let server = Server::new(ing.broker.clone(), mux, config)?
        .start()
        .await?;

    let one = Request::post(
        "/queues/mail/tasks",
        &json!({"kind": "email:send", "payload": {"to": "ada@example.com", "attempts": 3, "tags": ["x"]}}),
    )
    .send(ing.addr)
    .await?;
    assert_eq!(one.status, 201, "{}", one.body);
    let batch = Request::post(
        "/queues/mail/tasks:batch",
        &json!({"tasks": [
            {"kind": "email:send", "payload": {"to": "b@example.com", "attempts": 0, "tags": [], "cc": "c@example.com"}},
            {"kind": "email:send", "payload": {"to": "d@example.com", "attempts": 1, "tags": ["y", "z"]},
             "options": {"priority": "high"}},
        ]}),
    )
    .header("idempotency-key", "welcome")
    .send(ing.addr)
    .await?;
    assert_eq!(batch.status, 200, "{}", batch.body);

    chronos_testkit::eventually(Duration::from_secs(20), "three tasks run", || async {
        seen.lock().expect("lock").len() >= 3
    })
    .await;
    server.shutdown().await;
    let mut runs = seen.lock().expect("lock").clone();
    runs.sort_by(|a, b| a.1.to.cmp(&b.1.to));
    let args: Vec<Email> = runs.iter().map(|r| r.1.clone()).collect();
    assert_eq!(
        args,
        vec![
            Email {
                to: "ada@example.com".into(),
                attempts: 3,
                tags: vec!["x".into()],
                cc: None
            },
            Email {
                to: "b@example.com".into(),
                attempts: 0,
                tags: vec![],
                cc: Some("c@example.com".into())
            },
            Email {
                to: "d@example.com".into(),
                attempts: 1,
                tags: vec!["y".into(), "z".into()],
                cc: None
            },
        ]
    );
    assert_eq!(runs[0].0, one.json()["id"].as_str().expect("id"));
    assert_eq!(runs[1].0, "idemb-welcome-0");
    assert_eq!(runs[2].0, "idemb-welcome-1");
    assert!(runs.iter().all(|r| r
        .2
        .as_deref()
        .is_some_and(|p| p.starts_with("chronos-ingest/"))));
    Ok(())
}
