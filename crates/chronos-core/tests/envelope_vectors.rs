//! Producer contract v1: the golden envelopes in `crates/chronos-protocol/contract/v1/
//! envelopes.json` are what this crate encodes, byte for byte, and decode back to their fields.
//! A change to the envelope's encoding fails here before it can reach a producer in another
//! language. `CHRONOS_BLESS=1` rewrites the file from the cases below (then review the diff: a
//! changed byte breaks every producer that follows the contract).

use std::time::Duration;

use chronos_core::{
    Codec, DeadLetter, EnqueueOptions, NewTask, TaskEnvelope, Timestamp, CODEC_HEADER,
    PRODUCER_HEADER,
};
use serde_json::{json, Value};

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../chronos-protocol/contract/v1/envelopes.json"
);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn envelope(
    id: &str,
    kind: &str,
    queue: &str,
    payload: &[u8],
    headers: &[(&str, &str)],
) -> TaskEnvelope {
    TaskEnvelope {
        id: id.into(),
        kind: kind.into(),
        queue: queue.into(),
        payload: payload.to_vec(),
        retried: 0,
        max_retry: 25,
        timeout_ms: None,
        deadline_ms: None,
        unique_key: None,
        retention_ms: None,
        dead_letter: DeadLetter::Archive,
        enqueued_at_ms: 1_764_633_600_000,
        last_error: None,
        last_failed_at_ms: None,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        rate_key: None,
        flow: None,
    }
}

/// The cases: each field a producer sets, in the forms a producer writes.
fn cases() -> Vec<(&'static str, TaskEnvelope)> {
    let json_hdr: &[(&str, &str)] = &[
        (CODEC_HEADER, "json"),
        (PRODUCER_HEADER, "chronos-py/0.1.0"),
    ];
    let packed = rmp_serde::to_vec_named(&json!({"to": "ada@example.com", "n": 7})).expect("mp");
    vec![
        (
            "plain task, JSON payload (id left out: the stream entry's id is the task's)",
            envelope(
                "",
                "email:send",
                "default",
                br#"{"to":"ada@example.com","n":7}"#,
                json_hdr,
            ),
        ),
        (
            "plain task, MessagePack payload, no headers",
            envelope("", "email:send", "default", &packed, &[]),
        ),
        (
            "explicit id, every option a producer sets",
            explicit().envelope,
        ),
        ("small and boundary integers", {
            let mut e = envelope("x", "k", "q", b"null", &[(CODEC_HEADER, "json")]);
            e.max_retry = 0;
            e.timeout_ms = Some(127);
            e.deadline_ms = Some(128);
            e.retention_ms = Some(65_536);
            e.enqueued_at_ms = 4_294_967_296;
            e
        }),
        ("an empty payload and a long kind", {
            let kind = "k".repeat(40);
            envelope("", &kind, "default", b"", &[])
        }),
    ]
}

/// The task of the third case, built as the Rust producer builds it: its unique key and its
/// fingerprint are derived (see `derived` in the vectors).
fn explicit() -> NewTask {
    let opts = EnqueueOptions::new()
        .queue("critical")
        .task_id("order-17")
        .max_retry(3)
        .timeout(Duration::from_secs(30))
        .deadline(Timestamp::from_unix_ms(1_764_720_000_000))
        .unique(Duration::from_secs(3600))
        .retention(Duration::from_secs(3600))
        .discard_on_dead_letter()
        .header(CODEC_HEADER, "json")
        .header(PRODUCER_HEADER, "chronos-py/0.1.0")
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
    let payload = br#"{"order":17,"tags":["a","\u00e9"],"price":12.5,"big":-4294967297}"#;
    NewTask::build("report:build", payload.to_vec(), opts, 1_764_633_600_000).expect("valid")
}

fn field_json(e: &TaskEnvelope) -> Value {
    json!({
        "id": e.id,
        "kind": e.kind,
        "queue": e.queue,
        "payload_hex": hex(&e.payload),
        "max_retry": e.max_retry,
        "timeout_ms": e.timeout_ms,
        "deadline_ms": e.deadline_ms,
        "unique_key": e.unique_key,
        "retention_ms": e.retention_ms,
        "dead_letter": match e.dead_letter { DeadLetter::Archive => "archive", DeadLetter::Discard => "discard" },
        "enqueued_at_ms": e.enqueued_at_ms,
        "headers": e.headers,
    })
}

fn generated() -> Value {
    let vectors: Vec<Value> = cases()
        .into_iter()
        .map(|(name, e)| {
            json!({
                "name": name,
                "fields": field_json(&e),
                "hex": hex(&e.encode().expect("encode")),
            })
        })
        .collect();
    let task = explicit();
    let derived = json!({
        "about": "Derived from the third envelope: `unique_key` is hex(SHA-256(queue 0x00 kind \
                  0x00 payload)); `fingerprint` is the first 16 bytes, hex, of SHA-256 over \
                  u64le(len kind) kind u64le(len payload) payload u32le(max_retry) \
                  i128le(timeout_ms or -1) i128le(deadline_ms or i128 min) \
                  i128le(retention_ms or -1) unique_key(or empty) 0x00 (0x01 discard, 0x00 archive).",
        "unique_key": task.envelope.unique_key,
        "fingerprint": task.fingerprint(),
    });
    json!({
        "contract": 1,
        "derived": derived,
        "about": "Golden envelopes of producer contract v1 (see ../CONTRACT.md): `hex` is the \
                  exact stored envelope for `fields` (version byte, then a MessagePack array of \
                  15 values). Generated by crates/chronos-core/tests/envelope_vectors.rs.",
        "envelopes": vectors,
    })
}

#[test]
fn the_golden_envelopes_are_what_the_rust_producer_writes_and_the_worker_reads() {
    let want = generated();
    let text = serde_json::to_string_pretty(&want).expect("json") + "\n";
    if std::env::var_os("CHRONOS_BLESS").is_some() {
        std::fs::write(FILE, &text).expect("write the vectors");
    }
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(FILE).expect("read the vectors"))
            .expect("vectors parse");
    let stored_list = stored["envelopes"].as_array().expect("a list");
    assert_eq!(stored_list.len(), cases().len(), "one vector per case");
    for ((name, env), v) in cases().into_iter().zip(stored_list) {
        assert_eq!(v["name"], name);
        if name.starts_with("explicit id") {
            assert_eq!(stored["derived"]["fingerprint"], explicit().fingerprint());
            assert_eq!(
                stored["derived"]["unique_key"].as_str(),
                env.unique_key.as_deref()
            );
        }
        assert_eq!(v["fields"], field_json(&env), "{name}: fields");
        let bytes = unhex(v["hex"].as_str().expect("hex"));
        assert_eq!(
            hex(&env.encode().expect("encode")),
            hex(&bytes),
            "{name}: bytes"
        );
        let back = TaskEnvelope::decode(&bytes).expect("the worker reads it");
        assert_eq!(back, env, "{name}: decoded");
        let codec = Codec::of(&back.headers).expect("a known codec");
        if codec == Codec::Json {
            let _: Value = serde_json::from_slice(&back.payload).expect("JSON payload");
        }
    }
}

#[test]
fn headers_in_any_order_decode_to_the_same_envelope() {
    // The contract asks producers to write headers sorted by key (byte-exact vectors), but a
    // reader takes any order: here the two headers of the first case, swapped by hand.
    let (_, env) = cases().remove(0);
    let mut swapped = vec![1u8];
    let mut enc = rmp_serde::encode::Serializer::new(&mut swapped);
    use serde::Serialize;
    let reversed: Vec<(String, String)> = env.headers.clone().into_iter().rev().collect();
    (
        &env.id,
        &env.kind,
        &env.queue,
        serde_bytes_like(&env.payload),
        env.retried,
        env.max_retry,
        env.timeout_ms,
        env.deadline_ms,
        &env.unique_key,
        env.retention_ms,
        env.dead_letter,
        env.enqueued_at_ms,
        &env.last_error,
        env.last_failed_at_ms,
        Ordered(reversed),
    )
        .serialize(&mut enc)
        .expect("encode");
    assert_ne!(swapped, env.encode().expect("encode"), "the order differs");
    assert_eq!(TaskEnvelope::decode(&swapped).expect("decode"), env);
}

/// A byte slice written as a MessagePack bin, as the envelope writes its payload.
fn serde_bytes_like(b: &[u8]) -> Bin<'_> {
    Bin(b)
}

struct Bin<'a>(&'a [u8]);

impl serde::Serialize for Bin<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A map written in the given order.
struct Ordered(Vec<(String, String)>);

impl serde::Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
