//! Bulk actions reach every matching task (issue 35, 3.1): 3,000 tasks of one state that share
//! one score (dead letters settled in one millisecond, tasks due at one instant), for every
//! state and every action that takes it, through both bulk runners: [`Admin::run_bulk`] (the
//! CLI's `--all` and the console's jobs) and [`Admin::act_all`] (the broker's own loop).

use std::time::Duration;

use chronos_admin::{Admin, BulkJob, CancelToken};
use chronos_broker::fred::interfaces::SortedSetsInterface;
use chronos_broker::fred::types::sorted_sets::Ordering as ZOrdering;
use chronos_broker::fred::types::SetOptions;
use chronos_broker::{
    Client, Completion, Consume, EnqueueOptions, QueueName, RedisBroker, SettleExt, TaskAction,
    TaskArgs, TaskFilter, TaskState, Timestamp,
};
use serde::{Deserialize, Serialize};

const N: u64 = 3_000;

#[derive(Serialize, Deserialize)]
struct Mail {
    n: u64,
}
impl TaskArgs for Mail {
    const KIND: &'static str = "mail:send";
}

async fn admin() -> Admin<RedisBroker> {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let b = RedisBroker::builder(url.as_str())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    Admin::new(b)
}

fn in_state(s: &chronos_admin::QueueRow, state: TaskState) -> u64 {
    match state {
        TaskState::Pending => s.pending,
        TaskState::Scheduled => s.scheduled,
        TaskState::Retry => s.retry,
        TaskState::Archived => s.archived,
        TaskState::Completed => s.completed,
        TaskState::Cancelled => s.cancelled,
        _ => unreachable!(),
    }
}

/// Fills `queue` with N tasks in `state`, every one of them at one and the same score when the
/// state is a sorted set (rewritten so where the transitions spread them over a few ms).
async fn fill(b: &RedisBroker, queue: &str, state: TaskState) {
    let client = Client::new(b.clone());
    let q = QueueName::new(queue).expect("queue");
    let mut opts = EnqueueOptions::new().queue(queue);
    // One instant for all: the scheduled set's score.
    let due = Timestamp::from_unix_ms(chronos_broker::now_ms() + 3_600_000);
    match state {
        TaskState::Scheduled => opts = opts.process_at(due),
        TaskState::Completed => opts = opts.retention(Duration::from_secs(3600)),
        _ => {}
    }
    let mails: Vec<Mail> = (0..N).map(|n| Mail { n }).collect();
    for part in mails.chunks(1_000) {
        for r in client
            .enqueue_batch(part.iter().map(|m| (m, opts.clone())))
            .await
            .expect("enqueue")
        {
            r.expect("enqueued");
        }
    }
    let settle = matches!(
        state,
        TaskState::Retry | TaskState::Completed | TaskState::Cancelled
    );
    if settle {
        let mut reader = b.open_reader().await.expect("reader");
        let mut left = N as usize;
        while left > 0 {
            let f = b
                .fetch(&mut reader, &q, "w1", &[], left.min(1_000), Duration::ZERO)
                .await
                .expect("fetch");
            assert!(!f.leases.is_empty(), "fetched nothing with {left} left");
            left -= f.leases.len();
            let leases: Vec<_> = f.leases.into_iter().map(|l| l.id).collect();
            match state {
                TaskState::Completed => {
                    let done: Vec<Completion> = leases
                        .into_iter()
                        .map(|lease| Completion {
                            lease,
                            retention: Some(Duration::from_secs(3600)),
                            result: None,
                        })
                        .collect();
                    b.complete(&q, &done).await.expect("complete");
                }
                TaskState::Retry => {
                    futures::future::join_all(leases.iter().map(|l| async move {
                        assert!(b
                            .retry(l, Duration::from_secs(3600), "boom")
                            .await
                            .expect("retry"));
                    }))
                    .await;
                }
                _ => {
                    futures::future::join_all(leases.iter().map(|l| async move {
                        b.cancel(l, "not wanted").await.expect("cancel");
                    }))
                    .await;
                }
            }
        }
        b.close_reader(reader).await;
    }
    if state == TaskState::Archived {
        let r = Admin::new(b.clone())
            .act_all(
                queue,
                TaskState::Pending,
                &TaskFilter::default(),
                TaskAction::Archive,
            )
            .await
            .expect("archive");
        assert_eq!(r.done, N);
    }
    let keys = b.keyspace().queue(&q);
    let zset = match state {
        TaskState::Retry => keys.retry(),
        TaskState::Archived => keys.archived(),
        TaskState::Completed => keys.completed(),
        TaskState::Cancelled => keys.cancelled(),
        _ => return,
    };
    let members: Vec<String> = b
        .client()
        .zrange(&zset, 0, -1, None, false, None, false)
        .await
        .expect("zrange");
    assert_eq!(members.len() as u64, N, "{state:?}");
    let score = chronos_broker::now_ms() as f64;
    let _: i64 = b
        .client()
        .zadd(
            &zset,
            Some(SetOptions::XX),
            None::<ZOrdering>,
            false,
            false,
            members
                .into_iter()
                .map(|m| (score, m))
                .collect::<Vec<(f64, String)>>(),
        )
        .await
        .expect("one score for all");
}

/// Every (state, action) the actions take, except cancel (a signal to running handlers).
fn combos() -> Vec<(TaskState, TaskAction)> {
    let mut out = Vec::new();
    for action in [TaskAction::RunNow, TaskAction::Delete, TaskAction::Archive] {
        for &state in action.sources() {
            out.push((state, action));
        }
    }
    out
}

#[derive(Clone, Copy, Debug)]
enum Runner {
    /// `Admin::run_bulk`: the CLI's `--all` and the console's jobs.
    Paged,
    /// `Admin::act_all`: the broker's own loop.
    Broker,
}

async fn every_combination_reaches_every_task(runner: Runner) {
    let admin = admin().await;
    let mut figures = Vec::new();
    for (i, (state, action)) in combos().into_iter().enumerate() {
        let queue = format!("q{i}");
        fill(admin.broker(), &queue, state).await;
        assert_eq!(in_state(&admin.queue(&queue).await.expect("row"), state), N);
        let (done, matched) = match runner {
            Runner::Paged => {
                let job = BulkJob::new(queue.as_str(), state, TaskFilter::default(), action);
                let end = admin
                    .run_bulk(&job, &CancelToken::new(), |_| {})
                    .await
                    .expect("run");
                assert!(end.finished, "{end:?}");
                assert_eq!(end.untouched(), 0, "{end:?}");
                (end.done, end.matched)
            }
            Runner::Broker => {
                let r = admin
                    .act_all(&queue, state, &TaskFilter::default(), action)
                    .await
                    .expect("act all");
                (r.done, r.matched)
            }
        };
        let row = admin.queue(&queue).await.expect("row");
        figures.push(format!("{action:?} from {}: {done} of {N}", state.as_str()));
        assert_eq!(
            (done, matched, in_state(&row, state)),
            (N, N, 0),
            "{runner:?}: {action:?} of {} tasks left some behind",
            state.as_str()
        );
        let target = match action {
            TaskAction::RunNow => row.pending,
            TaskAction::Archive => row.archived,
            _ => row.pending + row.scheduled + row.retry + row.archived + row.completed,
        };
        let expected = if action == TaskAction::Delete { 0 } else { N };
        assert_eq!(target, expected, "{runner:?} {action:?} {}", state.as_str());
    }
    println!("{runner:?}: {}", figures.join(", "));
}

#[tokio::test]
async fn a_paged_bulk_run_reaches_every_task_of_every_state_sharing_one_score() {
    every_combination_reaches_every_task(Runner::Paged).await;
}

#[tokio::test]
async fn the_brokers_bulk_loop_reaches_every_task_of_every_state_sharing_one_score() {
    every_combination_reaches_every_task(Runner::Broker).await;
}
