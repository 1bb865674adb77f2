//! Tasks enqueued by an operator (the console's enqueue form): by kind and JSON payload, or as
//! a copy of an existing task. Validated as a typed producer's task would be; the handler that
//! takes the kind decodes the payload.

use chronos_broker::{
    now_ms, Enqueue, EnqueueOptions, Inspect, NewTask, Operate, Priority, QueueName, TaskEnvelope,
    TaskInfo,
};

use crate::admin::Admin;
use crate::error::AdminError;

/// Longest task kind an operator may type.
const MAX_KIND: usize = 200;

/// Checks a task kind typed by an operator: 1 to 200 characters, no control character.
pub fn check_kind(kind: &str) -> Result<(), AdminError> {
    if kind.is_empty() || kind.len() > MAX_KIND || kind.chars().any(char::is_control) {
        return Err(AdminError::Invalid(format!(
            "task kind {kind:?} must be 1 to {MAX_KIND} characters without control characters"
        )));
    }
    Ok(())
}

impl<B: Enqueue + Inspect + Operate + 'static> Admin<B> {
    /// Enqueues one task of `kind` with `payload` (MessagePack bytes, as [`chronos_broker::json_payload`]
    /// makes from JSON) into queue `name` under `opts` (its queue is set to `name`). The queue
    /// need not exist yet: enqueuing creates it. Answers what the enqueue did (an explicit id
    /// already taken answers its existing task, as for any producer).
    pub async fn enqueue_raw(
        &self,
        name: &str,
        kind: &str,
        payload: Vec<u8>,
        opts: EnqueueOptions,
    ) -> Result<TaskInfo, AdminError> {
        let q = QueueName::new(name)?;
        check_kind(kind)?;
        let task = NewTask::build(kind, payload, opts.queue(q.as_str()), now_ms())?;
        let mut out = self.broker.enqueue(vec![task]).await?;
        match out.pop() {
            Some(r) => Ok(r?),
            None => Err(AdminError::Broker(chronos_broker::BrokerError::Protocol {
                context: "enqueue",
                detail: "no outcome for the task sent".into(),
            })),
        }
    }

    /// The envelope and the priority level of task `id` of queue `name`, to copy it:
    /// [`AdminError::TaskNotFound`] for an unknown id, [`AdminError::Invalid`] when its
    /// envelope does not decode.
    pub async fn copy_of(
        &self,
        name: &str,
        id: &str,
    ) -> Result<(TaskEnvelope, Priority), AdminError> {
        let q = self.require_queue(name).await?;
        let rec = self
            .broker
            .task(&q, id)
            .await?
            .ok_or_else(|| AdminError::TaskNotFound {
                queue: name.to_string(),
                id: id.to_string(),
            })?;
        let env = rec
            .envelope
            .map_err(|e| AdminError::Invalid(format!("task {id:?} cannot be copied: {e}")))?;
        Ok((env, rec.priority))
    }
}
