//! What became of a task, as a producer waiting for its result sees it.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::{BrokerError, Client, DecodeError, QueueName, Results, TaskState};

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

impl<B: Results> Client<B> {
    /// The result of task `id` of `queue` (ids are unique per queue, so the queue is part of the
    /// name; [`crate::TaskInfo`] carries both): `Some` once it succeeded, `None` while it is not
    /// finished. A handler that returned no result gives `R`'s reading of nothing: `()` or
    /// `None` for an `Option`.
    ///
    /// A result is kept only while its task is retained ([`crate::EnqueueOptions::retention`]).
    /// Errors: [`BrokerError::TaskFailed`] (dead-lettered), [`BrokerError::TaskNotFound`]
    /// (unknown, deleted, or completed without a retention), [`BrokerError::ResultNotKept`] (the
    /// result was over the payload limit), [`BrokerError::Decode`] (the result is not an `R`).
    pub async fn result<R: DeserializeOwned>(
        &self,
        queue: &str,
        id: &str,
    ) -> Result<Option<R>, BrokerError> {
        let q = QueueName::new(queue)?;
        let outcome = self.broker().outcome(&q, id).await?;
        match final_result(&q, id, outcome) {
            Err(Unfinished(_)) => Ok(None),
            Ok(r) => r.map(Some),
        }
    }

    /// Waits up to `timeout` for task `id` of `queue` to finish and returns its result, as
    /// [`Client::result`] reads it. The broker wakes the wait when the task succeeds or is
    /// dead-lettered (a pub/sub message, plus a re-read once a second in case it was lost). [`BrokerError::WaitTimeout`] when it
    /// did not finish in time; the task itself is not affected.
    pub async fn wait<R: DeserializeOwned>(
        &self,
        queue: &str,
        id: &str,
        timeout: Duration,
    ) -> Result<R, BrokerError> {
        let q = QueueName::new(queue)?;
        let outcome = self.broker().wait_outcome(&q, id, timeout).await?;
        match final_result(&q, id, outcome) {
            Ok(r) => r,
            Err(Unfinished(state)) => Err(BrokerError::WaitTimeout {
                id: id.to_string(),
                timeout,
                state,
            }),
        }
    }
}

/// The task has no final outcome yet; its state.
struct Unfinished(TaskState);

fn final_result<R: DeserializeOwned>(
    queue: &QueueName,
    id: &str,
    outcome: TaskOutcome,
) -> Result<Result<R, BrokerError>, Unfinished> {
    Ok(match outcome {
        TaskOutcome::Unfinished(state) => return Err(Unfinished(state)),
        TaskOutcome::Succeeded { result } => decode_result(id, result.as_deref()),
        TaskOutcome::Failed { error } => Err(BrokerError::TaskFailed {
            id: id.to_string(),
            error,
        }),
        TaskOutcome::NotFound => Err(BrokerError::TaskNotFound {
            queue: queue.to_string(),
            id: id.to_string(),
        }),
    })
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
