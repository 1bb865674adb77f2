//! How a task's payload is encoded: MessagePack (what the Rust producer writes) or JSON (what a
//! producer in another language may write instead, so it needs no MessagePack library for the
//! payload). The envelope names the codec in a header; a worker decodes either into the same
//! typed arguments, whatever the producer.

use std::collections::BTreeMap;

use crate::{DecodeError, TaskArgs, TaskEnvelope};

/// Header naming the payload's codec: absent or `msgpack` for MessagePack, `json` for JSON text
/// (producer contract v1, `crates/chronos-protocol/contract/CONTRACT.md`).
pub const CODEC_HEADER: &str = "chronos-codec";

/// Header a producer may set to name itself (`chronos-py/0.1.0`, say): a worker quotes it when
/// the payload does not decode, so an operator knows whose tasks are malformed.
pub const PRODUCER_HEADER: &str = "chronos-producer";

/// The encoding of a task's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    /// MessagePack, structs as maps with their field names ([`crate::encode_args`]).
    #[default]
    MessagePack,
    /// JSON text, UTF-8.
    Json,
}

impl Codec {
    /// The codec `headers` name; a name this version does not know is an error, so a payload
    /// is never misread as another encoding.
    pub fn of(headers: &BTreeMap<String, String>) -> Result<Self, DecodeError> {
        match headers.get(CODEC_HEADER).map(String::as_str) {
            None | Some("msgpack") => Ok(Self::MessagePack),
            Some("json") => Ok(Self::Json),
            Some(other) => Err(DecodeError::Malformed(format!(
                "unknown payload codec {other:?} in header {CODEC_HEADER}"
            ))),
        }
    }

    /// The codec's name in [`CODEC_HEADER`].
    pub fn name(self) -> &'static str {
        match self {
            Self::MessagePack => "msgpack",
            Self::Json => "json",
        }
    }
}

/// Decodes a task's payload into its typed arguments, by the codec its envelope names.
///
/// A payload that does not decode as `T` is [`DecodeError::Payload`] whose reason starts with
/// "schema mismatch" and names the producer when the envelope carries [`PRODUCER_HEADER`]; the
/// worker dead-letters such a task without retrying it.
pub fn decode_payload<T: TaskArgs>(env: &TaskEnvelope) -> Result<T, DecodeError> {
    let decoded = match Codec::of(&env.headers)? {
        Codec::MessagePack => rmp_serde::from_slice(&env.payload).map_err(|e| e.to_string()),
        Codec::Json => serde_json::from_slice(&env.payload).map_err(|e| e.to_string()),
    };
    decoded.map_err(|reason| {
        let by = env
            .headers
            .get(PRODUCER_HEADER)
            .map(|p| format!(" (producer {p})"))
            .unwrap_or_default();
        DecodeError::Payload {
            kind: T::KIND.to_string(),
            reason: format!("schema mismatch{by}: {reason}"),
        }
    })
}

/// The payload of `env` as JSON text, by the codec its envelope names: what the console, the
/// CLI and the inspector's payload filter show and search. Bytes that are not what the codec
/// says show as hex, as [`crate::payload_json`] does.
pub fn envelope_payload_json(env: &TaskEnvelope) -> String {
    match Codec::of(&env.headers) {
        Ok(Codec::Json) => match serde_json::from_slice::<serde_json::Value>(&env.payload) {
            Ok(v) => v.to_string(),
            Err(_) => crate::payload::hex_text(&env.payload),
        },
        _ => crate::payload_json(&env.payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Email {
        to: String,
        n: u32,
    }

    impl TaskArgs for Email {
        const KIND: &'static str = "email";
    }

    fn envelope(payload: &[u8], headers: &[(&str, &str)]) -> TaskEnvelope {
        let opts = crate::EnqueueOptions::new();
        let mut task =
            crate::NewTask::build("email", payload.to_vec(), opts, 0).expect("valid task");
        for (k, v) in headers {
            task.envelope.headers.insert(k.to_string(), v.to_string());
        }
        task.envelope
    }

    #[test]
    fn both_codecs_decode_to_the_same_arguments() {
        let want = Email {
            to: "a@b".into(),
            n: 7,
        };
        let packed = crate::encode_args(&want).expect("encode");
        assert_eq!(
            decode_payload::<Email>(&envelope(&packed, &[])),
            Ok(want.clone())
        );
        let json = br#"{"to":"a@b","n":7}"#;
        let env = envelope(json, &[(CODEC_HEADER, "json")]);
        assert_eq!(decode_payload::<Email>(&env), Ok(want));
        assert_eq!(envelope_payload_json(&env), r#"{"n":7,"to":"a@b"}"#);
        assert_eq!(
            envelope_payload_json(&envelope(&packed, &[])),
            r#"{"n":7,"to":"a@b"}"#
        );
    }

    #[test]
    fn a_mismatch_names_the_producer_and_an_unknown_codec_is_refused() {
        let env = envelope(
            br#"{"to":"a@b"}"#,
            &[
                (CODEC_HEADER, "json"),
                (PRODUCER_HEADER, "chronos-py/0.1.0"),
            ],
        );
        match decode_payload::<Email>(&env) {
            Err(DecodeError::Payload { kind, reason }) => {
                assert_eq!(kind, "email");
                assert!(reason.starts_with("schema mismatch (producer chronos-py/0.1.0): "));
                assert!(reason.contains("missing field `n`"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let env = envelope(b"{}", &[(CODEC_HEADER, "cbor")]);
        assert!(matches!(
            decode_payload::<Email>(&env),
            Err(DecodeError::Malformed(_))
        ));
    }
}
