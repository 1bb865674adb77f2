//! How far a running task says it is: the value a handler reports (`Context::progress` in the
//! worker), how it travels to the store, and how a producer or an operator reads it.

use std::time::Duration;

use crate::DecodeError;

/// The largest progress value a handler may report, as JSON text (16 KiB): progress is written
/// often and read by consoles, so it is a small status, not a result.
pub const MAX_PROGRESS_BYTES: usize = 16 * 1024;

/// How long a task's last progress is kept after it was last reported (24 hours): long enough
/// to read a finished task's last value, short enough that nothing has to delete it.
pub const PROGRESS_TTL: Duration = Duration::from_secs(24 * 3600);

/// A task's last reported progress ([`crate::Client::progress`], [`crate::TaskRecord::progress`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TaskProgress {
    /// The value the handler reported, as JSON.
    pub value: serde_json::Value,
    /// When it reached the store (unix ms, by the store's clock).
    pub at_ms: i64,
}

impl TaskProgress {
    /// The stored form: `<at_ms>:<json>`.
    pub fn decode(raw: &[u8]) -> Result<Self, DecodeError> {
        let bad = |why: &str| DecodeError::Malformed(format!("progress: {why}"));
        let colon = raw
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| bad("no time"))?;
        let at_ms = std::str::from_utf8(&raw[..colon])
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| bad("time is not a number"))?;
        let value = serde_json::from_slice(&raw[colon + 1..]).map_err(|e| bad(&e.to_string()))?;
        Ok(Self { value, at_ms })
    }

    /// The percentage done, when the value says one: a bare number, or an object's `percent`
    /// field (what `Context::percent` writes). Clamped to 0..=100.
    pub fn percent(&self) -> Option<f64> {
        let n = match &self.value {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::Object(o) => o.get("percent").and_then(|v| v.as_f64()),
            _ => None,
        }?;
        n.is_finite().then(|| n.clamp(0.0, 100.0))
    }

    /// The object's `note` field, when the value has one (what `Context::percent` writes).
    pub fn note(&self) -> Option<&str> {
        self.value.get("note").and_then(|v| v.as_str())
    }
}

/// One progress value on its way to the store ([`crate::Maintain::keep_alive`]): written
/// only while the reporting consumer still holds the delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressUpdate {
    /// The delivery's stream entry id, as in [`crate::LeaseId::msg_id`].
    pub msg_id: String,
    /// The task's id.
    pub task_id: String,
    /// The value as JSON text, at most [`MAX_PROGRESS_BYTES`].
    pub json: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_reads_back_and_says_its_percent() {
        let p =
            TaskProgress::decode(br#"1700000000000:{"percent":42.5,"note":"copying"}"#).unwrap();
        assert_eq!(p.at_ms, 1_700_000_000_000);
        assert_eq!(p.percent(), Some(42.5));
        assert_eq!(p.note(), Some("copying"));
        let bare = TaskProgress::decode(b"5:150").unwrap();
        assert_eq!(bare.percent(), Some(100.0));
        let other = TaskProgress::decode(br#"5:{"rows":3}"#).unwrap();
        assert_eq!(other.percent(), None);
        assert_eq!(other.note(), None);
    }

    #[test]
    fn a_damaged_value_is_a_decode_error_not_a_panic() {
        for raw in [&b""[..], b"abc", b"x:1", b"12:", b"12:{", b":1"] {
            assert!(TaskProgress::decode(raw).is_err(), "{raw:?}");
        }
    }
}
