//! What became of a task, as a producer waiting for its result sees it.

use serde::de::DeserializeOwned;

use crate::{BrokerError, DecodeError, TaskState};

/// First byte of a stored result that is not a result but a note that the handler's result was
/// too large to keep. MessagePack never starts a value with 0xc1 (the one byte it leaves unused),
/// so the note cannot be mistaken for a result.
pub const OVERSIZED_RESULT: u8 = 0xc1;

/// Where a task stands, read by [`crate::Results::outcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// Not finished: waiting, running, delayed or waiting for a retry.
    Unfinished(TaskState),
    /// Succeeded and retained. `result` is the handler's result (MessagePack), None when it
    /// returned none.
    Succeeded {
        /// The encoded result.
        result: Option<Vec<u8>>,
    },
    /// Dead-lettered (archived, or dropped as the task asked), with the last error.
    Failed {
        /// The last error.
        error: String,
    },
    /// Ended by its handler as cancelled ([`crate::TaskState::Cancelled`]), with its reason.
    Cancelled {
        /// Why, as the handler said.
        reason: String,
    },
    /// No such task: never enqueued, deleted, or completed without a retention (so nothing of
    /// it, and of its result, was kept).
    NotFound,
}

impl TaskOutcome {
    /// True for every outcome but [`TaskOutcome::Unfinished`].
    pub fn is_final(&self) -> bool {
        !matches!(self, TaskOutcome::Unfinished(_))
    }
}

/// Decodes a stored result; none reads as MessagePack nil, so `()` and `Option` accept it.
pub(crate) fn decode_result<R: DeserializeOwned>(
    id: &str,
    bytes: Option<&[u8]>,
) -> Result<R, BrokerError> {
    let bytes = bytes.unwrap_or(&[0xc0]);
    if let Some((&OVERSIZED_RESULT, note)) = bytes.split_first() {
        return Err(BrokerError::ResultNotKept {
            id: id.to_string(),
            reason: String::from_utf8_lossy(note).into_owned(),
        });
    }
    rmp_serde::from_slice(bytes).map_err(|e| {
        BrokerError::Decode(DecodeError::Payload {
            kind: "result".into(),
            reason: e.to_string(),
        })
    })
}
