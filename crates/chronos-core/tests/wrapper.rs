//! A broker wrapper written against `chronos-core` alone, with the one forwarding macro: it
//! counts the calls that reach any broker it wraps, whatever the store. Forgetting a method or a
//! capability would not compile (the traits have no default bodies), which is what this file
//! pins for the capabilities a worker and a producer use.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use chronos_core::{
    forward, BrokerError, Client, Consume, Enqueue, EnqueueOptions, Flows, Inspect, Maintain,
    NewTask, QueueName, Results, SampleQueues, TaskArgs, TaskInfo, TaskOutcome, TaskState,
    Throttle,
};
use serde::{Deserialize, Serialize};

/// Counts calls per method, then forwards them.
#[derive(Debug)]
struct Counting<B> {
    inner: B,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl<B> Counting<B> {
    fn new(inner: B) -> Self {
        Self {
            inner,
            calls: Mutex::default(),
        }
    }

    fn count(&self, method: &'static str) -> Result<(), BrokerError> {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
        Ok(())
    }

    fn calls(&self, method: &str) -> u64 {
        self.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }
}

impl<B: Enqueue> Enqueue for Counting<B> {
    forward!(Enqueue => inner, before count);
}
impl<B: Results> Results for Counting<B> {
    forward!(Results => inner, before count);
}
impl<B: Consume> Consume for Counting<B> {
    type Reader = B::Reader;
    forward!(Consume => inner, before count);
}
impl<B: Maintain> Maintain for Counting<B> {
    forward!(Maintain => inner, before count);
}
impl<B: Inspect> Inspect for Counting<B> {
    forward!(Inspect => inner, before count);
}
impl<B: SampleQueues> SampleQueues for Counting<B> {
    forward!(SampleQueues => inner, before count);
}
impl<B: Flows> Flows for Counting<B> {
    forward!(Flows => inner, before count);
}
impl<B: Throttle> Throttle for Counting<B> {
    forward!(Throttle => inner);
}

/// A store that takes every task and answers every outcome "pending": enough to see the
/// wrapper pass calls through.
#[derive(Debug, Default)]
struct Sink;

impl Enqueue for Sink {
    async fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        Ok(tasks
            .into_iter()
            .map(|t| {
                Ok(TaskInfo {
                    id: "sunk".into(),
                    queue: t.envelope.queue,
                    kind: t.envelope.kind,
                    state: TaskState::Pending,
                    run_at_ms: t.run_at_ms,
                    outcome: Default::default(),
                })
            })
            .collect())
    }
}

impl Results for Sink {
    async fn outcome(&self, _queue: &QueueName, _id: &str) -> Result<TaskOutcome, BrokerError> {
        Ok(TaskOutcome::Unfinished(TaskState::Pending))
    }

    async fn wait_outcome(
        &self,
        _queue: &QueueName,
        _id: &str,
        _timeout: Duration,
    ) -> Result<TaskOutcome, BrokerError> {
        Ok(TaskOutcome::Unfinished(TaskState::Pending))
    }
    async fn progress(
        &self,
        _queue: &QueueName,
        _id: &str,
    ) -> Result<Option<chronos_core::TaskProgress>, BrokerError> {
        Ok(None)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Ping;

impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
}

#[tokio::test]
async fn the_wrapper_counts_and_forwards() {
    let client = Client::new(Counting::new(Sink));
    let info = client.enqueue(&Ping, EnqueueOptions::new()).await.unwrap();
    assert_eq!(info.id, "sunk");
    let queue = QueueName::new("default").unwrap();
    let outcome = client.broker().outcome(&queue, "sunk").await.unwrap();
    assert_eq!(outcome, TaskOutcome::Unfinished(TaskState::Pending));
    assert_eq!(client.broker().calls("enqueue"), 1);
    assert_eq!(client.broker().calls("outcome"), 1);
}
