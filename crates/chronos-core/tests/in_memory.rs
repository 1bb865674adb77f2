//! An in-memory broker written against `chronos-core` alone: the producer's `Client` writes to
//! it, a consumer fetches, starts and settles through `Consume`, and the producer reads the
//! result through `Results`. It shows that a store needs nothing of the Redis broker (this
//! crate's dependencies hold no Redis client; see `no_driver.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chronos_core::{
    decode_args, BackoffOutcome, BrokerError, CancelOutcome, Client, Completion, Consume,
    DeadOutcome, End, Enqueue, EnqueueOptions, Fetched, Interrupt, Lease, LeaseId, NewTask,
    QueueName, Results, SettleExt, Settled, Settlement, SnoozeOutcome, StartOutcome, TaskArgs,
    TaskInfo, TaskOutcome, TaskState,
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
        carry: &[Settlement],
        count: usize,
        _block: Duration,
    ) -> Result<Fetched, BrokerError> {
        let mut fetched = Fetched {
            settled: self.settle(carry).await?,
            ..Fetched::default()
        };
        let mut s = self.state.lock().unwrap();
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

    async fn settle(&self, settlements: &[Settlement]) -> Result<Vec<Settled>, BrokerError> {
        let mut s = self.state.lock().unwrap();
        let mut answers = Vec::with_capacity(settlements.len());
        for one in settlements {
            let id = &one.lease.task_id;
            // This store keeps no finished tasks and no clock: every end that puts a task back
            // queues it at once, and every end that finishes it drops it (a completion keeps
            // its result for `Results`).
            let Some(task) = s.active.remove(id) else {
                answers.push(stale(&one.end)?);
                continue;
            };
            answers.push(match &one.end {
                End::Completed { result, .. } => {
                    s.done.insert(id.clone(), result.clone());
                    Settled::Completed { stale: false }
                }
                End::DeadLettered { .. } => Settled::DeadLettered(DeadOutcome::Discarded),
                End::Cancelled { .. } => Settled::Cancelled(CancelOutcome::Cancelled),
                back => {
                    s.pending
                        .entry(one.lease.queue.to_string())
                        .or_default()
                        .push_back(task);
                    match back {
                        End::Retried { .. } => Settled::Retried { stale: false },
                        End::Snoozed { .. } => {
                            Settled::Snoozed(SnoozeOutcome::Snoozed { snoozes: 1 })
                        }
                        End::BackedOff { .. } => Settled::BackedOff(BackoffOutcome::Blocked {
                            until_ms: 0,
                            due_ms: 0,
                        }),
                        End::Requeued => Settled::Requeued { stale: false },
                        _ => return Err(BrokerError::Unsupported("this end of a delivery")),
                    }
                }
            });
        }
        Ok(answers)
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

/// The answer to `end` for a lease that is no longer current.
fn stale(end: &End) -> Result<Settled, BrokerError> {
    Ok(match end {
        End::Completed { .. } => Settled::Completed { stale: true },
        End::Retried { .. } => Settled::Retried { stale: true },
        End::Snoozed { .. } => Settled::Snoozed(SnoozeOutcome::Stale),
        End::BackedOff { .. } => Settled::BackedOff(BackoffOutcome::Stale),
        End::DeadLettered { .. } => Settled::DeadLettered(DeadOutcome::Stale),
        End::Cancelled { .. } => Settled::Cancelled(CancelOutcome::Stale),
        End::Requeued => Settled::Requeued { stale: true },
        _ => return Err(BrokerError::Unsupported("this end of a delivery")),
    })
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
        .fetch(&mut (), &queue, "c1", &[], 10, Duration::ZERO)
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

#[tokio::test]
async fn a_fetch_carries_the_settlements_of_the_last_batch() {
    let client = Client::new(Memory::default());
    for width in [1, 2] {
        client
            .enqueue(&Resize { width }, EnqueueOptions::new().queue("images"))
            .await
            .unwrap();
    }
    let broker = client.broker();
    let queue = QueueName::new("images").unwrap();
    let first = broker
        .fetch(&mut (), &queue, "c1", &[], 1, Duration::ZERO)
        .await
        .unwrap();
    let lease = first.leases[0].id.clone();
    let carry = [Settlement::completed(lease.clone())];
    let next = broker
        .fetch(&mut (), &queue, "c1", &carry, 1, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(next.settled, vec![Settled::Completed { stale: false }]);
    assert_eq!(next.leases.len(), 1);
    // Sent again (a lost reply), the same settlement finds its lease stale and changes nothing.
    assert_eq!(
        broker.settle(&carry).await.unwrap(),
        vec![Settled::Completed { stale: true }]
    );
}
