//! A running task's progress (`Maintain::keep_alive`, `Results::progress`): written only
//! while the reporter holds the delivery, in the same call that refreshes its lease, kept past
//! the task's end for `PROGRESS_TTL`, and harmless to re-send after a lost reply.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::KeysInterface;
use chronos_broker::{
    Client, Consume, EnqueueOptions, Inspect, Lease, Maintain, ProgressUpdate, QueueName,
    RedisBroker, Results, SettleExt, TaskInfo, PROGRESS_TTL,
};
use common::{broker, email, rig, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

fn update(lease: &Lease, json: &str) -> ProgressUpdate {
    ProgressUpdate {
        msg_id: lease.id.msg_id.clone(),
        task_id: lease.id.task_id.clone(),
        json: json.as_bytes().to_vec(),
    }
}

/// One plain task of queue `default`, fetched and started by `consumer`.
async fn delivered(b: &RedisBroker, consumer: &str) -> (TaskInfo, Lease) {
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let lease = take(b, &mut reader, &q(), consumer, 1, Duration::ZERO)
        .await
        .leases
        .remove(0);
    (info, lease)
}

#[tokio::test]
async fn progress_is_stored_for_a_held_delivery_and_outlives_its_task() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // A plain task (no record) and one with a record (an explicit id).
    let plain = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let named = client
        .enqueue(&email(2), EnqueueOptions::new().task_id("named"))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let leases = take(&b, &mut reader, &q(), "w", 10, Duration::ZERO)
        .await
        .leases;
    assert_eq!(leases.len(), 2);
    let ids: Vec<String> = leases.iter().map(|l| l.id.msg_id.clone()).collect();
    let updates: Vec<ProgressUpdate> = leases
        .iter()
        .map(|l| update(l, &format!(r#"{{"percent":40,"note":"{}"}}"#, l.id.task_id)))
        .collect();
    let owned = b
        .keep_alive(&q(), "w", &ids, &updates)
        .await
        .expect("report");
    assert_eq!(owned.len(), 2, "both leases are still held");
    for id in [&plain.id, &named.id] {
        let p = client
            .progress("default", id)
            .await
            .expect("progress")
            .expect("stored");
        assert_eq!(p.percent(), Some(40.0));
        assert_eq!(p.note(), Some(id.as_str()));
        let rec = b.task(&q(), id).await.expect("task").expect("exists");
        assert_eq!(rec.progress, Some(p), "the inspector shows it too");
    }
    // Kept with a TTL, and still there once the task completed.
    let key = b.keyspace().queue(&q()).progress(&plain.id);
    let ttl: i64 = b.client().pttl(&key).await.expect("pttl");
    let full = i64::try_from(PROGRESS_TTL.as_millis()).expect("ms");
    assert!(ttl > full - 60_000 && ttl <= full, "{ttl}");
    let done: Vec<_> = leases
        .iter()
        .map(|l| chronos_broker::Completion {
            lease: l.id.clone(),
            retention: None,
            result: None,
        })
        .collect();
    b.complete(&q(), &done).await.expect("complete");
    let p = client
        .progress("default", &plain.id)
        .await
        .expect("progress")
        .expect("kept past the end");
    assert_eq!(p.percent(), Some(40.0));
}

#[tokio::test]
async fn a_lost_delivery_gets_no_progress_and_is_reported_lost() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (info, lease) = delivered(&b, "w1").await;
    let lease = &lease;
    // The recoverer hands the delivery to nobody (w1 is taken for lost): w2 holds it now.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let _ = b
        .reclaim_idle(&q(), Duration::from_millis(10), 10)
        .await
        .expect("reclaim");
    let owned = b
        .keep_alive(
            &q(),
            "w1",
            std::slice::from_ref(&lease.id.msg_id),
            &[update(lease, "7")],
        )
        .await
        .expect("report");
    assert!(owned.is_empty(), "the lease is gone: {owned:?}");
    assert_eq!(
        client.progress("default", &info.id).await.expect("read"),
        None,
        "a worker that lost the task writes nothing for it"
    );
}

#[tokio::test]
async fn a_report_whose_reply_is_lost_is_sent_again_with_the_same_effect() {
    let rig = rig().await;
    let lease = rig.running(EnqueueOptions::new()).await;
    rig.lose_reply_of("heartbeat");
    let ids = [lease.id.msg_id.clone()];
    let owned = rig
        .via
        .keep_alive(&q(), "w", &ids, &[update(&lease, r#"{"rows":12}"#)])
        .await
        .expect("report");
    rig.assert_lost(1);
    assert_eq!(owned, ids.to_vec());
    let p = rig
        .direct
        .progress(&q(), &lease.id.task_id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(p.value, serde_json::json!({"rows": 12}));
}

#[tokio::test]
async fn an_oversized_or_damaged_value_is_a_typed_error() {
    let b = broker().await;
    let (info, lease) = delivered(&b, "w").await;
    let big = format!("\"{}\"", "x".repeat(chronos_broker::MAX_PROGRESS_BYTES));
    let err = b
        .keep_alive(
            &q(),
            "w",
            std::slice::from_ref(&lease.id.msg_id),
            &[update(&lease, &big)],
        )
        .await
        .expect_err("too large");
    assert!(err.to_string().contains("limit"), "{err}");
    // A value damaged in Redis reads as a decode error, never a panic; the inspector still
    // shows the task.
    let key = b.keyspace().queue(&q()).progress(&info.id);
    let _: () = b
        .client()
        .set(&key, "not progress", None, None, false)
        .await
        .expect("set");
    assert!(b.progress(&q(), &info.id).await.is_err());
    let rec = b.task(&q(), &info.id).await.expect("task").expect("exists");
    assert_eq!(rec.progress, None);
}
