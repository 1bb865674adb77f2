//! Checked conversions of script replies: a reply of the wrong shape becomes
//! [`BrokerError::Protocol`], never a panic.

use fred::prelude::*;

use crate::BrokerError;

pub(crate) fn int(v: &Value, context: &'static str) -> Result<i64, BrokerError> {
    v.as_i64()
        .ok_or_else(|| bad(context, format!("expected an integer, got {v:?}")))
}

pub(crate) fn array(v: Value, context: &'static str) -> Result<Vec<Value>, BrokerError> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Null => Ok(Vec::new()),
        other => Err(bad(context, format!("expected an array, got {other:?}"))),
    }
}

pub(crate) fn bytes(v: Value, context: &'static str) -> Result<Vec<u8>, BrokerError> {
    match v {
        Value::Bytes(b) => Ok(b.to_vec()),
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        other => Err(bad(context, format!("expected bytes, got {other:?}"))),
    }
}

pub(crate) fn string(v: Value, context: &'static str) -> Result<String, BrokerError> {
    let b = bytes(v, context)?;
    String::from_utf8(b).map_err(|_| bad(context, "expected UTF-8 text".into()))
}

/// An optional text field: nil and empty both mean None.
pub(crate) fn opt_string(v: Value, context: &'static str) -> Result<Option<String>, BrokerError> {
    if v.is_null() {
        return Ok(None);
    }
    let s = string(v, context)?;
    Ok(if s.is_empty() { None } else { Some(s) })
}

pub(crate) fn bad(context: &'static str, detail: String) -> BrokerError {
    BrokerError::Protocol { context, detail }
}

/// A boolean script argument: `"1"` or `"0"` (scripts compare strings).
pub(crate) fn flag(on: bool) -> Value {
    if on { "1" } else { "0" }.into()
}
