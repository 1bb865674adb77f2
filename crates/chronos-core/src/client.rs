use crate::{
    encode_args, now_ms, BrokerError, Enqueue, EnqueueOptions, NewTask, TaskArgs, TaskInfo,
};

/// The typed producer API: enqueues values of [`TaskArgs`] types.
///
/// Cheap to clone when the broker is (the Redis broker is). `chronos-broker` names it with the
/// Redis broker as the default type and adds `Client::connect(url)` (its `Connect` trait).
#[derive(Debug, Clone)]
pub struct Client<B> {
    broker: B,
}

impl<B> Client<B> {
    /// The broker underneath.
    pub fn broker(&self) -> &B {
        &self.broker
    }
}

impl<B: Enqueue> Client<B> {
    /// A client over any broker that can enqueue.
    pub fn new(broker: B) -> Self {
        Self { broker }
    }

    /// Enqueues one task. `opts` is laid over [`TaskArgs::default_options`]. With the
    /// `opentelemetry` feature, the current span's W3C trace context goes into the task's
    /// headers ([`crate::TRACEPARENT_HEADER`]), unless `opts` already set one.
    ///
    /// Errors: [`BrokerError::InvalidQueue`], [`BrokerError::PayloadTooLarge`],
    /// [`BrokerError::DuplicateTask`], [`BrokerError::TaskIdConflict`] (all permanent, nothing
    /// written), or [`BrokerError::Store`] (transient; with an explicit task id a retry is safe).
    pub async fn enqueue<T: TaskArgs>(
        &self,
        args: &T,
        opts: EnqueueOptions,
    ) -> Result<TaskInfo, BrokerError> {
        let task = build::<T>(args, opts)?;
        let mut results = self.broker.enqueue(vec![task]).await?;
        results
            .pop()
            .unwrap_or_else(|| Err(BrokerError::Encode("no result".into())))
    }

    /// Enqueues many tasks of one type in one round trip (script calls of 125 tasks per queue,
    /// pipelined together; each call is atomic). Returns one
    /// result per task, in order: a refused task (duplicate, bad queue) does not stop the others.
    pub async fn enqueue_batch<'a, T: TaskArgs>(
        &self,
        items: impl IntoIterator<Item = (&'a T, EnqueueOptions)>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        let mut tasks = Vec::new();
        let mut early: Vec<(usize, BrokerError)> = Vec::new();
        let mut slots = Vec::new();
        for (i, (args, opts)) in items.into_iter().enumerate() {
            match build::<T>(args, opts) {
                Ok(t) => {
                    slots.push(i);
                    tasks.push(t);
                }
                Err(e) => early.push((i, e)),
            }
        }
        let total = slots.len() + early.len();
        let stored = self.broker.enqueue(tasks).await?;
        let mut out: Vec<Option<Result<TaskInfo, BrokerError>>> =
            (0..total).map(|_| None).collect();
        for (i, r) in slots.into_iter().zip(stored) {
            out[i] = Some(r);
        }
        for (i, e) in early {
            out[i] = Some(Err(e));
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(BrokerError::Encode("no result".into()))))
            .collect())
    }
}

fn build<T: TaskArgs>(args: &T, opts: EnqueueOptions) -> Result<NewTask, BrokerError> {
    let opts = T::default_options().merge(opts);
    crate::QueueName::new(opts.queue_name())?;
    #[allow(unused_mut)]
    let mut task = NewTask::build(T::KIND, encode_args(args)?, opts, now_ms())?;
    // The producer's trace context travels with the task, so the worker's span can link to it.
    #[cfg(feature = "opentelemetry")]
    crate::trace_context::current_trace_context(&mut task.envelope.headers);
    Ok(task)
}
