//! An in-memory broker written against `chronos-core` alone: the producer's `Client` writes to
//! it, a consumer fetches, starts and completes through `Consume`, and the producer reads the
//! result through `Results`. It shows that a store needs nothing of the Redis broker (this
//! crate's dependencies hold no Redis client; see `no_driver.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chronos_core::{
    decode_args, BrokerError, CancelOutcome, Client, Completion, Consume, DeadOutcome, Enqueue,
    EnqueueOptions, Fetched, Interrupt, Lease, LeaseId, NewTask, QueueName, Results, SnoozeOutcome,
    StartOutcome, TaskArgs, TaskInfo, TaskOutcome, TaskState,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default)]
struct Memory {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    pending: HashMap<String, VecDeque<NewTask>>,
    active: HashMap<String, NewTask>,
    done: HashMap<String, Option<Vec<u8>>>,
}

impl Enqueue for Memory {
    async fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let mut out = Vec::new();
        for mut task in tasks {
            QueueName::new(task.envelope.queue.as_str())?;
            s.next += 1;
            if task.envelope.id.is_empty() {
                task.envelope.id = format!("mem-{}", s.next);
            }
            out.push(Ok(TaskInfo {
                id: task.envelope.id.clone(),
                queue: task.envelope.queue.clone(),
                kind: task.envelope.kind.clone(),
                state: TaskState::Pending,
                run_at_ms: task.run_at_ms,
                outcome: Default::default(),
            }));
            let queue = task.envelope.queue.clone();
            s.pending.entry(queue).or_default().push_back(task);
        }
        Ok(out)
    }
}

impl Results for Memory {
    async fn progress(
        &self,
        _queue: &QueueName,
        _id: &str,
    ) -> Result<Option<chronos_core::TaskProgress>, BrokerError> {
        Ok(None)
    }

    async fn outcome(&self, _queue: &QueueName, id: &str) -> Result<TaskOutcome, BrokerError> {
        let s = self.state.lock().unwrap();
        Ok(match s.done.get(id) {
            Some(result) => TaskOutcome::Succeeded {
                result: result.clone(),
            },
            None if s.active.contains_key(id) => TaskOutcome::Unfinished(TaskState::Active),
            None => TaskOutcome::Unfinished(TaskState::Pending),
        })
    }

    async fn wait_outcome(
        &self,
        queue: &QueueName,
        id: &str,
        _timeout: Duration,
    ) -> Result<TaskOutcome, BrokerError> {
        self.outcome(queue, id).await
    }
}

impl Consume for Memory {
    type Reader = ();

    async fn open_reader(&self) -> Result<(), BrokerError> {
        Ok(())
    }

    async fn close_reader(&self, _reader: ()) {}

    async fn ensure_queue(&self, _queue: &QueueName) -> Result<(), BrokerError> {
        Ok(())
    }

    async fn fetch(
        &self,
        _reader: &mut (),
        queue: &QueueName,
        _consumer: &str,
        count: usize,
        _block: Duration,
    ) -> Result<Fetched, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let mut fetched = Fetched::default();
        while fetched.leases.len() < count {
            let Some(task) = s
                .pending
                .get_mut(queue.as_str())
                .and_then(VecDeque::pop_front)
            else {
                break;
            };
            let id = task.envelope.id.clone();
            fetched.leases.push(Lease {
                id: LeaseId::new(queue.clone(), id.clone(), format!("d-{id}")),
                envelope: Ok(task.envelope.clone()),
            });
            s.active.insert(id, task);
        }
        Ok(fetched)
    }

    async fn start(
        &self,
        _queue: &QueueName,
        leases: &[LeaseId],
    ) -> Result<Vec<StartOutcome>, BrokerError> {
        let s = self.state.lock().unwrap();
        Ok(leases
            .iter()
            .map(|l| match s.active.get(&l.task_id) {
                Some(t) => StartOutcome::Started(chronos_core::Attempt {
                    retried: t.envelope.retried,
                    max_retry: t.envelope.max_retry,
                    last_error: None,
                    last_failed_at_ms: None,
                    unique_key: None,
                }),
                None => StartOutcome::Lost,
            })
            .collect())
    }

    async fn complete_and_fetch(
        &self,
        reader: &mut (),
        queue: &QueueName,
        consumer: &str,
        done: &[Completion],
        count: usize,
    ) -> Result<(u64, Fetched), BrokerError> {
        let settled = self.complete(queue, done).await?;
        let fetched = self
            .fetch(reader, queue, consumer, count, Duration::ZERO)
            .await?;
        Ok((settled, fetched))
    }

    async fn complete(&self, _queue: &QueueName, done: &[Completion]) -> Result<u64, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let mut n = 0;
        for c in done {
            if s.active.remove(&c.lease.task_id).is_some() {
                s.done.insert(c.lease.task_id.clone(), c.result.clone());
                n += 1;
            }
        }
        Ok(n)
    }

    async fn retry(
        &self,
        lease: &LeaseId,
        _delay: Duration,
        _error: &str,
    ) -> Result<bool, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let Some(task) = s.active.remove(&lease.task_id) else {
            return Ok(false);
        };
        s.pending
            .entry(lease.queue.to_string())
            .or_default()
            .push_back(task);
        Ok(true)
    }

    async fn snooze(
        &self,
        lease: &LeaseId,
        _delay: Duration,
        _max_snoozes: u32,
    ) -> Result<SnoozeOutcome, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let Some(task) = s.active.remove(&lease.task_id) else {
            return Ok(SnoozeOutcome::Stale);
        };
        s.pending
            .entry(lease.queue.to_string())
            .or_default()
            .push_back(task);
        Ok(SnoozeOutcome::Snoozed { snoozes: 1 })
    }

    async fn back_off(
        &self,
        lease: &LeaseId,
        _scope: &chronos_core::BackoffScope,
        _delay: Duration,
    ) -> Result<chronos_core::BackoffOutcome, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let Some(task) = s.active.remove(&lease.task_id) else {
            return Ok(chronos_core::BackoffOutcome::Stale);
        };
        s.pending
            .entry(lease.queue.to_string())
            .or_default()
            .push_back(task);
        Ok(chronos_core::BackoffOutcome::Blocked {
            until_ms: 0,
            due_ms: 0,
        })
    }

    async fn dead_letter(
        &self,
        lease: &LeaseId,
        _error: &str,
        _count_attempt: bool,
    ) -> Result<DeadOutcome, BrokerError> {
        let removed = self.state.lock().unwrap().active.remove(&lease.task_id);
        Ok(if removed.is_some() {
            DeadOutcome::Discarded
        } else {
            DeadOutcome::Stale
        })
    }

    async fn cancel(&self, lease: &LeaseId, _reason: &str) -> Result<CancelOutcome, BrokerError> {
        // This store keeps no finished tasks: a cancelled one is dropped, as a dead one is.
        let removed = self.state.lock().unwrap().active.remove(&lease.task_id);
        Ok(if removed.is_some() {
            CancelOutcome::Cancelled
        } else {
            CancelOutcome::Stale
        })
    }

    async fn requeue(&self, _queue: &QueueName, leases: &[LeaseId]) -> Result<u64, BrokerError> {
        let mut n = 0;
        for lease in leases {
            n += u64::from(self.retry(lease, Duration::ZERO, "requeued").await?);
        }
        Ok(n)
    }

    async fn watch(
        &self,
        _reader: &mut (),
        _queues: &[QueueName],
        _consumer: &str,
        _count: usize,
        _block: Duration,
    ) -> Result<Option<Vec<(usize, Fetched)>>, BrokerError> {
        // One queue at a time: a worker then fetches per queue.
        Ok(None)
    }

    async fn interrupter(&self, _reader: &()) -> Option<Interrupt> {
        None
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Resize {
    width: u32,
}

impl TaskArgs for Resize {
    const KIND: &'static str = "image:resize";
}

#[tokio::test]
async fn a_task_goes_through_an_in_memory_broker() {
    let client = Client::new(Memory::default());
    let info = client
        .enqueue(
            &Resize { width: 640 },
            EnqueueOptions::new().queue("images"),
        )
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Pending);

    let broker = client.broker();
    let queue = QueueName::new("images").unwrap();
    broker.open_reader().await.unwrap();
    let fetched = broker
        .fetch(&mut (), &queue, "c1", 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(fetched.leases.len(), 1);
    let lease = &fetched.leases[0];
    let envelope = lease.envelope.as_ref().unwrap();
    assert_eq!(
        decode_args::<Resize>(&envelope.payload).unwrap(),
        Resize { width: 640 }
    );

    let started = broker
        .start(&queue, std::slice::from_ref(&lease.id))
        .await
        .unwrap();
    assert!(matches!(started[..], [StartOutcome::Started(_)]));
    assert_eq!(
        broker.outcome(&queue, &info.id).await.unwrap(),
        TaskOutcome::Unfinished(TaskState::Active)
    );
    let done = Completion {
        lease: lease.id.clone(),
        retention: None,
        result: Some(rmp_serde::to_vec(&"resized").unwrap()),
    };
    assert_eq!(broker.complete(&queue, &[done]).await.unwrap(), 1);
    let result: Option<String> = client.result("images", &info.id).await.unwrap();
    assert_eq!(result.as_deref(), Some("resized"));
}

#[tokio::test]
async fn a_bad_queue_name_is_refused_by_the_shared_rules() {
    let client = Client::new(Memory::default());
    let err = client
        .enqueue(
            &Resize { width: 1 },
            EnqueueOptions::new().queue("bad queue"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::InvalidQueue { .. }), "{err}");
}
