//! A task's attempt history (`TaskRecord::attempts`): each attempt that ends appends one row in
//! the script that settles it (retry, snooze, throttle, cancel, dead letter, a retained
//! completion, a lost worker's reclaim), the newest 25 are kept, and a re-sent settle after a
//! lost reply adds nothing.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::HashesInterface;
use chronos_broker::{
    AttemptOutcome, AttemptReport, AttemptRow, BackoffScope, CancelOutcome, Client, Consume,
    DeadOutcome, EnqueueOptions, Inspect, Lease, Maintain, QueueName, RedisBroker, SettleExt,
    Settled, Settlement, SnoozeOutcome, ATTEMPTS_KEPT,
};
use common::{broker, email, rig, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

/// The one delivery of queue `default` for `consumer`, started, after due tasks were forwarded.
async fn next(b: &RedisBroker, consumer: &str) -> Lease {
    b.forward_due(&q(), 100).await.expect("forward");
    let mut reader = b.open_reader().await.expect("reader");
    take(b, &mut reader, &q(), consumer, 1, Duration::ZERO)
        .await
        .leases
        .pop()
        .expect("a delivery")
}

/// An attempt's report: its handler ran for `ms`.
fn ran(ms: u64) -> AttemptReport {
    AttemptReport {
        ran_ms: Some(ms),
        logs: None,
    }
}

async fn history(b: &RedisBroker, id: &str) -> Vec<AttemptRow> {
    b.task(&q(), id)
        .await
        .expect("task")
        .expect("kept")
        .attempts
}

#[tokio::test]
async fn each_ended_attempt_is_one_row_of_its_task() {
    let b = broker().await;
    // A plain task: its first failure gives it a record, and the record its first row.
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = next(&b, "w1").await;
    let retry = Settlement::retried(l.id, Duration::ZERO, "smtp timeout").with_report(ran(40));
    assert_eq!(
        b.settle_one(retry).await.expect("retry"),
        Settled::Retried { stale: false }
    );
    let l = next(&b, "w2").await;
    let snooze = Settlement::snoozed(l.id, Duration::ZERO, 10).with_report(ran(15));
    assert_eq!(
        b.settle_one(snooze).await.expect("snooze"),
        Settled::Snoozed(SnoozeOutcome::Snoozed { snoozes: 1 })
    );
    let l = next(&b, "w1").await;
    let throttle = Settlement::backed_off(l.id, BackoffScope::Queue, Duration::from_millis(100))
        .with_report(ran(5));
    b.settle_one(throttle).await.expect("back off");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let l = next(&b, "w2").await;
    let done = Settlement::retained(l.id, Duration::from_secs(60), None).with_report(ran(70));
    assert_eq!(
        b.settle(&[done]).await.expect("complete"),
        vec![Settled::Completed { stale: false }]
    );
    let rows = history(&b, &info.id).await;
    let seen: Vec<(u32, AttemptOutcome, Option<&str>, Option<u64>)> = rows
        .iter()
        .map(|r| (r.attempt, r.outcome, r.worker.as_deref(), r.ran_ms))
        .collect();
    assert_eq!(
        seen,
        vec![
            (1, AttemptOutcome::Retried, Some("w1"), Some(40)),
            (2, AttemptOutcome::Snoozed, Some("w2"), Some(15)),
            (2, AttemptOutcome::Throttled, Some("w1"), Some(5)),
            (2, AttemptOutcome::Succeeded, Some("w2"), Some(70)),
        ],
        "a snooze and a throttle spend no attempt"
    );
    assert_eq!(rows[0].error.as_deref(), Some("smtp timeout"));
    for r in &rows {
        assert_eq!(
            r.started_at_ms,
            Some(r.ended_at_ms - r.ran_ms.map(|d| d as i64).unwrap_or_default())
        );
    }
    assert!(rows
        .windows(2)
        .all(|w| w[0].ended_at_ms <= w[1].ended_at_ms));
}

#[tokio::test]
async fn a_dead_letter_and_a_cancel_end_the_history_with_their_reason() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let dead = client
        .enqueue(&email(1), EnqueueOptions::new().max_retry(0))
        .await
        .expect("enqueue");
    let l = next(&b, "w").await;
    let dead_letter = Settlement::dead_lettered(l.id, "bad address", true).with_report(ran(3));
    assert_eq!(
        b.settle_one(dead_letter).await.expect("dead"),
        Settled::DeadLettered(DeadOutcome::Archived)
    );
    let rows = history(&b, &dead.id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].attempt, rows[0].outcome, rows[0].error.as_deref()),
        (1, AttemptOutcome::Dead, Some("bad address"))
    );
    let cancelled = client
        .enqueue(&email(2), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = next(&b, "w").await;
    let cancel = Settlement::cancelled(l.id, "order withdrawn").with_report(ran(3));
    assert_eq!(
        b.settle_one(cancel).await.expect("cancel"),
        Settled::Cancelled(CancelOutcome::Cancelled)
    );
    let rows = history(&b, &cancelled.id).await;
    assert_eq!(
        (rows[0].outcome, rows[0].error.as_deref()),
        (AttemptOutcome::Cancelled, Some("order withdrawn"))
    );
}

#[tokio::test]
async fn the_newest_rows_are_kept_and_a_plain_success_keeps_none() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // A plain task that succeeds at once leaves nothing behind (no record at all).
    let plain = client
        .enqueue(&email(2), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = next(&b, "w").await;
    b.settle(&[Settlement::completed(l.id).with_report(ran(1))])
        .await
        .expect("complete");
    assert!(b.task(&q(), &plain.id).await.expect("task").is_none());
    let info = client
        .enqueue(&email(1), EnqueueOptions::new().max_retry(100))
        .await
        .expect("enqueue");
    let tries = ATTEMPTS_KEPT as u32 + 5;
    for n in 1..=tries {
        let l = next(&b, "w").await;
        assert!(b
            .retry(&l.id, Duration::ZERO, &format!("failure {n}"))
            .await
            .expect("retry"));
    }
    let rows = history(&b, &info.id).await;
    assert_eq!(rows.len(), ATTEMPTS_KEPT);
    assert_eq!(rows.first().map(|r| r.attempt), Some(6));
    assert_eq!(rows.last().map(|r| r.attempt), Some(tries));
    assert_eq!(
        rows.last().and_then(|r| r.error.clone()),
        Some(format!("failure {tries}"))
    );
}

#[tokio::test]
async fn a_lost_worker_is_a_row_with_its_name() {
    let b = broker().await;
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let _started = next(&b, "gone-worker").await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    b.reclaim_idle(&q(), Duration::from_millis(10), 10)
        .await
        .expect("reclaim");
    let rows = history(&b, &info.id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        (r.attempt, r.outcome, r.worker.as_deref(), r.ran_ms),
        (1, AttemptOutcome::Lost, Some("gone-worker"), None)
    );
    assert!(r.error.as_deref().unwrap_or("").contains("worker lost"));
}

#[tokio::test]
async fn a_retry_whose_reply_is_lost_adds_one_row() {
    let rig = rig().await;
    let lease = rig
        .running(EnqueueOptions::new().task_id("t-lost-reply"))
        .await;
    rig.lose_reply_of("retry");
    let retry =
        Settlement::retried(lease.id, Duration::from_secs(60), "flaky").with_report(ran(12));
    assert_eq!(
        rig.via.settle_one(retry).await.expect("retry"),
        Settled::Retried { stale: false },
        "a re-sent retry answers what its first run did"
    );
    rig.assert_lost(1);
    let rows = rig
        .direct
        .task(&q(), "t-lost-reply")
        .await
        .expect("task")
        .expect("kept")
        .attempts;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].ran_ms, Some(12));
}

#[tokio::test]
async fn logs_go_with_their_attempt_and_the_history_stays_bounded() {
    let b = broker().await;
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new().max_retry(100))
        .await
        .expect("enqueue");
    // Ten attempts each logging 16 KiB: the history keeps the newest that fit in 64 KiB.
    for n in 1..=10u32 {
        let l = next(&b, "w").await;
        let report = AttemptReport {
            ran_ms: Some(1),
            logs: Some(format!("attempt {n}: {}", "x".repeat(16 * 1024))),
        };
        let retry = Settlement::retried(l.id, Duration::ZERO, "again").with_report(report);
        assert!(!b.settle_one(retry).await.expect("retry").is_stale());
    }
    let raw: Option<String> = b
        .client()
        .hget(b.keyspace().queue(&q()).task(&info.id), "at")
        .await
        .expect("hget");
    let raw = raw.expect("a history");
    assert!(raw.len() <= 64 * 1024, "{} bytes", raw.len());
    let rows = history(&b, &info.id).await;
    assert!((2..10).contains(&rows.len()), "{} rows", rows.len());
    assert_eq!(
        rows.last().map(|r| r.attempt),
        Some(10),
        "the newest is kept"
    );
    assert!(rows
        .last()
        .and_then(|r| r.logs.as_deref())
        .is_some_and(|l| l.starts_with("attempt 10: ")));
}

#[tokio::test]
async fn a_damaged_history_loses_only_its_damaged_lines() {
    let b = broker().await;
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new().task_id("damaged"))
        .await
        .expect("enqueue");
    let key = b.keyspace().queue(&q()).task(&info.id);
    let _: () = b
        .client()
        .hset(&key, ("at", "not json\n{\"a\":\"x\"}"))
        .await
        .expect("hset");
    let l = next(&b, "w").await;
    assert!(b.retry(&l.id, Duration::ZERO, "boom").await.expect("retry"));
    let rows = history(&b, &info.id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].attempt, rows[0].outcome, rows[0].error.as_deref()),
        (1, AttemptOutcome::Retried, Some("boom"))
    );
}
