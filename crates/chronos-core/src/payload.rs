//! Payloads for display: MessagePack decoded to JSON text.

/// Deepest nesting of maps and arrays [`payload_json`] decodes. Below serde_json's own limit
/// (128), so the text it returns parses again.
const MAX_DISPLAY_DEPTH: usize = 100;

/// The payload as JSON text: MessagePack decoded without knowing its Rust type (maps, arrays,
/// strings, numbers; binary data becomes an array of byte values). Bytes that are not
/// MessagePack come back as `"0x<hex>"` (a JSON string), so every payload has a display.
///
/// Nesting deeper than 100 levels also shows as hex: the decoder recurses once
/// per level, and a payload of nested one-element arrays (one byte per level) would otherwise
/// overflow the stack of the console or CLI that displays it.
pub fn payload_json(payload: &[u8]) -> String {
    use serde::Deserialize;
    let mut de = rmp_serde::Deserializer::from_read_ref(payload);
    de.set_max_depth(MAX_DISPLAY_DEPTH);
    match serde_json::Value::deserialize(&mut de) {
        Ok(v) => v.to_string(),
        Err(_) => hex_text(payload),
    }
}

/// `bytes` as a JSON string `"0x<hex>"`: how a payload that does not decode is shown.
pub(crate) fn hex_text(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::Value::String(format!("0x{hex}")).to_string()
}

/// The payload an operator typed as JSON text, encoded to MessagePack as
/// [`encode_args`](crate::encode_args) encodes a struct (objects become maps with their keys),
/// so [`payload_json`] shows it back as the same JSON. Text that is not JSON is a
/// [`BrokerError::InvalidOption`](crate::BrokerError::InvalidOption), before anything is sent.
pub fn json_payload(text: &str) -> Result<Vec<u8>, crate::BrokerError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| crate::BrokerError::InvalidOption(format!("payload is not JSON: {e}")))?;
    rmp_serde::to_vec_named(&value).map_err(|e| crate::BrokerError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{json_payload, payload_json};

    #[test]
    fn json_text_comes_back_as_the_same_json() {
        let bytes = json_payload(r#"{"to":"b@c","n":[1,2]}"#).expect("json");
        assert_eq!(payload_json(&bytes), r#"{"n":[1,2],"to":"b@c"}"#);
        assert!(json_payload("{nope").is_err());
    }

    #[test]
    fn named_struct_decodes_to_a_json_object() {
        #[derive(serde::Serialize)]
        struct Email {
            to: String,
            n: u32,
        }
        let bytes = rmp_serde::to_vec_named(&Email {
            to: "a@b".into(),
            n: 7,
        })
        .expect("encode");
        assert_eq!(payload_json(&bytes), r#"{"n":7,"to":"a@b"}"#);
    }

    /// Found by the property tests: 100,000 nested one-element arrays overflowed the stack.
    #[test]
    fn deep_nesting_shows_as_hex_not_a_stack_overflow() {
        let mut deep = vec![0x91; 100_000];
        deep.push(0xc0);
        assert!(payload_json(&deep).starts_with("\"0x9191"));
        let mut shallow = vec![0x91; 50];
        shallow.push(0xc0);
        assert_eq!(
            payload_json(&shallow),
            format!("{}null{}", "[".repeat(50), "]".repeat(50))
        );
    }

    #[test]
    fn garbage_shows_as_hex() {
        assert_eq!(payload_json(&[0xc1]), r#""0xc1""#);
    }
}
