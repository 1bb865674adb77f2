//! The JSON a producer sends, and how it becomes a [`NewTask`]: the options map one to one onto
//! [`EnqueueOptions`], the payload is stored as the console stores typed JSON
//! ([`chronos_core::json_payload`]: MessagePack with field names, which a worker decodes into
//! the handler's serde type).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use chronos_core::{
    json_payload, now_ms, EnqueueOptions, NewTask, Priority, QueueName, TaskInfo, Timestamp,
    PRODUCER_HEADER,
};
use serde::{Deserialize, Serialize};

use crate::api_error::ApiError;

/// The longest kind accepted (the console's limit too).
const MAX_KIND: usize = 200;

/// The longest `Idempotency-Key` accepted: with its prefix and a batch index the task id stays
/// well under the broker's 256 bytes.
pub(crate) const MAX_IDEMPOTENCY_KEY: usize = 200;

/// What the task id made from a single request's `Idempotency-Key` starts with. The prefix
/// keeps such ids apart from ids a producer chooses itself and never of the `<digits>-<digits>`
/// shape the broker keeps for generated ids (a numeric key in a batch would be `123-0` without
/// it).
pub(crate) const IDEMPOTENCY_PREFIX: &str = "idem-";

/// What the task ids made from a batch request's `Idempotency-Key` start with. Not
/// [`IDEMPOTENCY_PREFIX`]: with one prefix, batch key `k` task 0 (`idem-k-0`) was single key
/// `k-0`, so two different requests answered each other's task. No id starting with `idem-`
/// starts with `idemb-`, and within a batch the index after the last `-` has no `-` of its own,
/// so each (key, index) has its own id.
pub(crate) const IDEMPOTENCY_BATCH_PREFIX: &str = "idemb-";

/// The value the `chronos-producer` header gets unless the request sets its own: a worker
/// names it when a payload does not decode as the handler's type.
const PRODUCER: &str = concat!("chronos-ingest/", env!("CARGO_PKG_VERSION"));

/// One task: `{"kind": "...", "payload": <any JSON>, "options": {...}}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskRequest {
    kind: String,
    /// Any JSON; `{}` when left out.
    #[serde(default = "empty_object")]
    payload: serde_json::Value,
    #[serde(default)]
    options: TaskOptions,
}

/// A batch: `{"tasks": [<task>, ...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchRequest {
    pub(crate) tasks: Vec<TaskRequest>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// The options of one task; every one maps onto the [`EnqueueOptions`] setter of the same name.
/// An unknown option is refused (a misspelt `max_retries` must not pass unnoticed).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskOptions {
    process_in_ms: Option<u64>,
    process_at_ms: Option<i64>,
    max_retry: Option<u32>,
    unique_ttl_ms: Option<u64>,
    id: Option<String>,
    retention_ms: Option<u64>,
    timeout_ms: Option<u64>,
    deadline_ms: Option<i64>,
    priority: Option<PriorityArg>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    discard_on_dead: bool,
}

/// A level `0`..`9` or a preset name (`highest`, `high`, `normal`, `low`, `lowest`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PriorityArg {
    Level(u64),
    Name(String),
}

impl TaskRequest {
    /// The task to write into `queue`. `fallback_id` (made from an `Idempotency-Key`) is its id
    /// unless its options name one.
    pub(crate) fn into_task(
        self,
        queue: &QueueName,
        fallback_id: Option<String>,
    ) -> Result<NewTask, ApiError> {
        let kind = self.kind;
        if kind.is_empty() || kind.len() > MAX_KIND || kind.chars().any(char::is_control) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_kind",
                format!(
                    "task kind {kind:?} must be 1 to {MAX_KIND} bytes without control characters"
                ),
            ));
        }
        let o = self.options;
        let mut opts = EnqueueOptions::new().queue(queue.as_str());
        match (o.process_in_ms, o.process_at_ms) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_option(
                    "give process_in_ms or process_at_ms, not both",
                ))
            }
            (Some(ms), None) => opts = opts.process_in(Duration::from_millis(ms)),
            (None, Some(at)) => opts = opts.process_at(Timestamp::from_unix_ms(at)),
            (None, None) => {}
        }
        if let Some(n) = o.max_retry {
            opts = opts.max_retry(n);
        }
        if let Some(ms) = o.unique_ttl_ms {
            opts = opts.unique(Duration::from_millis(ms));
        }
        if let Some(id) = o.id.or(fallback_id) {
            opts = opts.task_id(id);
        }
        if let Some(ms) = o.retention_ms {
            opts = opts.retention(Duration::from_millis(ms));
        }
        if let Some(ms) = o.timeout_ms {
            if ms == 0 {
                return Err(ApiError::invalid_option("timeout_ms must be at least 1"));
            }
            opts = opts.timeout(Duration::from_millis(ms));
        }
        if let Some(at) = o.deadline_ms {
            opts = opts.deadline(Timestamp::from_unix_ms(at));
        }
        if let Some(p) = o.priority {
            let level = match p {
                PriorityArg::Level(n) => u8::try_from(n)
                    .map_err(|_| ApiError::invalid_option(format!("priority {n}: 0 to 9")))
                    .and_then(|n| Priority::level(n).map_err(ApiError::from))?,
                PriorityArg::Name(s) => s.parse::<Priority>()?,
            };
            opts = opts.priority(level);
        }
        if o.discard_on_dead {
            opts = opts.discard_on_dead_letter();
        }
        let mut producer_named = false;
        for (k, v) in o.headers {
            if k == PRODUCER_HEADER {
                producer_named = true;
            } else if k.starts_with("chronos-") {
                // The worker reads these (the payload codec, a schedule's trigger): a request
                // must not make its JSON payload read as another encoding.
                return Err(ApiError::invalid_option(format!(
                    "header {k:?}: names starting with chronos- are reserved \
                     (only {PRODUCER_HEADER} may be set)"
                )));
            }
            opts = opts.header(k, v);
        }
        if !producer_named {
            opts = opts.header(PRODUCER_HEADER, PRODUCER);
        }
        let payload = json_payload(&self.payload.to_string())?;
        Ok(NewTask::build(&kind, payload, opts, now_ms())?)
    }
}

/// The task id an `Idempotency-Key` gives: `idem-<key>`, and in a batch `idemb-<key>-<index>`.
pub(crate) fn idempotent_id(key: &str, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("{IDEMPOTENCY_BATCH_PREFIX}{key}-{i}"),
        None => format!("{IDEMPOTENCY_PREFIX}{key}"),
    }
}

/// The request's `Idempotency-Key`, checked: 1 to [`MAX_IDEMPOTENCY_KEY`] visible ASCII
/// characters (no spaces).
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters \
                 without spaces"
            ),
        )
    };
    let key = v.to_str().map_err(|_| bad())?;
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(bad());
    }
    Ok(Some(key.to_string()))
}

/// Refuses a body that does not say it is JSON (415 `unsupported_media_type`). Besides telling
/// a client its mistake, this keeps web pages out: a cross-site `fetch` with
/// `Content-Type: application/json` needs a CORS preflight, which this server never grants.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json =
        mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ))
    }
}

/// A task as answered: what the enqueue produced.
#[derive(Debug, Serialize)]
pub(crate) struct TaskReply {
    id: String,
    queue: String,
    kind: String,
    /// `pending` or `scheduled` (for a task that existed already: its state now).
    state: &'static str,
    run_at_ms: i64,
    /// `created`, `existing` (an explicit id or idempotency key answered with its task),
    /// `duplicate`, `replaced` or `extended` (deduplication outcomes of the broker).
    outcome: &'static str,
}

impl TaskReply {
    /// The answer for `info`; `existing`: the task id was in use before this request.
    pub(crate) fn new(info: TaskInfo, existing: bool) -> Self {
        use chronos_core::EnqueueOutcome;
        let outcome = match info.outcome {
            EnqueueOutcome::Created if existing => "existing",
            EnqueueOutcome::Created => "created",
            EnqueueOutcome::Duplicate => "duplicate",
            EnqueueOutcome::Replaced => "replaced",
            EnqueueOutcome::Extended => "extended",
            _ => "other",
        };
        Self {
            id: info.id,
            queue: info.queue,
            kind: info.kind,
            state: info.state.as_str(),
            run_at_ms: info.run_at_ms,
            outcome,
        }
    }

    /// True when this answer wrote a new task.
    pub(crate) fn created(&self) -> bool {
        self.outcome == "created"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn q() -> QueueName {
        QueueName::new("q").expect("queue")
    }

    fn task(json: &str) -> Result<NewTask, ApiError> {
        serde_json::from_str::<TaskRequest>(json)
            .expect("parses")
            .into_task(&q(), None)
    }

    #[test]
    fn options_map_onto_the_envelope() {
        let t = task(
            r#"{"kind":"k","payload":{"a":1},"options":{"max_retry":3,"timeout_ms":1500,
                "retention_ms":60000,"deadline_ms":99,"priority":"high","discard_on_dead":true,
                "headers":{"x":"y"},"id":"order-1","process_at_ms":5000}}"#,
        )
        .expect("task");
        let e = &t.envelope;
        assert_eq!(e.queue, "q");
        assert_eq!(e.kind, "k");
        assert_eq!(e.max_retry, 3);
        assert_eq!(e.timeout_ms, Some(1500));
        assert_eq!(e.retention_ms, Some(60_000));
        assert_eq!(e.deadline_ms, Some(99));
        assert_eq!(e.id, "order-1");
        assert_eq!(e.headers.get("x").map(String::as_str), Some("y"));
        assert_eq!(
            e.headers.get(PRODUCER_HEADER).map(String::as_str),
            Some(PRODUCER)
        );
        assert_eq!(t.priority(), Priority::HIGH);
        assert_eq!(t.run_at_ms, 5000);
        assert!(t.explicit_id());
        assert_eq!(e.payload, json_payload(r#"{"a":1}"#).expect("payload"));
    }

    #[test]
    fn bad_options_are_refused_with_their_code() {
        let code = |json: &str| task(json).map(|_| ()).unwrap_err().code;
        assert_eq!(
            code(r#"{"kind":"k","options":{"process_in_ms":1,"process_at_ms":1}}"#),
            "invalid_option"
        );
        assert_eq!(
            code(r#"{"kind":"k","options":{"priority":12}}"#),
            "invalid_option"
        );
        assert_eq!(
            code(r#"{"kind":"k","options":{"unique_ttl_ms":0}}"#),
            "invalid_option"
        );
        assert_eq!(
            code(r#"{"kind":"k","options":{"id":"17-4"}}"#),
            "invalid_task_id"
        );
        assert_eq!(
            code(r#"{"kind":"k","options":{"headers":{"chronos-codec":"json"}}}"#),
            "invalid_option"
        );
        assert_eq!(code(r#"{"kind":""}"#), "invalid_kind");
    }

    #[test]
    fn unknown_options_do_not_pass() {
        let e = serde_json::from_str::<TaskRequest>(r#"{"kind":"k","options":{"max_retries":1}}"#)
            .unwrap_err();
        assert_eq!(ApiError::from_json(&e).code, "invalid_request");
        let e = serde_json::from_str::<TaskRequest>(r#"{"kind":"k""#).unwrap_err();
        assert_eq!(ApiError::from_json(&e).code, "invalid_json");
    }

    #[test]
    fn idempotency_keys_never_make_a_generated_id_shape() {
        assert_eq!(idempotent_id("123", Some(0)), "idemb-123-0");
        assert_eq!(idempotent_id("17-4", None), "idem-17-4");
        assert!(!chronos_core::names::is_plain_id(&idempotent_id(
            "1",
            Some(2)
        )));
        let mut h = HeaderMap::new();
        h.insert("idempotency-key", HeaderValue::from_static("has space"));
        assert!(idempotency_key(&h).is_err());
        h.insert("idempotency-key", HeaderValue::from_static("k-1"));
        assert_eq!(idempotency_key(&h).expect("key").as_deref(), Some("k-1"));
    }

    #[test]
    fn json_content_types_pass() {
        let mut h = HeaderMap::new();
        assert!(require_json(&h).is_err());
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(require_json(&h).is_ok());
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(require_json(&h).is_err());
    }
}
