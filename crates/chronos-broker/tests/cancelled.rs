//! A handler's cancel (`Consume::cancel`): the task ends in its own state with its reason, no
//! attempt and no error, its lock released; it is listed, counted, inspectable, trimmed by the
//! archive's rules, and an operator can run it again or delete it. Safe under a lost reply and
//! for a stale lease.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::SortedSetsInterface;
use chronos_broker::{
    ActionOutcome, CancelOutcome, Client, Consume, Dedup, EnqueueOptions, EnqueueOutcome, Inspect,
    Lease, Maintain, Operate, QueueName, RedisBroker, Results, SettleExt, TaskAction, TaskOutcome,
    TaskState,
};
use common::{broker, email, rig, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

async fn fetch(b: &RedisBroker, count: usize) -> Vec<Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    let leases = take(b, &mut reader, &q(), "w", count, Duration::ZERO)
        .await
        .leases;
    let ids: Vec<_> = leases.iter().map(|l| l.id.clone()).collect();
    b.start(&q(), &ids).await.expect("start");
    leases
}

#[tokio::test]
async fn a_cancelled_task_is_kept_with_its_reason_no_attempt_and_no_error() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // A plain task (no record until now) and one holding a deduplication lock.
    let plain = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let keyed = client
        .enqueue(
            &email(2),
            EnqueueOptions::new().dedup(Dedup::key("order:7")),
        )
        .await
        .expect("enqueue");
    for l in fetch(&b, 10).await {
        let reason = format!("order withdrawn ({})", l.id.task_id);
        assert_eq!(
            b.cancel(&l.id, &reason).await.expect("cancel"),
            CancelOutcome::Cancelled
        );
    }
    let stats = b.queue_stats(&q()).await.expect("stats");
    assert_eq!(
        (
            stats.pending,
            stats.active,
            stats.archived,
            stats.cancelled,
            stats.failed
        ),
        (0, 0, 0, 2, 0),
        "a cancel is neither a failure nor a dead letter"
    );
    for id in [&plain.id, &keyed.id] {
        let rec = b.task(&q(), id).await.expect("task").expect("exists");
        assert_eq!(rec.state, TaskState::Cancelled);
        let c = rec.cancelled.expect("cancellation");
        assert_eq!(c.reason, format!("order withdrawn ({id})"));
        assert!(c.at_ms > 0);
        let env = rec.envelope.expect("envelope kept");
        assert_eq!((env.retried, env.last_error), (0, None));
        // A producer waiting for its result hears why.
        assert_eq!(
            b.outcome(&q(), id).await.expect("outcome"),
            TaskOutcome::Cancelled {
                reason: format!("order withdrawn ({id})")
            }
        );
    }
    let listed = b
        .list_tasks(&q(), TaskState::Cancelled, 0, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 2);
    // The lock went with the cancel: the same key creates a new task.
    let again = client
        .enqueue(
            &email(3),
            EnqueueOptions::new().dedup(Dedup::key("order:7")),
        )
        .await
        .expect("enqueue");
    assert_eq!(again.outcome, EnqueueOutcome::Created);
    assert_ne!(again.id, keyed.id);
}

#[tokio::test]
async fn a_cancel_whose_reply_is_lost_answers_what_it_did_and_counts_once() {
    let rig = rig().await;
    let lease = rig.running(EnqueueOptions::new()).await;
    rig.lose_reply_of("cancel");
    assert_eq!(
        rig.via
            .cancel(&lease.id, "not needed")
            .await
            .expect("cancel"),
        CancelOutcome::Cancelled
    );
    rig.assert_lost(1);
    let stats = rig.direct.queue_stats(&q()).await.expect("stats");
    assert_eq!((stats.active, stats.cancelled, stats.failed), (0, 1, 0));
    let set = rig.direct.keyspace().queue(&q()).cancelled();
    let n: u64 = rig.direct.client().zcard(set).await.expect("zcard");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_stale_lease_cancels_nothing() {
    let b = broker().await;
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new().task_id("t1"))
        .await
        .expect("enqueue");
    let l = fetch(&b, 1).await.remove(0);
    // The recoverer took it (as from a worker presumed dead) and delivered it again.
    tokio::time::sleep(Duration::from_millis(30)).await;
    b.reclaim_idle(&q(), Duration::from_millis(10), 10)
        .await
        .expect("reclaim");
    assert_eq!(
        b.cancel(&l.id, "late").await.expect("cancel"),
        CancelOutcome::Stale
    );
    let rec = b.task(&q(), &info.id).await.expect("task").expect("exists");
    assert_ne!(rec.state, TaskState::Cancelled);
    assert!(rec.cancelled.is_none());
    assert_eq!(b.queue_stats(&q()).await.expect("stats").cancelled, 0);
}

#[tokio::test]
async fn an_operator_runs_a_cancelled_task_again_or_deletes_it() {
    let b = broker().await;
    let client = Client::new(b.clone());
    for n in 1..=2 {
        client
            .enqueue(&email(n), EnqueueOptions::new().task_id(format!("t{n}")))
            .await
            .expect("enqueue");
    }
    for l in fetch(&b, 10).await {
        b.cancel(&l.id, "paused by the user").await.expect("cancel");
    }
    assert_eq!(
        b.act(&q(), "t1", TaskAction::RunNow).await.expect("run"),
        ActionOutcome::Done
    );
    let rec = b.task(&q(), "t1").await.expect("task").expect("exists");
    assert_eq!(rec.state, TaskState::Pending);
    assert!(rec.cancelled.is_none(), "the reason goes with the state");
    assert_eq!(
        b.act(&q(), "t2", TaskAction::Delete).await.expect("delete"),
        ActionOutcome::Done
    );
    assert!(b.task(&q(), "t2").await.expect("task").is_none());
    let stats = b.queue_stats(&q()).await.expect("stats");
    assert_eq!((stats.pending, stats.cancelled), (1, 0));
    // The task run again is delivered as any other.
    let again = fetch(&b, 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id.task_id, "t1");
}

#[tokio::test]
async fn the_janitor_keeps_cancelled_tasks_by_the_archives_rules_counted_on_their_own() {
    let b = broker().await;
    let client = Client::new(b.clone());
    for n in 1..=3 {
        client
            .enqueue(&email(n), EnqueueOptions::new().task_id(format!("t{n}")))
            .await
            .expect("enqueue");
    }
    let leases = fetch(&b, 10).await;
    // One dead letter and two cancelled tasks, the older cancelled first.
    b.dead_letter(&leases[0].id, "boom", true)
        .await
        .expect("dead");
    b.cancel(&leases[1].id, "first").await.expect("cancel");
    tokio::time::sleep(Duration::from_millis(5)).await;
    b.cancel(&leases[2].id, "second").await.expect("cancel");
    // A cap of one per set: the older cancelled task goes, the dead letter (alone in its set)
    // stays.
    let removed = b
        .trim(&q(), Duration::from_secs(3600), 1, 100)
        .await
        .expect("trim");
    assert_eq!(removed, 1);
    let stats = b.queue_stats(&q()).await.expect("stats");
    assert_eq!((stats.archived, stats.cancelled), (1, 1));
    assert!(b.task(&q(), "t2").await.expect("task").is_none());
    assert_eq!(
        b.task(&q(), "t3").await.expect("task").expect("kept").state,
        TaskState::Cancelled
    );
    // Past the age, the last one goes too.
    let removed = b.trim(&q(), Duration::ZERO, 100, 100).await.expect("trim");
    assert_eq!(
        removed, 2,
        "the dead letter and the cancelled task are both past the age"
    );
    assert_eq!(b.queue_stats(&q()).await.expect("stats").cancelled, 0);
}

#[tokio::test]
async fn a_queue_holding_a_cancelled_task_is_deleted_only_when_forced() {
    let b = broker().await;
    Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = fetch(&b, 1).await.remove(0);
    b.cancel(&l.id, "no longer wanted").await.expect("cancel");
    assert!(b.delete_queue(&q(), false).await.is_err());
    assert_eq!(b.queue_stats(&q()).await.expect("stats").cancelled, 1);
    b.delete_queue(&q(), true).await.expect("forced delete");
    let set = b.keyspace().queue(&q()).cancelled();
    let n: u64 = b.client().zcard(set).await.expect("zcard");
    assert_eq!(n, 0);
}
