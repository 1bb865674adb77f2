use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::{DeadLetter, DecodeError};

/// First byte of every encoded envelope. Bump it when the layout changes incompatibly; a reader
/// refuses versions it does not know instead of misreading them.
pub const ENVELOPE_VERSION: u8 = 1;

/// A task as stored in Redis: identity, payload and delivery policy.
///
/// The fields that change while the task lives (`retried`, `last_error`, `last_failed_at_ms`)
/// are kept beside the envelope in the task's hash and merged in when the task is read, so a
/// retry never rewrites the payload.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskEnvelope {
    /// Task id, unique within its queue.
    pub id: String,
    /// Stable kind string that selects the handler.
    pub kind: String,
    /// Queue the task was enqueued to.
    pub queue: String,
    /// The task arguments, encoded with MessagePack.
    #[serde(with = "crate::bytes_field")]
    pub payload: Vec<u8>,
    /// Failed attempts so far.
    pub retried: u32,
    /// Retries allowed after the first attempt; the task is dead-lettered when `retried` would
    /// exceed it.
    pub max_retry: u32,
    /// Per-attempt time limit, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Absolute deadline (unix ms) after which the task is not run again.
    pub deadline_ms: Option<i64>,
    /// Content hash of kind + payload when the task was enqueued as unique.
    pub unique_key: Option<String>,
    /// How long a completed task is kept for inspection, in milliseconds.
    pub retention_ms: Option<u64>,
    /// What happens when retries are exhausted.
    pub dead_letter: DeadLetter,
    /// When the task was enqueued (unix ms).
    pub enqueued_at_ms: i64,
    /// Message of the last failure.
    pub last_error: Option<String>,
    /// When the last failure happened (unix ms).
    pub last_failed_at_ms: Option<i64>,
    /// Free-form string headers (trace context and the like).
    pub headers: BTreeMap<String, String>,
    /// The rate key a worker's per-key rate limit counts this task under (a customer id, say;
    /// [`crate::EnqueueOptions::rate_key`]). Appended field: envelopes written before it decode
    /// with None.
    #[serde(default)]
    pub rate_key: Option<String>,
    /// The task's place in a chain or group ([`crate::Flow`]); None for a plain task. Boxed, so
    /// a plain envelope stays small in memory.
    #[serde(default)]
    pub flow: Option<Box<crate::Flow>>,
}

/// Fields every envelope has; the appended ones follow only when set.
const BASE_FIELDS: usize = 15;

/// Writes the fields in order, and the appended ones (`rate_key`, `flow`) only up to the last
/// that is set: a plain task's envelope is then exactly what versions before them wrote, so a
/// worker not yet upgraded still reads what an upgraded producer enqueues (a reader refuses
/// an array longer than its struct), and it costs no byte for features it does not use.
impl Serialize for TaskEnvelope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len = if self.flow.is_some() {
            BASE_FIELDS + 2
        } else if self.rate_key.is_some() {
            BASE_FIELDS + 1
        } else {
            BASE_FIELDS
        };
        let mut st = s.serialize_struct("TaskEnvelope", len)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("queue", &self.queue)?;
        st.serialize_field("payload", &Bytes(&self.payload))?;
        st.serialize_field("retried", &self.retried)?;
        st.serialize_field("max_retry", &self.max_retry)?;
        st.serialize_field("timeout_ms", &self.timeout_ms)?;
        st.serialize_field("deadline_ms", &self.deadline_ms)?;
        st.serialize_field("unique_key", &self.unique_key)?;
        st.serialize_field("retention_ms", &self.retention_ms)?;
        st.serialize_field("dead_letter", &self.dead_letter)?;
        st.serialize_field("enqueued_at_ms", &self.enqueued_at_ms)?;
        st.serialize_field("last_error", &self.last_error)?;
        st.serialize_field("last_failed_at_ms", &self.last_failed_at_ms)?;
        st.serialize_field("headers", &self.headers)?;
        if len > BASE_FIELDS {
            st.serialize_field("rate_key", &self.rate_key)?;
        }
        if len > BASE_FIELDS + 1 {
            st.serialize_field("flow", &self.flow)?;
        }
        st.end()
    }
}

/// A byte slice written as a MessagePack bin (see `bytes_field`).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl TaskEnvelope {
    /// Encodes as the version byte followed by a positional MessagePack array (no field names:
    /// they would cost ~150 bytes per stored task). Fields are only ever appended, with
    /// `#[serde(default)]`, so older envelopes still decode; an incompatible change bumps
    /// [`ENVELOPE_VERSION`]. Encoding cannot fail in practice; an error is still returned.
    pub fn encode(&self) -> Result<Vec<u8>, rmp_serde::encode::Error> {
        let mut out = Vec::with_capacity(48 + self.payload.len());
        out.push(ENVELOPE_VERSION);
        rmp_serde::encode::write(&mut out, self)?;
        Ok(out)
    }

    /// This envelope with `id` as its task id when it carries none: a plain task's stored
    /// envelope leaves its id out, because the id is its stream entry's.
    pub fn with_id(mut self, id: &str) -> Self {
        if self.id.is_empty() {
            self.id = id.to_string();
        }
        self
    }

    /// Decodes bytes written by [`TaskEnvelope::encode`]; any other input gives a
    /// [`DecodeError`], never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        match bytes.split_first() {
            None => Err(DecodeError::Empty),
            Some((&ENVELOPE_VERSION, rest)) => {
                rmp_serde::from_slice(rest).map_err(|e| DecodeError::Malformed(e.to_string()))
            }
            Some((&v, _)) => Err(DecodeError::UnsupportedVersion(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TaskEnvelope {
        TaskEnvelope {
            id: "abc".into(),
            kind: "email".into(),
            queue: "default".into(),
            payload: vec![0, 0xff, 0xc0, 1],
            retried: 2,
            max_retry: 25,
            timeout_ms: Some(1000),
            deadline_ms: None,
            unique_key: Some("k".into()),
            retention_ms: None,
            dead_letter: DeadLetter::Discard,
            enqueued_at_ms: 1_700_000_000_000,
            last_error: Some("boom".into()),
            last_failed_at_ms: Some(1),
            headers: [("traceparent".to_string(), "00-x".to_string())].into(),
            flow: None,
            rate_key: Some("customer-7".into()),
        }
    }

    #[test]
    fn envelope_round_trips_with_binary_payload() {
        let env = sample();
        let bytes = env.encode().expect("encode");
        assert_eq!(bytes[0], ENVELOPE_VERSION);
        assert_eq!(TaskEnvelope::decode(&bytes).expect("decode"), env);
    }

    #[test]
    fn envelopes_written_before_the_flow_field_still_decode() {
        let env = sample();
        let bytes = env.encode().expect("encode");
        // With a rate key but no flow: 16 fields (array16 header 0xdc 0x00 0x10), no trailing
        // nil for the flow, so a reader of the version before flows reads it.
        assert_eq!(&bytes[1..4], &[0xdc, 0x00, 0x10]);
        assert_eq!(TaskEnvelope::decode(&bytes).expect("decode"), env);
        // A plain task: exactly the 15 fields of the first version (a fixarray of 15).
        let plain = TaskEnvelope {
            rate_key: None,
            ..env.clone()
        };
        let bytes = plain.encode().expect("encode");
        assert_eq!(bytes[1], 0x9f);
        assert_eq!(TaskEnvelope::decode(&bytes).expect("decode"), plain);
    }

    /// The envelope of the first version: exactly 15 fields, as its reader expects them.
    #[derive(Serialize, Deserialize)]
    struct FirstVersion(
        String,
        String,
        String,
        #[serde(with = "crate::bytes_field")] Vec<u8>,
        u32,
        u32,
        Option<u64>,
        Option<i64>,
        Option<String>,
        Option<u64>,
        DeadLetter,
        i64,
        Option<String>,
        Option<i64>,
        BTreeMap<String, String>,
    );

    #[test]
    fn a_reader_of_the_first_version_reads_a_plain_task_of_today() {
        // The first version's reader refuses a longer array. A worker not yet upgraded must
        // read what an upgraded producer enqueues.
        let plain = TaskEnvelope {
            rate_key: None,
            flow: None,
            ..sample()
        };
        let bytes = plain.encode().expect("encode");
        let old: FirstVersion = rmp_serde::from_slice(&bytes[1..]).expect("first version reads it");
        assert_eq!(old.0, plain.id);
        // With a rate key the array is longer: that reader refuses it (a task that needs a
        // newer worker is not misread).
        let keyed = sample();
        assert!(keyed.rate_key.is_some());
        let bytes = keyed.encode().expect("encode");
        assert!(rmp_serde::from_slice::<FirstVersion>(&bytes[1..]).is_err());
    }

    #[test]
    fn envelope_without_rate_key_still_decodes() {
        // An envelope written before `rate_key` existed: the array ends after `headers`.
        let mut bytes = vec![ENVELOPE_VERSION];
        let old = FirstVersion(
            "a".into(),
            "k".into(),
            "q".into(),
            vec![1],
            0,
            3,
            None,
            None,
            None,
            None,
            DeadLetter::Archive,
            5,
            None,
            None,
            BTreeMap::new(),
        );
        rmp_serde::encode::write(&mut bytes, &old).expect("encode");
        let env = TaskEnvelope::decode(&bytes).expect("decode");
        assert_eq!(
            (env.id.as_str(), env.max_retry, env.rate_key),
            ("a", 3, None)
        );
    }

    #[test]
    fn garbage_gives_typed_errors() {
        assert_eq!(TaskEnvelope::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(
            TaskEnvelope::decode(&[9, 1, 2]),
            Err(DecodeError::UnsupportedVersion(9))
        );
        assert!(matches!(
            TaskEnvelope::decode(&[1, 0xc1, 0xff]),
            Err(DecodeError::Malformed(_))
        ));
        let mut truncated = sample().encode().expect("encode");
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(
            TaskEnvelope::decode(&truncated),
            Err(DecodeError::Malformed(_))
        ));
    }
}
