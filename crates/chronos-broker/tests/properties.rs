//! Bad input at volume: property tests of everything the broker parses (task envelopes, task
//! arguments, schedule and server records, payload display, queue names, namespaces, task ids;
//! against a real Redis, stream entries as the fetch path reads them and listing cursors as a
//! console passes them on).
//!
//! Each property feeds both arbitrary input and near-valid input (a valid value encoded, then
//! mutated) and checks three things: no panic (proptest reports a panic as a failure and shrinks
//! it), a rejection is the typed error variant the input deserves, and a value that has an
//! encoder round-trips.
//!
//! Case counts: a modest default per property so the suite stays quick in debug builds;
//! `PROPTEST_CASES` overrides it (`cargo xtask fuzz` runs every property in release with counts
//! that add up to a million inputs).

use chronos_broker::fred::interfaces::StreamsInterface;
use chronos_broker::fred::types::{Key, Value};
use chronos_broker::{
    decode_args, encode_args, payload_json, BrokerError, Completion, Consume, DeadLetter,
    DecodeError, EnqueueOptions, Keyspace, NewTask, QueueName, RedisBroker, ScheduleEntry,
    ServerRecord, SettleExt, TaskArgs, TaskEnvelope, ENVELOPE_VERSION, MAX_NAME_LEN,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde::{Deserialize, Serialize};

/// The case count of a property: `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        // Failing inputs are kept as named regression tests below, not in files beside the
        // sources.
        failure_persistence: None,
        ..Config::default()
    }
}

/// Default cases of a pure (in-memory) property.
const PURE: u32 = 2_000;
/// Default cases of a property that talks to Redis.
const REDIS: u32 = 100;

// ---------------------------------------------------------------------------------------------
// Strategies

fn small_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9:_-]{0,16}",
        any::<String>().prop_map(|s| s.chars().take(24).collect()),
    ]
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

fn arb_envelope() -> impl Strategy<Value = TaskEnvelope> {
    let identity = (
        small_string(),
        small_string(),
        small_string(),
        proptest::collection::vec(any::<u8>(), 0..64),
    );
    let policy = (
        any::<u32>(),
        any::<u32>(),
        opt(any::<u64>()),
        opt(any::<i64>()),
        opt(small_string()),
        opt(any::<u64>()),
        any::<bool>(),
    );
    let history = (
        any::<i64>(),
        opt(small_string()),
        opt(any::<i64>()),
        proptest::collection::btree_map(small_string(), small_string(), 0..4),
        opt(small_string()),
    );
    (identity, policy, history).prop_map(
        |(
            (id, kind, queue, payload),
            (retried, max_retry, timeout_ms, deadline_ms, unique_key, retention_ms, discard),
            (enqueued_at_ms, last_error, last_failed_at_ms, headers, rate_key),
        )| TaskEnvelope {
            id,
            kind,
            queue,
            payload,
            retried,
            max_retry,
            timeout_ms,
            deadline_ms,
            unique_key,
            retention_ms,
            dead_letter: if discard {
                DeadLetter::Discard
            } else {
                DeadLetter::Archive
            },
            enqueued_at_ms,
            last_error,
            last_failed_at_ms,
            headers,
            flow: None,
            rate_key,
        },
    )
}

/// One edit of a byte string; positions are taken modulo the length, so every edit applies.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    /// Overwrite with a MessagePack marker byte (type tags are where decoders branch).
    Marker(usize, u8),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    let markers = prop::sample::select(vec![
        0xc0u8, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd9, 0xda,
        0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xff, 0x7f,
    ]);
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), markers).prop_map(|(i, b)| Mutation::Marker(i, b)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match *m {
        Mutation::Insert(i, b) => bytes.insert(i % (len + 1), b),
        Mutation::Truncate(i) => bytes.truncate(i % (len + 1)),
        _ if len == 0 => {}
        Mutation::FlipBit(i, bit) => bytes[i % len] ^= 1 << bit,
        Mutation::Set(i, b) | Mutation::Marker(i, b) => bytes[i % len] = b,
        Mutation::Remove(i) => {
            bytes.remove(i % len);
        }
    }
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(arb_mutation(), 1..4)
}

/// Arbitrary bytes, half of them behind the current version byte so the decoder gets past it.
fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..128),
        proptest::collection::vec(any::<u8>(), 0..128).prop_map(|mut v| {
            v.insert(0, ENVELOPE_VERSION);
            v
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Task envelopes

/// What a decode of `bytes` must give: Ok only behind the current version byte, and each
/// rejection the variant that names what is wrong. An accepted envelope re-encodes to bytes
/// that decode to the same envelope.
fn check_envelope_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    match TaskEnvelope::decode(bytes) {
        Ok(env) => {
            prop_assert_eq!(bytes.first(), Some(&ENVELOPE_VERSION));
            let again = env
                .encode()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(TaskEnvelope::decode(&again), Ok(env));
        }
        Err(DecodeError::Empty) => prop_assert!(bytes.is_empty()),
        Err(DecodeError::UnsupportedVersion(v)) => {
            prop_assert_eq!(bytes.first(), Some(&v));
            prop_assert_ne!(v, ENVELOPE_VERSION);
        }
        Err(DecodeError::Malformed(reason)) => {
            prop_assert_eq!(bytes.first(), Some(&ENVELOPE_VERSION));
            prop_assert!(!reason.is_empty());
        }
        Err(other) => prop_assert!(false, "envelope decode gave {other:?}"),
    }
    Ok(())
}

#[test]
fn envelope_round_trips() {
    TestRunner::new(config(PURE))
        .run(&arb_envelope(), |env| {
            let bytes = env
                .encode()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(bytes[0], ENVELOPE_VERSION);
            prop_assert_eq!(TaskEnvelope::decode(&bytes), Ok(env));
            Ok(())
        })
        .unwrap();
}

#[test]
fn envelope_decode_of_arbitrary_bytes() {
    TestRunner::new(config(PURE))
        .run(&arb_bytes(), |bytes| check_envelope_decode(&bytes))
        .unwrap();
}

#[test]
fn envelope_decode_of_mutated_envelopes() {
    TestRunner::new(config(PURE))
        .run(&(arb_envelope(), mutations()), |(env, ms)| {
            let mut bytes = env
                .encode()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for m in &ms {
                mutate(&mut bytes, m);
            }
            check_envelope_decode(&bytes)
        })
        .unwrap();
}

/// Deep nesting and huge declared lengths: the shapes that exhaust a recursive or trusting
/// decoder.
#[test]
fn envelope_decode_of_hostile_shapes() {
    let hostile = prop_oneof![
        // nested one-element arrays or maps, as deep as the input is long
        (
            1usize..200_000,
            prop::sample::select(vec![0x91u8, 0x81, 0xdc])
        )
            .prop_map(|(n, b)| {
                let mut v = vec![ENVELOPE_VERSION];
                v.resize(n + 1, b);
                v
            }),
        // a container or string announcing up to 4 GiB of content that is not there
        (
            prop::sample::select(vec![0xc6u8, 0xdb, 0xdd, 0xdf]),
            any::<u32>()
        )
            .prop_map(|(tag, len)| {
                let mut v = vec![ENVELOPE_VERSION, tag];
                v.extend_from_slice(&len.to_be_bytes());
                v
            }),
        // a positional array of the right width whose fields are all the same odd value
        (any::<u8>(), 0usize..20).prop_map(|(b, n)| {
            let mut v = vec![ENVELOPE_VERSION, 0xdc, 0, n as u8];
            v.extend(std::iter::repeat_n(b, n));
            v
        }),
    ];
    TestRunner::new(config(PURE / 10))
        .run(&hostile, |bytes| check_envelope_decode(&bytes))
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Task arguments and payload display

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Args {
    to: String,
    n: u32,
    tags: Vec<String>,
    at: Option<i64>,
    body: Vec<u8>,
}

impl TaskArgs for Args {
    const KIND: &'static str = "props:args";
}

fn arb_args() -> impl Strategy<Value = Args> {
    (
        small_string(),
        any::<u32>(),
        proptest::collection::vec(small_string(), 0..4),
        opt(any::<i64>()),
        proptest::collection::vec(any::<u8>(), 0..32),
    )
        .prop_map(|(to, n, tags, at, body)| Args {
            to,
            n,
            tags,
            at,
            body,
        })
}

fn check_args_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    match decode_args::<Args>(bytes) {
        Ok(args) => {
            let again = encode_args(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode_args::<Args>(&again).ok(), Some(args));
        }
        Err(DecodeError::Payload { kind, reason }) => {
            prop_assert_eq!(kind.as_str(), Args::KIND);
            prop_assert!(!reason.is_empty());
        }
        Err(other) => prop_assert!(false, "decode_args gave {other:?}"),
    }
    // Whatever the bytes, the console's display of them is one valid JSON value.
    let shown = payload_json(bytes);
    prop_assert!(
        serde_json::from_str::<serde_json::Value>(&shown).is_ok(),
        "payload_json gave {shown:?}"
    );
    Ok(())
}

#[test]
fn args_round_trip_and_display() {
    TestRunner::new(config(PURE))
        .run(&arb_args(), |args| {
            let bytes = encode_args(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode_args::<Args>(&bytes).ok(), Some(args));
            check_args_decode(&bytes)
        })
        .unwrap();
}

#[test]
fn args_decode_of_arbitrary_and_mutated_bytes() {
    let input = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..128),
        (arb_args(), mutations()).prop_map(|(args, ms)| {
            let mut bytes = encode_args(&args).unwrap_or_default();
            for m in &ms {
                mutate(&mut bytes, m);
            }
            bytes
        }),
    ];
    TestRunner::new(config(PURE))
        .run(&input, |bytes| check_args_decode(&bytes))
        .unwrap();
}

/// The console shows any payload, however deep: nesting past the decoder's depth limit falls
/// back to hex instead of overflowing the stack.
#[test]
fn payload_display_of_deep_nesting() {
    // Most cases sit around the display's depth limit (100); some go far past it.
    let depth = prop_oneof![4 => 1usize..300, 1 => 1usize..100_000];
    let deep = (depth, prop::sample::select(vec![0x91u8, 0x81])).prop_map(|(n, b)| {
        let mut v = vec![b; n];
        v.push(0xc0);
        v
    });
    TestRunner::new(config(PURE / 10))
        .run(&deep, |bytes| check_args_decode(&bytes))
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Schedule registry entries and worker server records

fn arb_schedule_entry() -> impl Strategy<Value = ScheduleEntry> {
    (
        (
            small_string(),
            small_string(),
            small_string(),
            small_string(),
        ),
        (
            small_string(),
            opt(any::<i64>()),
            opt(any::<u64>()),
            opt(any::<i64>()),
        ),
        (
            opt(small_string()),
            small_string(),
            any::<i64>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (id, spec, zone, queue),
                (kind, next_run_ms, every_ms, last_fired_ms),
                (last_task_id, registered_by, last_seen_ms, stale),
            )| ScheduleEntry {
                id,
                spec,
                zone,
                queue,
                kind,
                next_run_ms,
                every_ms,
                last_fired_ms,
                last_task_id,
                registered_by,
                last_seen_ms,
                stale,
                source: chronos_broker::ScheduleSource::Code,
                paused: false,
            },
        )
}

fn arb_server_record() -> impl Strategy<Value = ServerRecord> {
    (
        small_string(),
        small_string(),
        any::<u32>(),
        proptest::collection::vec((small_string(), any::<u32>()), 0..4),
        any::<u32>(),
        any::<i64>(),
        any::<u32>(),
        any::<i64>(),
    )
        .prop_map(
            |(id, host, pid, queues, concurrency, started_at_ms, running, last_seen_ms)| {
                ServerRecord {
                    id,
                    host,
                    pid,
                    queues,
                    concurrency,
                    started_at_ms,
                    running,
                    last_seen_ms,
                    tasks: Vec::new(),
                    archive_max: None,
                }
            },
        )
}

fn only_malformed<T>(r: Result<T, DecodeError>) -> Result<Option<T>, TestCaseError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(DecodeError::Malformed(reason)) if !reason.is_empty() => Ok(None),
        Err(other) => Err(TestCaseError::fail(format!("record decode gave {other:?}"))),
    }
}

#[test]
fn schedule_entries_round_trip_and_reject_mutations() {
    TestRunner::new(config(PURE))
        .run(&(arb_schedule_entry(), mutations()), |(entry, ms)| {
            let mut bytes = entry
                .encode()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(ScheduleEntry::decode(&bytes), Ok(entry));
            for m in &ms {
                mutate(&mut bytes, m);
            }
            if let Some(e) = only_malformed(ScheduleEntry::decode(&bytes))? {
                let again = e.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(ScheduleEntry::decode(&again), Ok(e));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn server_records_round_trip_and_reject_mutations() {
    TestRunner::new(config(PURE))
        .run(&(arb_server_record(), mutations()), |(rec, ms)| {
            let mut bytes = rec
                .encode()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(ServerRecord::decode(&bytes), Ok(rec));
            for m in &ms {
                mutate(&mut bytes, m);
            }
            if let Some(r) = only_malformed(ServerRecord::decode(&bytes))? {
                let again = r.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(ServerRecord::decode(&again), Ok(r));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn records_decode_of_arbitrary_bytes() {
    TestRunner::new(config(PURE))
        .run(&proptest::collection::vec(any::<u8>(), 0..128), |bytes| {
            only_malformed(ScheduleEntry::decode(&bytes))?;
            only_malformed(ServerRecord::decode(&bytes))?;
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Queue names, namespaces, task ids

/// Which rule a queue name or namespace breaks, as a word its error's reason must contain;
/// None when the name is valid. Written from the documented rules, not from the code.
fn name_rule(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("128")
    } else if name.contains(['{', '}']) {
        Some("'{'")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("whitespace")
    } else {
        None
    }
}

/// Names near the rules' edges: valid characters around a length limit, with a brace,
/// whitespace or control character slipped in at some position.
fn near_valid_name() -> impl Strategy<Value = String> {
    let bad = prop::sample::select(vec![
        None,
        Some('{'),
        Some('}'),
        Some(' '),
        Some('\t'),
        Some('\n'),
        Some('\r'),
        Some('\0'),
        Some('\u{7f}'),
        Some('\u{85}'),
        Some('\u{a0}'),
        Some('\u{2028}'),
        Some('\u{3000}'),
        Some('\u{feff}'),
    ]);
    let base = prop_oneof!["[a-zA-Z0-9:._-]{1,24}", "[a-z]{120,136}", "[é日a-z]{40,70}",];
    (base, bad, any::<usize>()).prop_map(|(mut s, bad, at)| {
        if let Some(c) = bad {
            let cut = s
                .char_indices()
                .map(|(i, _)| i)
                .chain([s.len()])
                .nth(at % (s.chars().count() + 1))
                .unwrap_or(0);
            s.insert(cut, c);
        }
        s
    })
}

fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), near_valid_name()]
}

/// The hash tag Redis Cluster hashes a key by: between the first `{` and the first `}` after it.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    Some(&key[open + 1..open + 1 + close])
}

#[test]
fn queue_names_are_valid_or_typed_errors() {
    TestRunner::new(config(PURE))
        .run(&(any_name(), any::<String>()), |(name, id)| {
            match (QueueName::new(name.clone()), name_rule(&name)) {
                (Ok(q), None) => {
                    prop_assert_eq!(q.as_str(), name.as_str());
                    // Every key of the queue hashes by the queue's tag, whatever follows it.
                    let keys = Keyspace::default().queue(&q);
                    for key in [
                        keys.stream(),
                        keys.task(&id),
                        keys.unique(&id),
                        keys.done(&id),
                        keys.receipt(&id),
                        keys.archived(),
                    ] {
                        prop_assert_eq!(hash_tag(&key), Some(name.as_str()));
                        prop_assert!(keys.owns(&key));
                    }
                }
                (
                    Err(BrokerError::InvalidQueue {
                        name: given,
                        reason,
                    }),
                    Some(rule),
                ) => {
                    prop_assert_eq!(&given, &name);
                    prop_assert!(reason.contains(rule), "{reason:?} should name {rule:?}");
                }
                (got, want) => prop_assert!(false, "{name:?}: got {got:?}, rule {want:?}"),
            }
            match (Keyspace::new(name.clone()), name_rule(&name)) {
                (Ok(ks), None) => prop_assert_eq!(ks.namespace(), name.as_str()),
                (
                    Err(BrokerError::InvalidNamespace {
                        name: given,
                        reason,
                    }),
                    Some(rule),
                ) => {
                    prop_assert_eq!(&given, &name);
                    prop_assert!(reason.contains(rule));
                }
                (got, want) => prop_assert!(false, "namespace {name:?}: {got:?}, rule {want:?}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn task_ids_are_valid_or_typed_errors() {
    let ids = prop_oneof![
        any::<String>(),
        near_valid_name(),
        "[a-f0-9]{250,262}",
        "[{}a-z]{1,40}",
    ];
    TestRunner::new(config(PURE))
        .run(&ids, |id| {
            let want = if id.is_empty() {
                Some("empty")
            } else if id.len() > 256 {
                Some("256")
            } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Some("whitespace")
            } else {
                None
            };
            let built = NewTask::build(
                Args::KIND,
                vec![0x90],
                EnqueueOptions::new().task_id(id.clone()),
                1_700_000_000_000,
            );
            match (built, want) {
                (Ok(t), None) => prop_assert_eq!(t.envelope.id, id),
                (Err(BrokerError::InvalidTaskId { id: given, reason }), Some(rule)) => {
                    prop_assert_eq!(&given, &id);
                    prop_assert!(reason.contains(rule));
                }
                (got, want) => prop_assert!(false, "task id {id:?}: {got:?}, rule {want:?}"),
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Stream entries, read back through the fetch path of a real Redis

/// A stream entry's fields as written: each name and value raw bytes.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Fields of one entry: the task fields a producer writes (`i`, `e`, `r`, `err`, `f`) with odd
/// values (mutated envelopes, non-UTF-8 ids, junk counts), foreign fields, duplicates, or
/// neither.
fn arb_entry() -> impl Strategy<Value = Fields> {
    let name = prop_oneof![
        4 => prop::sample::select(vec!["i", "e", "r", "err", "f"]).prop_map(|s| s.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..6),
    ];
    let value = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        "[0-9a-f]{1,32}".prop_map(String::into_bytes),
        "-?[0-9]{1,20}".prop_map(String::into_bytes),
        (
            arb_envelope(),
            proptest::collection::vec(arb_mutation(), 0..3)
        )
            .prop_map(|(env, ms)| {
                let mut bytes = env.encode().unwrap_or_default();
                for m in &ms {
                    mutate(&mut bytes, m);
                }
                bytes
            }),
    ];
    proptest::collection::vec((name, value), 1..7)
}

/// The first value of field `name`, as the scripts read an entry.
fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(k, _)| k == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

#[test]
fn redis_stream_entries_fetch_as_leases_or_drops() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let broker: RedisBroker = rt
        .block_on(
            RedisBroker::builder(url)
                .namespace(chronos_testkit::namespace())
                .connect(),
        )
        .expect("connect");
    // The runner takes a `Fn`, so the reader sits behind a lock.
    let reader = tokio::sync::Mutex::new(rt.block_on(broker.open_reader()).expect("reader"));
    let queue = QueueName::new("props").expect("queue");
    rt.block_on(broker.ensure_queue(&queue)).expect("group");
    let stream = broker.keyspace().queue(&queue).stream();

    let entries = proptest::collection::vec(arb_entry(), 1..6);
    TestRunner::new(config(REDIS))
        .run(&entries, |entries| {
            rt.block_on(async {
                let mut mids = Vec::new();
                for fields in &entries {
                    let pairs: Vec<(Key, Value)> = fields
                        .iter()
                        .map(|(k, v)| (Key::from(k.as_slice()), Value::from(v.as_slice())))
                        .collect();
                    let mid: String = broker
                        .client()
                        .xadd(stream.as_str(), false, None, "*", pairs)
                        .await
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    mids.push(mid);
                }
                let mut reader = reader.lock().await;
                let fetched = broker
                    .fetch(
                        &mut reader,
                        &queue,
                        "props",
                        &[],
                        64,
                        std::time::Duration::ZERO,
                    )
                    .await
                    .map_err(|e| TestCaseError::fail(format!("fetch failed: {e}")))?;
                // An entry is a delivery when it has an envelope and names its task by a UTF-8
                // `i`, or names none (a plain task's entry: its id is the entry's), or names its
                // task by a non-empty UTF-8 `i` without an envelope (delivered so that the worker
                // dead-letters it with the reason); every other entry is dropped, none is lost
                // or invented.
                let runnable: Vec<(&Fields, &String)> = entries
                    .iter()
                    .zip(&mids)
                    .filter(|(f, _)| {
                        let i = field(f, "i");
                        (field(f, "e").is_some() || i.is_some_and(|i| !i.is_empty()))
                            && i.is_none_or(|i| std::str::from_utf8(i).is_ok())
                    })
                    .collect();
                prop_assert_eq!(fetched.leases.len(), runnable.len());
                prop_assert_eq!(fetched.dropped, entries.len() - runnable.len());
                for (lease, (fields, mid)) in fetched.leases.iter().zip(runnable) {
                    let id = field(fields, "i")
                        .map_or_else(|| mid.clone(), |i| String::from_utf8_lossy(i).into_owned());
                    prop_assert_eq!(&lease.id.task_id, &id);
                    let want = match field(fields, "e") {
                        Some(e) => TaskEnvelope::decode(e),
                        None => Err(chronos_broker::DecodeError::Missing),
                    };
                    match (&lease.envelope, want) {
                        (Ok(got), Ok(want)) => {
                            let want_id = if want.id.is_empty() {
                                id.clone()
                            } else {
                                want.id.clone()
                            };
                            prop_assert_eq!(&got.id, &want_id);
                            prop_assert_eq!(&got.payload, &want.payload);
                            prop_assert_eq!(&lease.id.unique_key, &want.unique_key);
                        }
                        (Err(got), Err(want)) => prop_assert_eq!(got, &want),
                        (got, want) => prop_assert!(false, "lease {got:?}, decode {want:?}"),
                    }
                }
                // Start what was fetched: no task record stands behind the entries with `i`, so
                // each is found lost and its entry removed; plain tasks' start, then complete,
                // so the next case reads only its own.
                let ids: Vec<_> = fetched.leases.iter().map(|l| l.id.clone()).collect();
                broker
                    .start(&queue, &ids)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("start failed: {e}")))?;
                let plain: Vec<Completion> = ids
                    .into_iter()
                    .filter(|l| l.is_plain())
                    .map(|lease| Completion {
                        lease,
                        retention: None,
                        result: None,
                    })
                    .collect();
                broker
                    .complete(&queue, &plain)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("complete failed: {e}")))?;
                Ok(())
            })
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Listing cursors, as a console or CLI passes them on from a URL or a command line

/// Cursors as a listing hands them out (`<entry id>` for stream states, `<score>:<member>` for
/// the sorted sets), edited, and arbitrary text.
fn arb_cursor() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9]{1,20}-[0-9]{1,20}",
        "[0-9]{1,25}",
        "-?[0-9.eE+-]{1,12}:[a-f0-9]{0,32}",
        prop::sample::select(vec![
            "-",
            "+",
            "(",
            "((",
            "0-0",
            "18446744073709551615-18446744073709551615",
            "18446744073709551616-0",
            "-1-1",
            "1-",
            "-1",
            "$",
            ">",
            "*",
            "NaN:x",
            "inf:x",
            "-inf:x",
            "nan:",
            ":",
            "1e400:x",
            "0x10:x",
            " 1:x",
            "1:",
            "",
            "\0",
        ])
        .prop_map(str::to_string),
    ]
}

#[test]
fn redis_listing_cursors_give_pages_or_invalid_option() {
    use chronos_broker::{Client, Operate, TaskFilter, TaskState};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let broker: RedisBroker = rt
        .block_on(
            RedisBroker::builder(url)
                .namespace(chronos_testkit::namespace())
                .connect(),
        )
        .expect("connect");
    let queue = QueueName::new("cursors").expect("queue");
    // A few tasks in each listed state, so a cursor can land inside a page.
    rt.block_on(async {
        let client = Client::new(broker.clone());
        let args = Args {
            to: "a".into(),
            n: 1,
            tags: vec![],
            at: None,
            body: vec![],
        };
        for i in 0..3u64 {
            let q = EnqueueOptions::new().queue("cursors");
            client.enqueue(&args, q.clone()).await.expect("enqueue");
            client
                .enqueue(
                    &args,
                    q.process_in(std::time::Duration::from_secs(3600 + i)),
                )
                .await
                .expect("enqueue later");
        }
    });
    let states = prop::sample::select(vec![
        TaskState::Pending,
        TaskState::Active,
        TaskState::Scheduled,
        TaskState::Retry,
        TaskState::Archived,
        TaskState::Completed,
    ]);
    TestRunner::new(config(REDIS))
        .run(
            &(states, arb_cursor(), 1usize..5),
            |(state, cursor, limit)| {
                rt.block_on(async {
                    let page = broker
                        .list_page(&queue, state, &TaskFilter::default(), Some(&cursor), limit)
                        .await;
                    match page {
                        Ok(p) => prop_assert!(p.tasks.len() <= limit),
                        Err(BrokerError::InvalidOption(reason)) => prop_assert!(!reason.is_empty()),
                        Err(other) => prop_assert!(false, "{state:?} cursor {cursor:?}: {other:?}"),
                    }
                    Ok(())
                })
            },
        )
        .unwrap();
}
