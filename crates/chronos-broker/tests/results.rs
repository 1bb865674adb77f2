//! Results: kept with a retained task, read and awaited by the client, against a real Redis.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
use chronos_broker::{
    BrokerError, Client, Completion, Consume, EnqueueOptions, Lease, QueueName, RedisBroker,
    Results, SettleExt, TaskOutcome, TaskState,
};
use common::{broker, email, rig, take, until_subscribed};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    sent: u32,
    to: String,
}

fn receipt() -> Receipt {
    Receipt {
        sent: 3,
        to: "a@example.com".into(),
    }
}

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

/// Enqueues one task with `opts` and returns its started delivery.
async fn running(b: &RedisBroker, opts: EnqueueOptions) -> Lease {
    Client::new(b.clone())
        .enqueue(&email(1), opts)
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(b, &mut reader, &q(), "w", 1, Duration::from_millis(200)).await;
    f.leases.into_iter().next().expect("one delivery")
}

fn done(lease: &Lease, retention: Option<Duration>, result: Option<Vec<u8>>) -> Completion {
    Completion {
        lease: lease.id.clone(),
        retention,
        result,
    }
}

/// The completion of a task retained for a minute, with `result`.
fn kept(lease: &Lease, result: Option<Vec<u8>>) -> Completion {
    done(lease, Some(Duration::from_secs(60)), result)
}

fn encoded<T: Serialize>(v: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(v).expect("encode")
}

#[tokio::test]
async fn a_retained_tasks_result_is_read_back_typed() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new().retention(Duration::from_secs(60))).await;
    let id = lease.id.task_id.clone();
    assert_eq!(
        client
            .result::<Receipt>("default", &id)
            .await
            .expect("read"),
        None,
        "no result while the task runs"
    );
    let n = b
        .complete(&q(), &[kept(&lease, Some(encoded(&receipt())))])
        .await
        .expect("complete");
    assert_eq!(n, 1);
    assert_eq!(
        client
            .result::<Receipt>("default", &id)
            .await
            .expect("read"),
        Some(receipt())
    );
    // Read as the wrong type: a typed decode error, not a panic.
    assert!(matches!(
        client.result::<Vec<u64>>("default", &id).await,
        Err(BrokerError::Decode(_))
    ));
}

#[tokio::test]
async fn no_result_reads_as_unit_or_none() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new().retention(Duration::from_secs(60))).await;
    let id = lease.id.task_id.clone();
    b.complete(&q(), &[kept(&lease, None)])
        .await
        .expect("complete");
    client
        .result::<()>("default", &id)
        .await
        .expect("read")
        .expect("finished");
    assert_eq!(
        client
            .result::<Option<Receipt>>("default", &id)
            .await
            .expect("read"),
        Some(None)
    );
}

#[tokio::test]
async fn without_retention_nothing_is_kept() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new()).await;
    let id = lease.id.task_id.clone();
    b.complete(&q(), &[done(&lease, None, Some(encoded(&receipt())))])
        .await
        .expect("complete");
    assert!(matches!(
        client.result::<Receipt>("default", &id).await,
        Err(BrokerError::TaskNotFound { .. })
    ));
    assert!(matches!(
        client.result::<Receipt>("default", "never-enqueued").await,
        Err(BrokerError::TaskNotFound { .. })
    ));
}

#[tokio::test]
async fn wait_returns_the_result_when_the_task_completes() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new().retention(Duration::from_secs(60))).await;
    let id = lease.id.task_id.clone();
    let waiter = {
        let client = client.clone();
        let id = id.clone();
        tokio::spawn(async move {
            client
                .wait::<Receipt>("default", &id, Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "the task has not finished yet");
    b.complete(&q(), &[kept(&lease, Some(encoded(&receipt())))])
        .await
        .expect("complete");
    let got = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the wait ends")
        .expect("join")
        .expect("result");
    assert_eq!(got, receipt());
}

#[tokio::test]
async fn completion_and_dead_letter_announce_on_the_tasks_channel() {
    // What wakes a waiter: a message on the channel named like the task hash, published by the
    // settling script itself.
    let b = broker().await;
    let keys = b.keyspace().clone();
    let sub = b.client().clone_new();
    sub.init().await.expect("subscriber");
    let mut rx = sub.message_rx();
    for retained in [true, false] {
        let opts = if retained {
            EnqueueOptions::new().retention(Duration::from_secs(60))
        } else {
            EnqueueOptions::new().max_retry(0)
        };
        let lease = running(&b, opts).await;
        let channel = keys.queue(&q()).task(&lease.id.task_id);
        sub.subscribe(channel.clone()).await.expect("subscribe");
        until_subscribed(&b, &channel).await;
        if retained {
            b.complete(&q(), &[kept(&lease, None)])
                .await
                .expect("complete");
        } else {
            b.dead_letter(&lease.id, "boom", true)
                .await
                .expect("dead letter");
        }
        let m = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a message")
            .expect("message");
        assert_eq!(m.channel.to_string(), channel);
    }
    let _ = sub.quit().await;
}

#[tokio::test]
async fn wait_reports_a_dead_letter_and_a_timeout() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new().max_retry(0)).await;
    let id = lease.id.task_id.clone();
    match client
        .wait::<Receipt>("default", &id, Duration::from_millis(300))
        .await
    {
        Err(BrokerError::WaitTimeout { state, .. }) => assert_eq!(state, TaskState::Active),
        other => panic!("expected a timeout, got {other:?}"),
    }
    let waiter = {
        let client = client.clone();
        let id = id.clone();
        tokio::spawn(async move {
            client
                .wait::<Receipt>("default", &id, Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.dead_letter(&lease.id, "smtp said no", true)
        .await
        .expect("dead letter");
    match waiter.await.expect("join") {
        Err(BrokerError::TaskFailed { error, .. }) => assert_eq!(error, "smtp said no"),
        other => panic!("expected the failure, got {other:?}"),
    }
}

#[tokio::test]
async fn an_oversized_result_is_not_kept_and_says_so() {
    let redis = chronos_testkit::shared_url().expect("redis for tests");
    let b = RedisBroker::builder(redis)
        .namespace(chronos_testkit::namespace())
        .max_payload_bytes(1024)
        .connect()
        .await
        .expect("connect");
    let client = Client::new(b.clone());
    let lease = running(&b, EnqueueOptions::new().retention(Duration::from_secs(60))).await;
    let id = lease.id.task_id.clone();
    let big = encoded(&"x".repeat(4096));
    b.complete(&q(), &[kept(&lease, Some(big))])
        .await
        .expect("complete");
    match client.result::<String>("default", &id).await {
        Err(BrokerError::ResultNotKept { reason, .. }) => {
            assert!(reason.contains("over the limit"), "{reason}")
        }
        other => panic!("expected ResultNotKept, got {other:?}"),
    }
    assert!(matches!(
        b.outcome(&q(), &id).await.expect("outcome"),
        TaskOutcome::Succeeded { .. }
    ));
}

#[tokio::test]
async fn a_resent_ack_keeps_the_result_of_the_first() {
    let rig = rig().await;
    let lease = rig
        .running(EnqueueOptions::new().retention(Duration::from_secs(60)))
        .await;
    rig.lose_reply_of("complete");
    let n = rig
        .via
        .complete(&q(), &[kept(&lease, Some(encoded(&receipt())))])
        .await
        .expect("complete, re-sent after the lost reply");
    rig.assert_lost(1);
    assert_eq!(n, 1);
    let got = Client::new(rig.direct.clone())
        .result::<Receipt>("default", &lease.id.task_id)
        .await
        .expect("read");
    assert_eq!(got, Some(receipt()));
}

/// Channels of `b`'s namespace that some connection is subscribed to, by Redis' count.
async fn subscribed_channels(b: &RedisBroker) -> Vec<String> {
    let pattern = format!("{}:*", b.keyspace().namespace());
    b.client()
        .pubsub_channels(pattern)
        .await
        .expect("PUBSUB CHANNELS")
}

#[tokio::test]
async fn dropped_waits_leave_no_subscription_behind() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let mut ids = Vec::new();
    for n in 0..500 {
        let info = client
            .enqueue(
                &email(n),
                EnqueueOptions::new().task_id(format!("waited-{n}")),
            )
            .await
            .expect("enqueue");
        ids.push(info.id);
    }
    // Each wait is dropped by a timeout around it long before its own timeout, as a web
    // request's would be when its client goes away.
    let waits = ids.iter().map(|id| {
        let client = client.clone();
        async move {
            let wait = client.wait::<()>("default", id, Duration::from_secs(60));
            tokio::time::timeout(Duration::from_millis(500), wait).await
        }
    });
    let ended = futures::future::join_all(waits).await;
    assert!(ended.iter().all(Result::is_err), "every wait was cut off");
    chronos_testkit::eventually(Duration::from_secs(5), "no channel left", || async {
        subscribed_channels(&b).await.is_empty()
    })
    .await;
    // A wait that ends on its own still works after all those left.
    let lease = running(&b, EnqueueOptions::new().retention(Duration::from_secs(60))).await;
    let waiter = {
        let client = client.clone();
        let id = lease.id.task_id.clone();
        tokio::spawn(async move {
            client
                .wait::<()>("default", &id, Duration::from_secs(10))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.complete(
        &q(),
        &[Completion {
            lease: lease.id.clone(),
            retention: Some(Duration::from_secs(60)),
            result: None,
        }],
    )
    .await
    .expect("ack");
    waiter.await.expect("join").expect("result");
    chronos_testkit::eventually(Duration::from_secs(5), "its channel left too", || async {
        subscribed_channels(&b).await.is_empty()
    })
    .await;
}
