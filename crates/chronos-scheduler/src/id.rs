//! Schedule ids: an id names a schedule's fire state, dedup keys and task ids across the
//! cluster and across deploys, so it is either given by the user or derived the same way on
//! every instance.

use chronos_core::QueueName;

use crate::error::SchedulerError;
use crate::spec::Spec;

/// Ids name keys (`sched:d:<id>:<secs>`) and task ids, so they are bounded and carry no
/// whitespace or hash-tag braces.
pub(crate) fn check_id(id: &str) -> Result<(), SchedulerError> {
    if id.is_empty()
        || id.len() > 200
        || id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '{' || c == '}')
    {
        return Err(SchedulerError::InvalidOption(format!(
            "schedule id {id:?} must be 1 to 200 characters without whitespace or braces"
        )));
    }
    Ok(())
}

/// `<kind>:<16 hex of sha256(kind, spec, zone, queue)>`: the same on every instance that
/// registers the schedule, and unchanged when only the payload changes (a rolling deploy that
/// changes the payload must not start the schedule afresh under a new id while the old
/// instances still fire the old one).
pub(crate) fn derived_id(kind: &str, spec: &Spec, queue: &QueueName) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        kind.as_bytes(),
        spec.describe().as_bytes(),
        spec.zone_name().as_bytes(),
        queue.as_str().as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{kind}:{hex}")
}
