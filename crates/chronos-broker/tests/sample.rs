//! Queue gauges for metrics: the sampler lease elects one holder, and a sample's oldest pending
//! task is the first one not yet delivered, aged from when it became ready.

mod common;

use std::time::Duration;

use chronos_broker::{Client, Consume, EnqueueOptions, QueueName, SampleQueues};
use common::{broker, email};

#[tokio::test]
async fn one_holder_keeps_the_sampler_lease_until_it_lapses() {
    let b = broker().await;
    let ttl = Duration::from_secs(1);
    assert!(b.sampler_lease("a", ttl).await.expect("lease"));
    assert!(!b.sampler_lease("b", ttl).await.expect("lease"));
    // The holder renews through several periods; the other never gets it meanwhile.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(b.sampler_lease("a", ttl).await.expect("lease"));
        assert!(!b.sampler_lease("b", ttl).await.expect("lease"));
    }
    // A holder that stops renewing (it died) loses the lease within its TTL.
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    assert!(b.sampler_lease("b", ttl).await.expect("lease"));
    assert!(!b.sampler_lease("a", ttl).await.expect("lease"));
    // Only the holder can release it; then another takes it at once.
    b.release_sampler_lease("a").await.expect("release");
    assert!(!b.sampler_lease("a", ttl).await.expect("lease"));
    b.release_sampler_lease("b").await.expect("release");
    assert!(b.sampler_lease("a", ttl).await.expect("lease"));
}

#[tokio::test]
async fn the_oldest_pending_task_is_the_first_undelivered_one() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = QueueName::new("gauges").expect("name");

    // An empty queue (never written): zero counts, no age to report but zero.
    let empty = b.sample_queue(&queue).await.expect("sample");
    assert_eq!(empty.stats.pending, 0);
    assert_eq!(empty.oldest_pending_ms, None);
    assert_eq!(empty.oldest_pending_age(), Some(Duration::ZERO));

    let opts = || EnqueueOptions::new().queue("gauges");
    client.enqueue(&email(1), opts()).await.expect("enqueue");
    tokio::time::sleep(Duration::from_millis(60)).await;
    client.enqueue(&email(2), opts()).await.expect("enqueue");
    client
        .enqueue(&email(3), opts().process_in(Duration::from_secs(60)))
        .await
        .expect("enqueue");

    let s = b.sample_queue(&queue).await.expect("sample");
    assert_eq!((s.stats.pending, s.stats.scheduled), (2, 1));
    let first = s.oldest_pending_ms.expect("oldest");
    assert!(
        s.oldest_pending_age().expect("age") >= Duration::from_millis(60),
        "{s:?}"
    );

    // Deliver the first: the oldest pending is now the second, about 60 ms younger.
    let mut reader = b.open_reader().await.expect("reader");
    let fetched = b
        .fetch(
            &mut reader,
            &queue,
            "w1",
            &[],
            1,
            Duration::from_millis(100),
        )
        .await
        .expect("fetch");
    assert_eq!(fetched.leases.len(), 1);
    let s = b.sample_queue(&queue).await.expect("sample");
    assert_eq!((s.stats.pending, s.stats.active), (1, 1));
    let second = s.oldest_pending_ms.expect("oldest");
    assert!(second >= first + 50, "first {first}, second {second}");

    // Nothing pending: no age, whatever is still active.
    b.fetch(
        &mut reader,
        &queue,
        "w1",
        &[],
        1,
        Duration::from_millis(100),
    )
    .await
    .expect("fetch");
    let s = b.sample_queue(&queue).await.expect("sample");
    assert_eq!((s.stats.pending, s.stats.active), (0, 2));
    assert_eq!(s.oldest_pending_ms, None);
    b.close_reader(reader).await;
}

#[tokio::test]
async fn a_sample_names_the_busiest_tenants_and_sums_the_rest() {
    use chronos_broker::SAMPLED_TENANTS;
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = QueueName::new("shared").expect("name");
    // No tenants: nothing to name or sum.
    client
        .enqueue(&email(0), EnqueueOptions::new().queue("shared"))
        .await
        .expect("enqueue");
    let s = b.sample_queue(&queue).await.expect("sample");
    assert!(s.tenants.is_empty() && s.other_tenants.is_none(), "{s:?}");

    // Tenant tNN has NN + 1 tasks; the busiest are enqueued first, the two smallest (left out
    // of the named ones) last.
    let tenants = SAMPLED_TENANTS as u32 + 2;
    for t in (0..tenants).rev() {
        let items: Vec<_> = (0..=t).map(email).collect();
        let opts = EnqueueOptions::new()
            .queue("shared")
            .tenant(format!("t{t:02}"));
        for r in client
            .enqueue_batch(items.iter().map(|e| (e, opts.clone())))
            .await
            .expect("enqueue")
        {
            r.expect("enqueued");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let s = b.sample_queue(&queue).await.expect("sample");
    assert_eq!(s.tenants.len(), SAMPLED_TENANTS);
    assert_eq!(s.tenants[0].tenant, format!("t{:02}", tenants - 1));
    assert_eq!(s.tenants[0].waiting, u64::from(tenants));
    assert!(s
        .tenants
        .iter()
        .all(|t| t.tenants == 1 && t.oldest_ms.is_some()));
    let other = s.other_tenants.clone().expect("the rest summed");
    // t00 (1 task) and t01 (2 tasks).
    assert_eq!((other.tenants, other.waiting, other.running), (2, 3, 0));
    let oldest = other.oldest_ms.expect("oldest of the rest");
    assert!(
        s.tenants
            .iter()
            .all(|t| t.oldest_ms.expect("oldest") <= oldest),
        "the busiest were enqueued first: {s:?}"
    );
    assert!(other.oldest_age(s.sampled_at_ms) < Duration::from_secs(10));
}
