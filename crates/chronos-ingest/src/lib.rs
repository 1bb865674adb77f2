//! HTTP ingest for chronos-rs: services in any language enqueue tasks with a JSON `POST`, and a
//! Rust worker runs them with its typed handlers (`chronos ingest` serves it from the CLI).
//!
//! Who should depend on this crate: a Rust program that wants to serve the ingest itself
//! (inside its own axum app, say). A producer in another language needs only HTTP; a Rust
//! producer uses the [`chronos_core::Client`] directly.
//!
//! # Routes
//!
//! | route | what |
//! |---|---|
//! | `POST /queues/{queue}/tasks` | enqueue one task: 201 and the task (200 when its id or idempotency key named a task that exists) |
//! | `POST /queues/{queue}/tasks:batch` | enqueue up to [`IngestConfig::batch_limit`] tasks in one broker call: per task, in order, its answer; 200 when every task was answered with its task, 207 otherwise |
//! | `GET /healthz` | 200 `{"status":"ok"}` when Redis answers, 503 otherwise (no token needed) |
//! | `GET /openapi.json` | the OpenAPI 3.1 document of this API ([`OPENAPI_JSON`]; no token needed) |
//!
//! A task is `{"kind": "email:send", "payload": {...}, "options": {...}}`. The payload is any
//! JSON (`{}` when left out), stored as MessagePack with field names
//! ([`chronos_core::json_payload`], as the console's enqueue form does), so the worker's
//! handler for `kind` decodes it into its serde type as if a Rust producer had sent it. The
//! options map onto [`chronos_core::EnqueueOptions`]: `process_in_ms`, `process_at_ms` (unix
//! ms; not both), `max_retry`, `unique_ttl_ms`, `id` (an explicit task id), `retention_ms`,
//! `timeout_ms`, `deadline_ms` (unix ms), `priority` (0 to 9 or `highest`, `high`, `normal`,
//! `low`, `lowest`), `headers` (a string map; names starting with `chronos-` are reserved,
//! except `chronos-producer`, which is `chronos-ingest/<version>` unless set) and
//! `discard_on_dead`. An unknown field is refused, so a misspelt option does not pass
//! unnoticed. A batch is `{"tasks": [<task>, ...]}` and answers
//! `{"results": [{"status": 201, "task": {...}}, {"status": 409, "error": {...}}, ...]}`.
//!
//! A task answers `{"id", "queue", "kind", "state", "run_at_ms", "outcome"}`: `state` is
//! `pending` or `scheduled` (an existing task's state now), `outcome` is `created`, `existing`
//! or one of the broker's deduplication outcomes.
//!
//! # Idempotency
//!
//! A request may carry an `Idempotency-Key` header (1 to 200 visible ASCII characters). Its
//! task's id is then `idem-<key>`, and in a batch the id of task *i* (from 0) is
//! `idemb-<key>-<i>` (its own prefix, so that no batch task takes the id of a single request's
//! key, as batch key `k` task 0 and single key `k-0` would); a task with its own `options.id`
//! keeps that id. The broker writes a named
//! task once, so re-sending the request (after a timeout, a 503, a lost connection) answers
//! the same task with 200 and outcome `existing`, and writes nothing; a re-send with a
//! different task under the same key is 409 `id_conflict`. The prefix keeps keys apart from ids
//! producers choose and never yields the `<digits>-<digits>` shape the broker keeps for its own
//! ids (an `options.id` of that shape is refused with 400 `invalid_task_id`). Keys are scoped to
//! the queue, and hold while the task exists: once it completed and was deleted, the same key
//! writes a new task (set `retention_ms` to keep it, and the key's guard, longer).
//!
//! # Errors
//!
//! Every refusal is `{"error": {"code": "...", "message": "..."}}`; match on the code:
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `invalid_json`, `invalid_request` | the body is not JSON, or JSON of the wrong shape (missing `kind`, unknown field) |
//! | 400 | `invalid_option`, `invalid_kind`, `invalid_task_id`, `invalid_idempotency_key` | a value out of its range |
//! | 401 | `unauthorized` | no or a wrong bearer token |
//! | 404 | `not_found` | no such route |
//! | 405 | `method_not_allowed` | a route called with another method |
//! | 409 | `id_conflict` | the task id (or idempotency key) names another task |
//! | 409 | `duplicate_task` | a `unique_ttl_ms` lock of the same kind and payload is held |
//! | 413 | `body_too_large`, `too_many_tasks` | past [`IngestConfig::body_limit`] or [`IngestConfig::batch_limit`] |
//! | 415 | `unsupported_media_type` | the body is not sent as `application/json` |
//! | 421 | `misdirected_request` | an ingest without a token asked under a non-loopback host name |
//! | 422 | `invalid_queue`, `payload_too_large` | a queue name or a stored payload the broker refuses |
//! | 503 | `redis_unavailable` | Redis failed or gave no answer within [`IngestConfig::redis_timeout`]: re-send with the same `Idempotency-Key` |
//!
//! # Safe by default
//!
//! Without a token the ingest listens only on a loopback address ([`serve`] refuses any other
//! with [`IngestError::TokenRequired`]) and answers only requests addressed to a loopback host
//! name; with one, every route but `/healthz` and `/openapi.json` needs
//! `Authorization: Bearer <token>`, compared by digest in constant time. Bodies must be sent as
//! `application/json`, which a web page on another site cannot do without a CORS preflight
//! that this server never grants.
//!
//! Requests and accepted tasks are counted through the `metrics` facade (names in
//! [`metrics`]), and refusals logged through `tracing`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use chronos_broker::{Client, Connect};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let config = chronos_ingest::IngestConfig::default().token(Some("s3cret".into()));
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! chronos_ingest::serve(client, config, stop).await?;
//! # Ok(()) }
//! ```
//!
//! ```text
//! curl -H 'Authorization: Bearer s3cret' -H 'Content-Type: application/json' \
//!      -H 'Idempotency-Key: order-42' \
//!      -d '{"kind":"email:send","payload":{"to":"ada@example.com"},"options":{"max_retry":3}}' \
//!      http://127.0.0.1:8090/queues/default/tasks
//! ```

#![forbid(unsafe_code)]

mod api_error;
mod auth;
mod config;
mod enqueue;
mod error;
mod health;
pub mod metrics;
mod request;
mod router;
mod routes;
mod server;
mod state;

pub use config::{IngestConfig, DEFAULT_BATCH_LIMIT, DEFAULT_BODY_LIMIT, DEFAULT_REDIS_TIMEOUT};
pub use error::IngestError;
pub use router::{router, OPENAPI_JSON};
pub use server::{serve, serve_on};
