//! The ingest over real HTTP against a real Redis: what a request writes (read back through the
//! inspector), batches, idempotency keys, the token, the limits and every error's shape.

mod common;

use std::time::Duration;

use anyhow::Result;
use chronos_broker::{Client, Inspect, QueueName, RedisBroker, TaskState};
use chronos_ingest::{IngestConfig, IngestError};
use common::{ingest, ingest_over, Request};
use serde_json::json;

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

#[tokio::test]
async fn one_task_is_written_as_sent_and_reads_back_through_the_inspector() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let r = Request::post(
        "/queues/mail/tasks",
        &json!({
            "kind": "email:send",
            "payload": {"to": "ada@example.com", "n": 3, "tags": ["a", "b"]},
            "options": {"max_retry": 4, "timeout_ms": 30000, "retention_ms": 60000,
                        "priority": 2, "headers": {"trace": "t-1"}, "discard_on_dead": true}
        }),
    )
    .send(ing.addr)
    .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    let task = r.json();
    assert_eq!(task["queue"], "mail");
    assert_eq!(task["kind"], "email:send");
    assert_eq!(task["state"], "pending");
    assert_eq!(task["outcome"], "created");
    assert!(task["run_at_ms"].as_i64().is_some_and(|ms| ms > 0));
    let id = task["id"].as_str().expect("id");

    let rec = ing
        .broker
        .task(&q("mail"), id)
        .await?
        .expect("the task is stored");
    assert_eq!(rec.state, TaskState::Pending);
    assert_eq!(rec.priority.get(), 2);
    let env = rec.envelope.expect("envelope decodes");
    assert_eq!(env.kind, "email:send");
    assert_eq!(env.max_retry, 4);
    assert_eq!(env.timeout_ms, Some(30_000));
    assert_eq!(env.retention_ms, Some(60_000));
    assert_eq!(env.dead_letter, chronos_broker::DeadLetter::Discard);
    assert_eq!(env.headers.get("trace").map(String::as_str), Some("t-1"));
    assert!(env
        .headers
        .get(chronos_broker::PRODUCER_HEADER)
        .is_some_and(|p| p.starts_with("chronos-ingest/")));
    let payload: serde_json::Value =
        serde_json::from_str(&chronos_broker::payload_json(&env.payload))?;
    assert_eq!(
        payload,
        json!({"to": "ada@example.com", "n": 3, "tags": ["a", "b"]})
    );

    // A delayed task is scheduled at the time asked for.
    let at = chronos_broker::now_ms() + 3_600_000;
    let r = Request::post(
        "/queues/mail/tasks",
        &json!({"kind": "email:send", "options": {"process_at_ms": at}}),
    )
    .send(ing.addr)
    .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["state"], "scheduled");
    assert_eq!(r.json()["run_at_ms"], at);
    let stats = ing.broker.queue_stats(&q("mail")).await?;
    assert_eq!((stats.pending, stats.scheduled), (1, 1));
    Ok(())
}

#[tokio::test]
async fn a_batch_answers_each_task_in_order() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let tasks: Vec<_> = (0..5)
        .map(|n| json!({"kind": "job", "payload": {"n": n}}))
        .collect();
    let r = Request::post("/queues/work/tasks:batch", &json!({ "tasks": tasks }))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let results = r.json()["results"].as_array().expect("results").clone();
    assert_eq!(results.len(), 5);
    for item in &results {
        assert_eq!(item["status"], 201);
        assert_eq!(item["task"]["outcome"], "created");
        assert!(item.get("error").is_none());
    }
    assert_eq!(ing.broker.queue_stats(&q("work")).await?.pending, 5);

    // Mixed: refused tasks are answered in their place, the others are written.
    let r = Request::post(
        "/queues/work/tasks:batch",
        &json!({"tasks": [
            {"kind": "job", "payload": {"n": 10}},
            {"kind": "job", "options": {"id": "17-4"}},
            {"kind": "job", "options": {"priority": 12}},
            {"kind": "job", "payload": {"n": 11}, "options": {"id": "named-1"}},
        ]}),
    )
    .send(ing.addr)
    .await?;
    assert_eq!(r.status, 207, "{}", r.body);
    let results = r.json()["results"].as_array().expect("results").clone();
    let statuses: Vec<i64> = results
        .iter()
        .map(|i| i["status"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(statuses, vec![201, 400, 400, 201]);
    assert_eq!(results[1]["error"]["code"], "invalid_task_id");
    assert_eq!(results[2]["error"]["code"], "invalid_option");
    assert_eq!(results[3]["task"]["id"], "named-1");
    assert_eq!(ing.broker.queue_stats(&q("work")).await?.pending, 7);
    Ok(())
}

#[tokio::test]
async fn an_idempotency_key_answers_the_task_the_first_request_wrote() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let body = json!({"kind": "charge", "payload": {"order": 42}});
    let send = || {
        Request::post("/queues/billing/tasks", &body)
            .header("idempotency-key", "order-42")
            .send(ing.addr)
    };
    let first = send().await?;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.json()["id"], "idem-order-42");
    assert_eq!(first.json()["outcome"], "created");
    let again = send().await?;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["id"], "idem-order-42");
    assert_eq!(again.json()["outcome"], "existing");
    assert_eq!(ing.broker.queue_stats(&q("billing")).await?.pending, 1);

    // The same key for another task is a conflict, and writes nothing.
    let other = Request::post(
        "/queues/billing/tasks",
        &json!({"kind": "charge", "payload": {"order": 43}}),
    )
    .header("idempotency-key", "order-42")
    .send(ing.addr)
    .await?;
    assert_eq!(other.status, 409, "{}", other.body);
    assert_eq!(other.code(), "id_conflict");

    // A numeric key in a batch still makes valid ids (`idemb-7-0`, not the refused `7-0`).
    let batch = json!({"tasks": [{"kind": "charge", "payload": {"n": 1}},
                                 {"kind": "charge", "payload": {"n": 2}}]});
    let send_batch = || {
        Request::post("/queues/billing/tasks:batch", &batch)
            .header("idempotency-key", "7")
            .send(ing.addr)
    };
    let first = send_batch().await?;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = send_batch().await?;
    assert_eq!(again.status, 200, "{}", again.body);
    for (i, (a, b)) in first.json()["results"]
        .as_array()
        .expect("results")
        .iter()
        .zip(again.json()["results"].as_array().expect("results"))
        .enumerate()
    {
        assert_eq!(a["status"], 201);
        assert_eq!(b["status"], 200);
        assert_eq!(a["task"]["id"], format!("idemb-7-{i}"));
        assert_eq!(a["task"]["id"], b["task"]["id"]);
        assert_eq!(b["task"]["outcome"], "existing");
    }
    assert_eq!(ing.broker.queue_stats(&q("billing")).await?.pending, 3);

    let bad = Request::post("/queues/billing/tasks", &body)
        .header("idempotency-key", "has space")
        .send(ing.addr)
        .await?;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.code(), "invalid_idempotency_key");
    Ok(())
}

#[tokio::test]
async fn a_batch_key_and_a_single_key_never_name_the_same_task() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    // Batch key `k`, task 0, and single key `k-0`: two different requests, two tasks.
    let batch = Request::post(
        "/queues/keys/tasks:batch",
        &json!({"tasks": [{"kind": "charge", "payload": {"from": "batch"}}]}),
    )
    .header("idempotency-key", "k")
    .send(ing.addr)
    .await?;
    assert_eq!(batch.status, 200, "{}", batch.body);
    let batch_task = batch.json()["results"][0]["task"].clone();
    assert_eq!(batch_task["outcome"], "created", "{}", batch.body);
    let single = Request::post(
        "/queues/keys/tasks",
        &json!({"kind": "charge", "payload": {"from": "single"}}),
    )
    .header("idempotency-key", "k-0")
    .send(ing.addr)
    .await?;
    assert_eq!(single.status, 201, "{}", single.body);
    assert_eq!(single.json()["outcome"], "created");
    assert_eq!(
        single.json()["id"],
        "idem-k-0",
        "a single request's id is unchanged"
    );
    assert_ne!(single.json()["id"], batch_task["id"]);
    assert_eq!(ing.broker.queue_stats(&q("keys")).await?.pending, 2);
    Ok(())
}

#[tokio::test]
async fn a_token_is_required_and_compared() -> Result<()> {
    let ing = ingest(IngestConfig::default().token(Some("s3cret".into()))).await?;
    let body = json!({"kind": "job"});
    let none = Request::post("/queues/q/tasks", &body)
        .send(ing.addr)
        .await?;
    assert_eq!(none.status, 401);
    assert_eq!(none.code(), "unauthorized");
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    let wrong = Request::post("/queues/q/tasks", &body)
        .header("authorization", "Bearer s3cre")
        .send(ing.addr)
        .await?;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.code(), "unauthorized");
    let basic = Request::post("/queues/q/tasks", &body)
        .header("authorization", "Basic s3cret")
        .send(ing.addr)
        .await?;
    assert_eq!(basic.status, 401);
    assert_eq!(ing.broker.queue_stats(&q("q")).await?.pending, 0);
    let right = Request::post("/queues/q/tasks", &body)
        .header("authorization", "Bearer s3cret")
        .send(ing.addr)
        .await?;
    assert_eq!(right.status, 201, "{}", right.body);
    // A token makes any host name acceptable; the probe and the document stay open.
    let health = Request::get("/healthz")
        .header("host", "ingest.internal:8090")
        .send(ing.addr)
        .await?;
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json()["status"], "ok");
    assert_eq!(
        Request::get("/openapi.json").send(ing.addr).await?.status,
        200
    );
    Ok(())
}

#[tokio::test]
async fn a_non_loopback_address_needs_a_token() -> Result<()> {
    let broker = common::broker().await?;
    let open = IngestConfig::default().addr("0.0.0.0:0".parse()?);
    assert!(matches!(open.check(), Err(IngestError::TokenRequired(_))));
    // Refused before anything is bound.
    let r = chronos_ingest::serve(Client::new(broker.clone()), open.clone(), async {}).await;
    assert!(matches!(r, Err(IngestError::TokenRequired(_))), "{r:?}");
    // A listener the caller bound is checked too, whatever the config says.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await?;
    let r = chronos_ingest::serve_on(
        listener,
        Client::new(broker),
        IngestConfig::default(),
        async {},
    )
    .await;
    assert!(matches!(r, Err(IngestError::TokenRequired(_))), "{r:?}");
    assert!(open.token(Some("t".into())).check().is_ok());
    Ok(())
}

#[tokio::test]
async fn without_a_token_only_loopback_host_names_are_answered() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let r = Request::post("/queues/q/tasks", &json!({"kind": "job"}))
        .header("host", "rebound.example:8090")
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 421);
    assert_eq!(r.code(), "misdirected_request");
    let r = Request::post("/queues/q/tasks", &json!({"kind": "job"}))
        .header("host", "localhost:8090")
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    Ok(())
}

#[tokio::test]
async fn bodies_and_batches_over_their_limits_are_413() -> Result<()> {
    let ing = ingest(IngestConfig::default().body_limit(2048).batch_limit(3)).await?;
    let big = json!({"kind": "job", "payload": {"blob": "x".repeat(4096)}});
    let r = Request::post("/queues/q/tasks", &big)
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.code(), "body_too_large");
    // A declared length past the limit is refused before the body is sent.
    let r = Request::post_raw("/queues/q/tasks", Vec::new())
        .header("content-length", "10000000")
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.code(), "body_too_large");
    // A chunked body declares no length: it is cut off at the limit while it is read.
    let mut chunked = Vec::new();
    for _ in 0..4 {
        chunked.extend_from_slice(format!("400\r\n{}\r\n", " ".repeat(1024)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let r = Request::post_raw("/queues/q/tasks", chunked)
        .header("transfer-encoding", "chunked")
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.code(), "body_too_large");
    let four: Vec<_> = (0..4).map(|_| json!({"kind": "job"})).collect();
    let r = Request::post("/queues/q/tasks:batch", &json!({ "tasks": four }))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.code(), "too_many_tasks");
    assert_eq!(ing.broker.queue_stats(&q("q")).await?.pending, 0);
    Ok(())
}

#[tokio::test]
async fn a_payload_past_the_brokers_limit_is_422() -> Result<()> {
    let broker = RedisBroker::builder(chronos_testkit::shared_url()?)
        .namespace(chronos_testkit::namespace())
        .max_payload_bytes(64)
        .connect()
        .await?;
    let ing = ingest_over(broker, IngestConfig::default()).await?;
    let r = Request::post(
        "/queues/q/tasks",
        &json!({"kind": "job", "payload": {"blob": "x".repeat(200)}}),
    )
    .send(ing.addr)
    .await?;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.code(), "payload_too_large");
    Ok(())
}

#[tokio::test]
async fn malformed_requests_are_400_or_415_with_their_code() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let cases: &[(&str, u16, &str)] = &[
        ("{nope", 400, "invalid_json"),
        ("", 400, "invalid_json"),
        (r#"{"kind": 1}"#, 400, "invalid_request"),
        (r#"{"payload": {}}"#, 400, "invalid_request"),
        (
            r#"{"kind": "job", "options": {"max_retries": 3}}"#,
            400,
            "invalid_request",
        ),
        (
            r#"{"kind": "job", "options": {"process_in_ms": 5, "process_at_ms": 5}}"#,
            400,
            "invalid_option",
        ),
        (
            r#"{"kind": "job", "options": {"headers": {"chronos-codec": "json"}}}"#,
            400,
            "invalid_option",
        ),
        (r#"{"kind": ""}"#, 400, "invalid_kind"),
    ];
    for (body, status, code) in cases {
        let r = Request::post_raw("/queues/q/tasks", body.as_bytes().to_vec())
            .send(ing.addr)
            .await?;
        assert_eq!(
            (r.status, r.code().as_str()),
            (*status, *code),
            "{body}: {}",
            r.body
        );
    }
    let r = Request::post_raw("/queues/q/tasks:batch", b"{\"tasks\": 3}".to_vec())
        .send(ing.addr)
        .await?;
    assert_eq!((r.status, r.code().as_str()), (400, "invalid_request"));
    let r = Request::post("/queues/q/tasks", &json!({"kind": "job"}))
        .header("content-type", "text/plain")
        .send(ing.addr)
        .await?;
    assert_eq!(
        (r.status, r.code().as_str()),
        (415, "unsupported_media_type")
    );
    assert_eq!(ing.broker.queue_stats(&q("q")).await?.pending, 0);
    Ok(())
}

#[tokio::test]
async fn an_invalid_queue_name_is_422_invalid_queue() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    for path in [
        "/queues/a%20b/tasks",
        "/queues/%7Bx%7D/tasks",
        "/queues/a%20b/tasks:batch",
    ] {
        let body = if path.ends_with(":batch") {
            json!({"tasks": [{"kind": "job"}]})
        } else {
            json!({"kind": "job"})
        };
        let r = Request::post(path, &body).send(ing.addr).await?;
        assert_eq!(r.status, 422, "{path}: {}", r.body);
        assert_eq!(r.code(), "invalid_queue");
    }
    Ok(())
}

#[tokio::test]
async fn conflicts_are_409_with_their_code() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let unique =
        json!({"kind": "report", "payload": {"day": 1}, "options": {"unique_ttl_ms": 60000}});
    let r = Request::post("/queues/q/tasks", &unique)
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = Request::post("/queues/q/tasks", &unique)
        .send(ing.addr)
        .await?;
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "duplicate_task"),
        "{}",
        r.body
    );
    let named =
        |n: u32| json!({"kind": "report", "payload": {"n": n}, "options": {"id": "report-1"}});
    let r = Request::post("/queues/q/tasks", &named(1))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = Request::post("/queues/q/tasks", &named(1))
        .send(ing.addr)
        .await?;
    assert_eq!(
        (r.status, r.json()["outcome"].as_str()),
        (200, Some("existing"))
    );
    let r = Request::post("/queues/q/tasks", &named(2))
        .send(ing.addr)
        .await?;
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "id_conflict"),
        "{}",
        r.body
    );
    Ok(())
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let r = Request::get("/nope").send(ing.addr).await?;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    let r = Request::get("/queues/q/tasks").send(ing.addr).await?;
    assert_eq!((r.status, r.code().as_str()), (405, "method_not_allowed"));
    Ok(())
}

#[tokio::test]
async fn the_openapi_document_lists_every_route() -> Result<()> {
    let ing = ingest(IngestConfig::default()).await?;
    let r = Request::get("/openapi.json").send(ing.addr).await?;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json")));
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for (method, path) in [
        ("post", "/queues/{queue}/tasks"),
        ("post", "/queues/{queue}/tasks:batch"),
        ("get", "/healthz"),
        ("get", "/openapi.json"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    // The server is the one the document was read from (a relative URL), whatever port or proxy
    // it is served behind: a client generated from it must not call a fixed 127.0.0.1:8090.
    assert_ne!(ing.addr.port(), 8090);
    let servers = doc["servers"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no servers"))?;
    assert!(!servers.is_empty());
    for s in servers {
        assert_eq!(s["url"], "/", "{s}");
    }
    assert!(!r.body.contains("8090"), "a fixed port in {}", r.body);
    Ok(())
}

#[tokio::test]
async fn redis_down_is_503_redis_unavailable() -> Result<()> {
    let mut server = chronos_testkit::RedisServer::start()?;
    let broker = RedisBroker::builder(server.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await?;
    let ing = ingest_over(
        broker,
        IngestConfig::default().redis_timeout(Duration::from_millis(500)),
    )
    .await?;
    let r = Request::post("/queues/q/tasks", &json!({"kind": "job"}))
        .send(ing.addr)
        .await?;
    assert_eq!(r.status, 201, "{}", r.body);
    server.kill();
    let r = Request::post("/queues/q/tasks", &json!({"kind": "job"}))
        .header("idempotency-key", "k")
        .send(ing.addr)
        .await?;
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "redis_unavailable"),
        "{}",
        r.body
    );
    let h = Request::get("/healthz").send(ing.addr).await?;
    assert_eq!(h.status, 503);
    assert_eq!(h.json()["status"], "unavailable");
    Ok(())
}
