//! Turning workflow steps into tasks: a chain step's options into its spec, and a finished
//! step into its successor.

use crate::flow::{flow_task_id, ChainLink, Flow};
use crate::{duration_ms, BrokerError, Due, EnqueueOptions, NewTask, StepSpec, TaskEnvelope};

impl StepSpec {
    /// The step of `args` (already encoded) under `opts`, laid over no defaults. A chain step
    /// takes no task id (its id is `<chain id>:<index>`) and no unique lock.
    pub(crate) fn new(
        kind: &str,
        payload: Vec<u8>,
        opts: EnqueueOptions,
    ) -> Result<Self, BrokerError> {
        if opts.task_id.is_some() || opts.unique_ttl.is_some() || opts.dedup.is_some() {
            return Err(BrokerError::InvalidOption(
                "a chain step or group member takes neither a task id (its id is derived from \
                 the chain or group id) nor a unique lock"
                    .into(),
            ));
        }
        if let Some(key) = &opts.rate_key {
            crate::names::check_rate_key(key)?;
        }
        Ok(Self {
            kind: kind.to_string(),
            queue: opts.queue_name().to_string(),
            payload,
            max_retry: opts.max_retry.unwrap_or(crate::DEFAULT_MAX_RETRY),
            timeout_ms: opts.timeout.map(|d| duration_ms(d) as u64),
            deadline_ms: opts.deadline_ms,
            retention_ms: opts.retention.map(|d| duration_ms(d) as u64),
            dead_letter: opts.dead_letter.unwrap_or_default(),
            delay_ms: opts.process_in.map(duration_ms),
            run_at_ms: opts.run_at_ms,
            headers: opts.headers,
            rate_key: opts.rate_key,
        })
    }

    /// The task of this step with id `id`, enqueued at `now_ms`, carrying `flow`.
    pub(crate) fn task(&self, id: String, now_ms: i64, flow: Flow) -> NewTask {
        let due = match (self.run_at_ms, self.delay_ms) {
            (Some(at), _) => Due::At(at),
            (None, Some(d)) => Due::In(d),
            (None, None) => Due::Now,
        };
        let run_at_ms = match due {
            Due::At(at) => at,
            Due::In(d) => now_ms.saturating_add(d),
            Due::Now => now_ms,
        };
        NewTask {
            envelope: TaskEnvelope {
                id,
                kind: self.kind.clone(),
                queue: self.queue.clone(),
                payload: self.payload.clone(),
                retried: 0,
                max_retry: self.max_retry,
                timeout_ms: self.timeout_ms,
                deadline_ms: self.deadline_ms,
                unique_key: None,
                retention_ms: self.retention_ms,
                dead_letter: self.dead_letter,
                enqueued_at_ms: now_ms,
                last_error: None,
                last_failed_at_ms: None,
                headers: self.headers.clone(),
                rate_key: self.rate_key.clone(),
                flow: Some(Box::new(flow)),
            },
            run_at_ms,
            unique_ttl: None,
            due,
            explicit_id: true,
            durable: None,
            // Steps run at the default level: a chain's later steps are enqueued by scripts
            // that write no level (see the changelog's note on priorities and workflows).
            priority: crate::Priority::NORMAL,
            tenant: None,
            lifo: false,
            dedup: None,
        }
    }
}

/// The next step of the chain `env` is a step of, carrying `result` (the step's encoded result)
/// as its parent; None when `env` is the last step or no chain step. `now_ms` is the enqueue
/// time.
pub fn chain_successor(env: &TaskEnvelope, result: Option<&[u8]>, now_ms: i64) -> Option<NewTask> {
    let link = env.flow.as_ref()?.chain.as_ref()?;
    let (next, rest) = link.rest.split_first()?;
    let step = link.step.checked_add(1)?;
    let flow = Flow {
        chain: Some(ChainLink {
            id: link.id.clone(),
            step,
            total: link.total,
            rest: rest.to_vec(),
        }),
        parent: result.map(<[u8]>::to_vec).unwrap_or_default(),
        ..Flow::default()
    };
    Some(next.task(flow_task_id(&link.id, u64::from(step)), now_ms, flow))
}
