//! The operator's view of deduplication locks (`RedisBroker::dedup_locks`,
//! `release_dedup_lock`) against a real Redis: listed with their holder, its state and the time
//! left; released only while the expected holder holds them, after which the key creates a new
//! task and the old holder's end leaves the new holder's lock alone.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::HashesInterface;
use chronos_broker::{
    Client, Completion, Consume, Dedup, EnqueueOptions, EnqueueOutcome, Lease, QueueName,
    RedisBroker, Release, SettleExt, TaskState,
};
use common::{broker, email, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

async fn fetch(b: &RedisBroker, count: usize) -> Vec<Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    take(b, &mut reader, &q(), "w", count, Duration::ZERO)
        .await
        .leases
}

#[tokio::test]
async fn locks_are_listed_with_their_holder_its_state_and_the_time_left() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let keyed = client
        .enqueue(
            &email(1),
            EnqueueOptions::new().dedup(Dedup::key("report:7").ttl(Duration::from_secs(600))),
        )
        .await
        .expect("enqueue");
    let by_payload = client
        .enqueue(&email(2), EnqueueOptions::new().dedup(Dedup::payload()))
        .await
        .expect("enqueue");
    // A task without a lock, and a lock of another queue, are not listed.
    client
        .enqueue(&email(3), EnqueueOptions::new())
        .await
        .expect("enqueue");
    client
        .enqueue(
            &email(4),
            EnqueueOptions::new().queue("other").dedup(Dedup::key("x")),
        )
        .await
        .expect("enqueue");
    let locks = b.dedup_locks(&q(), 100).await.expect("locks");
    assert_eq!(locks.len(), 2, "{locks:?}");
    let mine = locks.iter().find(|l| l.key == "report:7").expect("keyed");
    assert_eq!(mine.holder, keyed.id);
    assert_eq!(mine.holder_state, Some(TaskState::Pending));
    let left = mine.expires_in_ms.expect("a TTL");
    assert!((590_000..=600_000).contains(&left), "{left}");
    let hashed = locks
        .iter()
        .find(|l| l.key.starts_with('#'))
        .expect("hashed");
    assert_eq!(hashed.holder, by_payload.id);
    // The limit bounds the listing.
    assert_eq!(b.dedup_locks(&q(), 1).await.expect("locks").len(), 1);
}

#[tokio::test]
async fn a_release_needs_the_holder_named_and_frees_the_key() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let opts = || EnqueueOptions::new().dedup(Dedup::key("sync:acme"));
    let first = client.enqueue(&email(1), opts()).await.expect("enqueue");
    assert!(!b
        .release_dedup_lock(&q(), "sync:acme", Some("someone-else"))
        .await
        .expect("release"));
    assert!(!b
        .release_dedup_lock(&q(), "no-such-key", None)
        .await
        .expect("release"));
    assert_eq!(
        client
            .enqueue(&email(2), opts())
            .await
            .expect("enqueue")
            .outcome,
        EnqueueOutcome::Duplicate,
        "still held"
    );
    assert!(b
        .release_dedup_lock(&q(), "sync:acme", Some(&first.id))
        .await
        .expect("release"));
    assert!(b.dedup_locks(&q(), 10).await.expect("locks").is_empty());
    let second = client.enqueue(&email(3), opts()).await.expect("enqueue");
    assert_eq!(second.outcome, EnqueueOutcome::Created);
    assert_ne!(second.id, first.id);
    // A bad key is a typed error.
    assert!(b.release_dedup_lock(&q(), "", None).await.is_err());
}

#[tokio::test]
async fn a_released_holder_no_longer_claims_the_lock_and_its_end_spares_the_new_holders() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let opts = || EnqueueOptions::new().dedup(Dedup::key("job:1").release(Release::OnFinish));
    let first = client.enqueue(&email(1), opts()).await.expect("enqueue");
    let lease = fetch(&b, 1).await.remove(0);
    b.start(&q(), std::slice::from_ref(&lease.id))
        .await
        .expect("start");
    assert!(b
        .release_dedup_lock(&q(), "job:1", None)
        .await
        .expect("release"));
    // The old holder's record names no lock any more.
    let tkey = b.keyspace().queue(&q()).task(&first.id);
    let u: Option<String> = b.client().hget(tkey, "u").await.expect("hget");
    assert_eq!(u, None);
    let second = client.enqueue(&email(2), opts()).await.expect("enqueue");
    assert_eq!(second.outcome, EnqueueOutcome::Created);
    // The old holder finishes: the new holder keeps its lock.
    let done = Completion {
        lease: lease.id.clone(),
        retention: None,
        result: None,
    };
    assert_eq!(b.complete(&q(), &[done]).await.expect("complete"), 1);
    let locks = b.dedup_locks(&q(), 10).await.expect("locks");
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].holder, second.id);
    assert_eq!(
        client
            .enqueue(&email(3), opts())
            .await
            .expect("enqueue")
            .outcome,
        EnqueueOutcome::Duplicate
    );
}
