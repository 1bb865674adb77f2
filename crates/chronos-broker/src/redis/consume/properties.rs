//! Property tests of the script-reply readers on arbitrary nested fred `Value`s: the checked
//! conversions of `reply`, and the rows of claim.lua and start.lua as the fetch path reads them.
//! They live inside the crate because the readers are private; the properties of the public
//! parsers are in `tests/properties.rs`. `PROPTEST_CASES` sets the case count.

use fred::types::{Key, Map, Value};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::{decode_envelope, lease, start_outcome};
use crate::redis::reply;
use crate::{
    BrokerError, DeadLetter, DecodeError, Keyspace, QueueName, StartOutcome, TaskEnvelope,
};

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,20}",
        "-?[0-9]{1,25}",
        "[a-z:_{}-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(16).collect()),
    ]
}

fn envelope_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        "[a-f0-9]{1,32}",
        proptest::collection::vec(any::<u8>(), 0..16),
        proptest::option::of("[a-f0-9]{64}"),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..2),
    )
        .prop_map(|(id, payload, unique_key, edits)| {
            let mut bytes = TaskEnvelope {
                id,
                kind: "k".into(),
                queue: "q".into(),
                payload,
                retried: 0,
                max_retry: 3,
                timeout_ms: None,
                deadline_ms: None,
                unique_key,
                retention_ms: None,
                dead_letter: DeadLetter::Archive,
                enqueued_at_ms: 1,
                last_error: None,
                last_failed_at_ms: None,
                headers: Default::default(),
                flow: None,
                rate_key: None,
            }
            .encode()
            .unwrap_or_default();
            for (i, b) in edits {
                let n = bytes.len();
                bytes[i % n] = b;
            }
            bytes
        })
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(Value::Queued),
        any::<bool>().prop_map(Value::Boolean),
        any::<i64>().prop_map(Value::Integer),
        prop_oneof![Just(0i64), Just(1), Just(2), Just(-1)].prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Double),
        text().prop_map(|s| Value::String(s.into())),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|b| Value::Bytes(b.into())),
        envelope_bytes().prop_map(|b| Value::Bytes(b.into())),
    ]
}

/// Any reply Redis could send: leaves, and arrays and maps of replies, a few levels deep.
fn arb_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..4).prop_map(|pairs| {
                let pairs: Vec<(Key, Value)> =
                    pairs.into_iter().map(|(k, v)| (Key::from(k), v)).collect();
                Map::try_from(pairs).map_or(Value::Null, Value::Map)
            }),
        ]
    })
}

/// A row of the shape a script returns (an array of columns), with any column replaced by any
/// reply: the near-valid input of the row readers.
fn arb_row() -> impl Strategy<Value = Value> {
    let good = (
        "[0-9]{1,13}-[0-9]{1,3}",
        "[a-f0-9]{1,32}",
        envelope_bytes(),
        "[0-9]{1,3}",
        text(),
        "[0-9]{0,13}",
    )
        .prop_map(|(mid, id, env, r, err, f)| {
            vec![
                Value::String(mid.into()),
                Value::String(id.into()),
                Value::Bytes(env.into()),
                Value::String(r.into()),
                Value::String(err.into()),
                Value::String(f.into()),
            ]
        });
    (
        good,
        proptest::collection::vec((any::<usize>(), arb_value()), 0..3),
        0usize..8,
    )
        .prop_map(|(mut cols, swaps, keep)| {
            for (i, v) in swaps {
                let n = cols.len();
                cols[i % n] = v;
            }
            cols.truncate(keep.max(1));
            Value::Array(cols)
        })
}

fn any_reply() -> impl Strategy<Value = Value> {
    prop_oneof![arb_value(), arb_row()]
}

fn protocol(
    r: Result<impl std::fmt::Debug, BrokerError>,
    context: &str,
) -> Result<(), TestCaseError> {
    match r {
        Err(BrokerError::Protocol { context: c, detail }) => {
            prop_assert_eq!(c, context);
            prop_assert!(!detail.is_empty());
            Ok(())
        }
        other => Err(TestCaseError::fail(format!(
            "expected a protocol error, got {other:?}"
        ))),
    }
}

#[test]
fn checked_conversions_give_values_or_protocol_errors() {
    TestRunner::new(config())
        .run(&any_reply(), |v| {
            match (reply::int(&v, "int"), v.as_i64()) {
                (Ok(n), Some(m)) => prop_assert_eq!(n, m),
                (r, None) => protocol(r, "int")?,
                (r, want) => prop_assert!(false, "int gave {r:?} for {want:?}"),
            }
            match (reply::array(v.clone(), "array"), &v) {
                (Ok(a), Value::Array(want)) => prop_assert_eq!(&a, want),
                (Ok(a), Value::Null) => prop_assert!(a.is_empty()),
                (r, _) => protocol(r, "array")?,
            }
            let raw: Option<Vec<u8>> = match &v {
                Value::Bytes(b) => Some(b.to_vec()),
                Value::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            };
            match (reply::bytes(v.clone(), "bytes"), &raw) {
                (Ok(b), Some(want)) => prop_assert_eq!(&b, want),
                (r, _) => protocol(r, "bytes")?,
            }
            let utf8 = raw.clone().and_then(|b| String::from_utf8(b).ok());
            match (reply::string(v.clone(), "string"), &utf8) {
                (Ok(s), Some(want)) => prop_assert_eq!(&s, want),
                (r, _) => protocol(r, "string")?,
            }
            match reply::opt_string(v.clone(), "opt") {
                Ok(None) => prop_assert!(v.is_null() || utf8.as_deref() == Some("")),
                Ok(Some(s)) => prop_assert_eq!(Some(s), utf8),
                r => protocol(r, "opt")?,
            }
            match decode_envelope(v.clone()) {
                Ok(env) => prop_assert_eq!(raw.map(|b| TaskEnvelope::decode(&b)), Some(Ok(env))),
                Err(DecodeError::Empty) => {
                    prop_assert!(raw.is_none_or(|b| b.is_empty()))
                }
                // A nil where the envelope belongs: an entry that lost it.
                Err(DecodeError::Missing) => prop_assert!(v.is_null()),
                Err(DecodeError::UnsupportedVersion(_) | DecodeError::Malformed(_)) => {
                    prop_assert!(raw.is_some())
                }
                Err(other) => prop_assert!(false, "decode_envelope gave {other:?}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn claim_rows_become_leases_or_drops() {
    let queue = QueueName::new("props").expect("queue");
    TestRunner::new(config())
        .run(&any_reply(), |row| {
            let cols = match &row {
                Value::Array(c) => c.clone(),
                Value::Null => Vec::new(),
                _ => Vec::new(),
            };
            let text = |i: usize| cols.get(i).and_then(|v| reply::string(v.clone(), "t").ok());
            // A plain task's row is `{entry id, envelope}`: its task id is the entry id.
            let plain = cols.len() == 2;
            let readable = if plain {
                text(0).is_some()
            } else {
                cols.len() >= 3 && text(0).is_some() && text(1).is_some()
            };
            match lease(&queue, row.clone()) {
                Some(l) => {
                    prop_assert!(readable, "a lease from {row:?}");
                    prop_assert_eq!(Some(l.id.msg_id.clone()), text(0));
                    prop_assert_eq!(Some(l.id.task_id.clone()), text(if plain { 0 } else { 1 }));
                    let want = decode_envelope(cols[if plain { 1 } else { 2 }].clone());
                    match (&l.envelope, want) {
                        (Ok(got), Ok(want)) => {
                            let want_id = if want.id.is_empty() {
                                l.id.task_id.clone()
                            } else {
                                want.id.clone()
                            };
                            prop_assert_eq!(&got.id, &want_id);
                            prop_assert_eq!(&l.id.unique_key, &want.unique_key);
                            prop_assert!(got.last_error.as_deref() != Some(""));
                            prop_assert!(got.last_failed_at_ms.is_none_or(|f| f > 0));
                        }
                        (Err(got), Err(want)) => prop_assert_eq!(got, &want),
                        (got, want) => prop_assert!(false, "lease {got:?}, decode {want:?}"),
                    }
                }
                None => prop_assert!(!readable, "no lease from {row:?}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn start_rows_are_started_lost_or_corrupt() {
    let queue = QueueName::new("props").expect("queue");
    let keys = Keyspace::default().queue(&queue);
    let lock_keys = keys.clone();
    let started = (
        any::<i64>(),
        any::<i64>(),
        proptest::option::of(text()),
        any::<i64>(),
        proptest::option::of("[a-f0-9]{0,64}"),
    )
        .prop_map(move |(r, x, err, f, lock)| {
            Value::Array(vec![
                Value::Integer(1),
                Value::String(r.to_string().into()),
                Value::Integer(x),
                err.map_or(Value::Null, |e| Value::String(e.into())),
                Value::Integer(f),
                lock.map_or(Value::Null, |h| Value::String(lock_keys.unique(&h).into())),
            ])
        });
    let rows = prop_oneof![any_reply(), started];
    TestRunner::new(config())
        .run(&rows, |row| {
            let first = match &row {
                Value::Array(c) => c.first().and_then(Value::as_i64),
                _ => None,
            };
            match start_outcome(&keys, row.clone()) {
                StartOutcome::Started(a) => {
                    prop_assert_eq!(first, Some(1));
                    prop_assert!(a.last_error.as_deref() != Some(""));
                    prop_assert!(a.last_failed_at_ms.is_none_or(|f| f > 0));
                }
                StartOutcome::Lost => prop_assert_eq!(first, Some(0)),
                StartOutcome::Corrupt(reason) => {
                    prop_assert_ne!(first, Some(0));
                    prop_assert!(!reason.is_empty());
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Inputs the properties once failed on, kept by name (plain tests: `cargo xtask fuzz` skips
/// this module when it counts properties).
mod regressions {
    use super::*;

    /// Found by `start_rows_are_started_lost_or_corrupt`: a row with an unknown code and an empty
    /// reason made a corrupt outcome with a blank reason, which dead-lettered the task with no error.
    #[test]
    fn start_row_with_blank_reason_names_the_corruption() {
        let keys = Keyspace::default().queue(&QueueName::default());
        let row = Value::Array(vec![Value::Double(-0.0), Value::Bytes(Vec::new().into())]);
        match start_outcome(&keys, row) {
            StartOutcome::Corrupt(reason) => assert_eq!(reason, "corrupt task record"),
            other => panic!("expected a corrupt outcome, got {other:?}"),
        }
    }
}
