//! Payloads for display: MessagePack decoded to JSON text.

/// The payload as JSON text: MessagePack decoded without knowing its Rust type (maps, arrays,
/// strings, numbers; binary data becomes an array of byte values). Bytes that are not
/// MessagePack come back as `"0x<hex>"` (a JSON string), so every payload has a display.
pub fn payload_json(payload: &[u8]) -> String {
    match rmp_serde::from_slice::<serde_json::Value>(payload) {
        Ok(v) => v.to_string(),
        Err(_) => {
            let hex: String = payload.iter().map(|b| format!("{b:02x}")).collect();
            serde_json::Value::String(format!("0x{hex}")).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::payload_json;

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

    #[test]
    fn garbage_shows_as_hex() {
        assert_eq!(payload_json(&[0xc1]), r#""0xc1""#);
    }
}
