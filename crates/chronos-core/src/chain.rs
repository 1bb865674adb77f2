//! Chains: tasks that run one after another, each starting when the previous one succeeded and
//! reading its result.

use serde::de::DeserializeOwned;

use crate::flow::{flow_task_id, ChainLink, Flow, StepSpec, DEFAULT_CHAIN_RETENTION};
use crate::{
    duration_ms, encode_args, new_task_id, now_ms, BrokerError, ChainInfo, ChainStatus, Client,
    DecodeError, Enqueue, EnqueueOptions, Flows, QueueName, TaskArgs,
};

/// A sequence of tasks, built step by step, enqueued with [`Client::enqueue_chain`].
///
/// Step `i` gets the task id `<chain id>:<i>`. Only the first step is enqueued at once; each
/// next one is enqueued by the worker that ran its predecessor, when the predecessor succeeded
/// and before it is acknowledged, carrying the predecessor's result (read it with the worker's
/// `Context::parent_result`). A step that is dead-lettered stops the chain:
/// [`Client::chain_status`] says [`ChainStatus::Failed`] with the step and its error.
///
/// Each step has its own kind, queue and options ([`TaskArgs::default_options`] apply). A step
/// takes no task id and no unique lock (refused at enqueue); `durable` applies to the first
/// step only. Steps are kept after they complete for their retention, or
/// [`DEFAULT_CHAIN_RETENTION`] (24 h) when they set none, so that the chain's status and the
/// steps' results stay readable; the chain's status is gone once they expire.
#[derive(Debug, Default)]
pub struct Chain {
    id: Option<String>,
    steps: Vec<Result<StepSpec, BrokerError>>,
    durable: Option<(u32, std::time::Duration)>,
}

impl Chain {
    /// An empty chain with a random id.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use this chain id instead of a random one: enqueueing the same chain again (a producer
    /// retrying after a timeout) is then a no-op.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Appends a step running `args` under `opts` (laid over `T`'s default options).
    pub fn then<T: TaskArgs>(mut self, args: &T, opts: EnqueueOptions) -> Self {
        let opts = T::default_options().merge(opts);
        if self.steps.is_empty() {
            self.durable = opts.durable;
        }
        self.steps
            .push(encode_args(args).and_then(|p| StepSpec::new(T::KIND, p, opts)));
        self
    }

    /// Steps so far.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True before the first step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl ChainStatus {
    /// The result of a succeeded chain decoded as `R`: None while the chain is not done, or when
    /// its last step returned none.
    pub fn result<R: DeserializeOwned>(&self) -> Option<Result<R, DecodeError>> {
        match self {
            ChainStatus::Succeeded {
                result: Some(bytes),
            } => Some(
                rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Payload {
                    kind: "chain result".into(),
                    reason: e.to_string(),
                }),
            ),
            _ => None,
        }
    }
}

impl<B: Enqueue + Flows> Client<B> {
    /// Enqueues the first step of `chain` and returns every step's queue and task id. Fails with
    /// [`BrokerError::InvalidOption`] for an empty chain or a step with a task id or a unique
    /// lock, and as [`Client::enqueue`] does otherwise (nothing written).
    pub async fn enqueue_chain(&self, chain: Chain) -> Result<ChainInfo, BrokerError> {
        if chain.steps.is_empty() {
            return Err(BrokerError::InvalidOption("a chain needs a step".into()));
        }
        let mut specs = chain.steps.into_iter().collect::<Result<Vec<_>, _>>()?;
        let id = chain.id.unwrap_or_else(new_task_id);
        let total = u32::try_from(specs.len())
            .map_err(|_| BrokerError::InvalidOption("too many steps".into()))?;
        let mut steps = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter_mut().enumerate() {
            let task_id = flow_task_id(&id, i as u64);
            crate::names::check_explicit_id(&task_id)?;
            steps.push((QueueName::new(spec.queue.as_str())?, task_id));
            spec.retention_ms
                .get_or_insert(duration_ms(DEFAULT_CHAIN_RETENTION) as u64);
        }
        let (first, rest) = specs
            .split_first()
            .ok_or_else(|| BrokerError::InvalidOption("a chain needs a step".into()))?;
        let flow = Flow {
            chain: Some(ChainLink {
                id: id.clone(),
                step: 0,
                total,
                rest: rest.to_vec(),
            }),
            ..Flow::default()
        };
        #[allow(unused_mut)]
        let mut task = first.task(flow_task_id(&id, 0), now_ms(), flow);
        task.durable = chain.durable;
        #[cfg(feature = "opentelemetry")]
        crate::trace_context::current_trace_context(&mut task.envelope.headers);
        let mut results = self.broker().enqueue(vec![task]).await?;
        results
            .pop()
            .unwrap_or_else(|| Err(BrokerError::Encode("no result".into())))?;
        Ok(ChainInfo { id, steps })
    }

    /// Where `chain` stands, from its steps' records: running at a step, succeeded (with the
    /// last step's result), failed at a step (with its error), or unknown once the records
    /// expired.
    pub async fn chain_status(&self, chain: &ChainInfo) -> Result<ChainStatus, BrokerError> {
        self.broker().chain_state(chain).await
    }
}
