//! A task's result through the [`Client`]: read it, or wait for it.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::outcome::decode_result;
use crate::{BrokerError, Client, QueueName, Results, TaskOutcome, TaskState};

impl<B: Results> Client<B> {
    /// The last progress task `id` of `queue` reported from its handler (`Context::progress`
    /// in the worker): written at most a few times a second per task, read here as the store
    /// has it, and kept for [`crate::PROGRESS_TTL`] after the last report, also once the task
    /// ended. None when the task reported none (or that long ago), or is unknown.
    pub async fn progress(
        &self,
        queue: &str,
        id: &str,
    ) -> Result<Option<crate::TaskProgress>, BrokerError> {
        let q = QueueName::new(queue)?;
        self.broker().progress(&q, id).await
    }

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
        TaskOutcome::Cancelled { reason } => Err(BrokerError::TaskCancelled {
            id: id.to_string(),
            reason,
        }),
        TaskOutcome::NotFound => Err(BrokerError::TaskNotFound {
            queue: queue.to_string(),
            id: id.to_string(),
        }),
    })
}
