//! How a delivered stream entry becomes a [`Lease`]: shared by the fetch script's rows and the
//! blocking reads (one queue, or many watched together).

use fred::prelude::*;

use super::record::Entry;
use crate::{DecodeError, Lease, LeaseId, QueueName, TaskEnvelope};

/// The lease of one stream entry read by a blocking read: a task's entry carries `i` (its id)
/// and `e` (its envelope), a plain task's only `e` (its id is the entry's). None for an entry
/// that carries no task (foreign, or emptied: `fields` None, deleted while pending), which the
/// caller acks and removes. An entry with a task id but no envelope is a lease whose envelope
/// is [`DecodeError::Missing`].
pub(super) fn lease_of_entry(queue: &QueueName, mid: String, fields: Fields) -> Option<Lease> {
    let fields = fields?;
    let entry = Entry::of(&fields);
    let env = entry.envelope;
    let id = match entry.task_id {
        // Neither a task id nor an envelope: not ours.
        Some(i) if i.is_empty() && env.is_none() => return None,
        Some(i) => String::from_utf8(i.to_vec()).ok()?,
        None if env.is_none() => return None,
        None => mid.clone(),
    };
    // A task's entry that lost its envelope still names the task: deliver it, so the worker
    // dead-letters it with the reason rather than leaving its record pending for good.
    let envelope = env.map_or(Err(DecodeError::Missing), |e| TaskEnvelope::decode(e));
    Some(new_lease(
        queue,
        id,
        mid,
        envelope,
        Entry::text(entry.retried),
        Entry::text(entry.error),
        Entry::text(entry.failed_at),
    ))
}

/// A lease for a delivery read from its entry: the envelope with the attempt count and last
/// error the entry carries (absent on a first delivery), and the task's unique key (the
/// envelope's content hash) so settling can release its lock.
pub(super) fn new_lease(
    queue: &QueueName,
    task_id: String,
    msg_id: String,
    envelope: Result<TaskEnvelope, DecodeError>,
    retried: Option<String>,
    last_error: Option<String>,
    failed_at: Option<String>,
) -> Lease {
    let mut id = LeaseId::new(queue.clone(), task_id, msg_id);
    let envelope = envelope.map(|mut e| {
        // A plain task's envelope leaves its id out: the id is its entry's.
        if e.id.is_empty() {
            e.id = id.task_id.clone();
        }
        e.retried = retried.and_then(|r| r.parse().ok()).unwrap_or(0);
        e.last_error = last_error.filter(|m| !m.is_empty());
        e.last_failed_at_ms = failed_at.and_then(|f| f.parse().ok()).filter(|&f| f > 0);
        id.unique_key = e.unique_key.clone();
        e
    });
    Lease { id, envelope }
}

/// The fields of one stream entry; None for an entry deleted while pending.
pub(super) type Fields = Option<Vec<(String, fred::bytes::Bytes)>>;
/// `(entry id, fields)`.
pub(super) type Entries = Vec<(String, Fields)>;
/// `(stream key, entries)` per stream; None on a block timeout.
pub(super) type ReadReply = Option<Vec<(String, Entries)>>;

/// Decodes an envelope returned by a script.
pub(super) fn decode_envelope(v: Value) -> Result<TaskEnvelope, DecodeError> {
    match v {
        Value::Bytes(b) => TaskEnvelope::decode(&b),
        Value::String(s) => TaskEnvelope::decode(s.as_bytes()),
        Value::Null => Err(DecodeError::Missing),
        _ => Err(DecodeError::Empty),
    }
}
