//! The two shapes the Rust side reads outside the scripts, each read in one place: a task
//! record's fields ([`Record`]) and a stream entry's fields ([`Entry`]), by the names of
//! [`super::protocol`].

use fred::bytes::Bytes;
use fred::prelude::*;

use super::reply;
use crate::BrokerError;

/// Fields of one task record (its hash), as one HMGET read them.
pub(crate) struct Record {
    fields: &'static [&'static str],
    values: Vec<Value>,
}

impl Record {
    /// Reads `fields` of task hash `key` in one HMGET. The error is fred's, unclassified: a
    /// caller that lists many tasks skips one whose key is not a hash (WRONGTYPE) instead of
    /// failing.
    pub(crate) async fn read(
        client: &Client,
        key: String,
        fields: &'static [&'static str],
    ) -> Result<Self, fred::error::Error> {
        let values: Vec<Value> = client.hmget(key, fields.to_vec()).await?;
        Ok(Self { fields, values })
    }

    /// Whether the record exists: every task record has a state, so a missing one means no
    /// hash (or `fields` did not ask for it).
    pub(crate) fn exists(&self) -> bool {
        !self.value(super::protocol::STATE).is_null()
    }

    /// The raw value of `field`: Null when absent, or when `field` was not read.
    pub(crate) fn value(&self, field: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.fields
            .iter()
            .position(|f| *f == field)
            .and_then(|i| self.values.get(i))
            .unwrap_or(&NULL)
    }

    /// Takes the value of `field` out (Null afterwards), for bytes such as the envelope.
    pub(crate) fn take(&mut self, field: &str) -> Value {
        match self.fields.iter().position(|f| *f == field) {
            Some(i) if i < self.values.len() => std::mem::replace(&mut self.values[i], Value::Null),
            _ => Value::Null,
        }
    }

    /// A text field: None when absent or empty; a field that is not text is a protocol error
    /// named by `context`.
    pub(crate) fn text(
        &self,
        field: &str,
        context: &'static str,
    ) -> Result<Option<String>, BrokerError> {
        reply::opt_string(self.value(field).clone(), context)
    }

    /// A counter or time field: 0 when absent or not a number (a corrupt counter shows as none).
    pub(crate) fn int(&self, field: &str) -> i64 {
        self.value(field).as_i64().unwrap_or(0)
    }

    /// A cancelled task's reason and time (`cr`, `ca`), when the record has a reason (and
    /// both were read). A reason that is not text reads as none.
    pub(crate) fn cancellation(&self) -> Option<crate::Cancellation> {
        use super::protocol::{CANCELLED_AT, CANCEL_REASON};
        let reason = self.text(CANCEL_REASON, "task").ok().flatten()?;
        Some(crate::Cancellation {
            reason,
            at_ms: self.int(CANCELLED_AT),
        })
    }
}

/// The fields of one stream entry that the Rust side reads (see [`super::protocol`]): a task's
/// entry carries `i` and `e`, and once the task failed before `r`, `err`, `f`; a plain task's
/// carries `e` alone (plus `x`/`dl`), its id being the entry's.
#[derive(Default)]
pub(crate) struct Entry<'a> {
    /// `i`: the task id (None in a plain task's entry).
    pub(crate) task_id: Option<&'a Bytes>,
    /// `e`: the envelope.
    pub(crate) envelope: Option<&'a Bytes>,
    /// `r`: failed attempts before this delivery.
    pub(crate) retried: Option<&'a Bytes>,
    /// `err`: the last error.
    pub(crate) error: Option<&'a Bytes>,
    /// `f`: when the last attempt failed (unix ms).
    pub(crate) failed_at: Option<&'a Bytes>,
}

impl<'a> Entry<'a> {
    /// Decodes an entry's field list (as XRANGE or XREADGROUP return it); other fields are
    /// ignored, and the first of a repeated field wins, as lib.lua's `field_of` reads it.
    pub(crate) fn of(fields: &'a [(String, Bytes)]) -> Self {
        use super::protocol::{ENVELOPE, ERROR, FAILED_AT, RETRIED, TASK_ID};
        let mut e = Entry::default();
        for (k, v) in fields {
            let slot = match k.as_str() {
                TASK_ID => &mut e.task_id,
                ENVELOPE => &mut e.envelope,
                RETRIED => &mut e.retried,
                ERROR => &mut e.error,
                FAILED_AT => &mut e.failed_at,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v);
            }
        }
        e
    }

    /// The task entry `mid` carries, as the inspector and the operator's scans list it: its
    /// `i`, or the entry's own id for a plain task's entry (no `i`, an `e`). None for an entry
    /// with neither, or an `i` that is not UTF-8.
    pub(crate) fn task(&self, mid: &str) -> Option<String> {
        match (self.task_id, self.envelope) {
            (Some(i), _) => String::from_utf8(i.to_vec()).ok(),
            (None, Some(_)) => Some(mid.to_string()),
            (None, None) => None,
        }
    }

    /// A field's bytes as text; None when absent or not UTF-8.
    pub(crate) fn text(v: Option<&Bytes>) -> Option<String> {
        v.and_then(|v| String::from_utf8(v.to_vec()).ok())
    }
}
