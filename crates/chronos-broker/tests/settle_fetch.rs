//! Settle and fetch in one call (`Consume::fetch` carrying settlements): the claim script acks
//! plain completions as it reads, and their counts wait in the consumer's receipt until COUNT_BATCH
//! are owed or a read takes nothing.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::KeysInterface;
use chronos_broker::{
    BackoffScope, Client, Completion, Consume, EnqueueOptions, Fetched, HistorySpan, Inspect,
    Lease, Maintain, Operate, QueueName, Results, Settled, Settlement, TaskOutcome, TaskState,
    COUNT_BATCH,
};
use common::{broker, email, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

fn done(l: &Lease) -> Settlement {
    Settlement::completed(l.id.clone())
}

/// How many completions the fetch says it settled.
fn settled_by(f: &Fetched) -> u64 {
    f.settled
        .iter()
        .filter(|a| **a == Settled::Completed { stale: false })
        .count() as u64
}

#[tokio::test]
async fn each_call_acks_the_last_task_and_takes_the_next_and_the_counts_catch_up() {
    let b = broker().await;
    let queue = q("default");
    let n = COUNT_BATCH + 6;
    let client = Client::new(b.clone());
    for i in 0..n {
        client
            .enqueue(&email(i as u32), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let first = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let mut held = first.leases;
    let mut settled = 0;
    for i in 1..n {
        assert_eq!(held.len(), 1, "call {i}");
        let f = b
            .fetch(
                &mut reader,
                &queue,
                "w",
                &[done(&held[0])],
                1,
                Duration::ZERO,
            )
            .await
            .expect("settle and fetch");
        let acked = settled_by(&f);
        settled += acked;
        held = f.leases;
        let stats = b.queue_stats(&queue).await.expect("stats");
        // Every ack takes effect at once; the counters lag by fewer than COUNT_BATCH.
        assert_eq!(stats.pending + stats.active, n - i, "call {i}");
        assert!(
            stats.processed <= i && i - stats.processed < COUNT_BATCH,
            "call {i}: processed {}",
            stats.processed
        );
    }
    // The last task's ack takes nothing more: the counts are exact again.
    let f = b
        .fetch(
            &mut reader,
            &queue,
            "w",
            &[done(&held[0])],
            1,
            Duration::ZERO,
        )
        .await
        .expect("last");
    let acked = settled_by(&f);
    assert!(f.leases.is_empty());
    assert_eq!(settled + acked, n);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, n));
    let days = b.history(&queue, HistorySpan::Days).await.expect("history");
    assert_eq!(days.last().map(|d| d.processed), Some(n));
    let minutes = b
        .history(&queue, HistorySpan::Minutes)
        .await
        .expect("history");
    assert_eq!(minutes.iter().map(|m| m.processed).sum::<u64>(), n);
}

#[tokio::test]
async fn a_read_of_zero_only_acks_and_pays_the_counts_owed() {
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    for i in 0..3 {
        client
            .enqueue(&email(i), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let f = b
        .fetch(
            &mut reader,
            &queue,
            "w",
            &[done(&f.leases[0])],
            1,
            Duration::ZERO,
        )
        .await
        .expect("carry");
    let acked = settled_by(&f);
    assert_eq!((acked, f.leases.len()), (1, 1));
    assert_eq!(b.queue_stats(&queue).await.expect("stats").processed, 0);
    let none = b
        .fetch(
            &mut reader,
            &queue,
            "w",
            &[done(&f.leases[0])],
            0,
            Duration::ZERO,
        )
        .await
        .expect("last");
    let acked = settled_by(&none);
    assert_eq!((acked, none.leases.len()), (1, 0));
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.processed), (1, 2));
}

#[tokio::test]
async fn completions_that_need_a_record_or_an_event_are_settled_as_complete_does() {
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    let kept = client
        .enqueue(&email(1), EnqueueOptions::new().task_id("kept"))
        .await
        .expect("enqueue");
    client
        .enqueue(&email(2), EnqueueOptions::new())
        .await
        .expect("enqueue");
    client
        .enqueue(&email(3), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 2, Duration::from_millis(100)).await;
    assert_eq!(f.leases.len(), 2);
    let carried: Vec<Settlement> = f
        .leases
        .iter()
        .map(|l| {
            Settlement::from(Completion {
                lease: l.id.clone(),
                retention: (l.id.task_id == kept.id).then_some(Duration::from_secs(60)),
                result: (l.id.task_id == kept.id).then(|| b"42".to_vec()),
            })
        })
        .collect();
    let next = b
        .fetch(&mut reader, &queue, "w", &carried, 5, Duration::ZERO)
        .await
        .expect("settle and fetch");
    let acked = settled_by(&next);
    assert_eq!((acked, next.leases.len()), (2, 1));
    let rec = b.task(&queue, &kept.id).await.expect("task").expect("kept");
    assert_eq!(rec.state, TaskState::Completed);
    let outcome = b.outcome(&queue, &kept.id).await.expect("result");
    assert_eq!(
        outcome,
        TaskOutcome::Succeeded {
            result: Some(b"42".to_vec())
        }
    );
}

/// Owed counts in the receipt of a consumer that went away (its server was killed between two
/// reads): removing the consumer, as the janitor does for a dead server, pays them; and while
/// it lives, the receipt that holds them outlives any gap between reads.
#[tokio::test]
async fn counts_owed_by_a_consumer_that_died_are_paid_when_it_is_removed() {
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    for i in 0..4 {
        client
            .enqueue(&email(i), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let first = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let mut held = first.leases;
    for _ in 0..3 {
        let f = b
            .fetch(
                &mut reader,
                &queue,
                "w",
                &[done(&held[0])],
                1,
                Duration::ZERO,
            )
            .await
            .expect("settle and fetch");
        held = f.leases;
    }
    // Three acked, their counts owed in the receipt; the fourth task is held.
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.processed, stats.active), (0, 1), "{stats:?}");
    let receipt = b.keyspace().queue(&queue).receipt("w");
    let ttl: i64 = b.client().pttl(&receipt).await.expect("pttl");
    assert!(
        ttl > 3_600_000,
        "a receipt owing counts must outlive a long gap between reads: {ttl} ms"
    );
    // The worker dies holding the fourth; it is recovered and run elsewhere, and the dead
    // consumer is removed.
    let reclaimed = b
        .reclaim_idle(&queue, Duration::ZERO, 10)
        .await
        .expect("reclaim");
    assert_eq!(reclaimed.requeued + reclaimed.dead.len() as u64, 1);
    assert!(b.remove_consumer(&queue, "w").await.expect("remove"));
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.processed, 3, "{stats:?}");
    let minutes = b
        .history(&queue, HistorySpan::Minutes)
        .await
        .expect("history");
    assert_eq!(minutes.iter().map(|m| m.processed).sum::<u64>(), 3);
    let gone: i64 = b.client().exists(&receipt).await.expect("exists");
    assert_eq!(gone, 0, "the receipt goes with its consumer");
}

#[tokio::test]
async fn a_fetch_carries_any_end_and_answers_each_in_order() {
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    for i in 0..4 {
        client
            .enqueue(&email(i), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 3, Duration::from_millis(100)).await;
    assert_eq!(f.leases.len(), 3);
    let carried = [
        done(&f.leases[0]),
        Settlement::retried(f.leases[1].id.clone(), Duration::from_secs(60), "flaky"),
        Settlement::backed_off(
            f.leases[2].id.clone(),
            BackoffScope::Key("partner".into()),
            Duration::from_secs(60),
        ),
    ];
    let next = b
        .fetch(&mut reader, &queue, "w", &carried, 1, Duration::ZERO)
        .await
        .expect("settle and fetch");
    assert_eq!(next.leases.len(), 1);
    assert_eq!(next.settled.len(), 3);
    assert_eq!(next.settled[0], Settled::Completed { stale: false });
    assert_eq!(next.settled[1], Settled::Retried { stale: false });
    assert!(
        matches!(next.settled[2], Settled::BackedOff(_)) && !next.settled[2].is_stale(),
        "{:?}",
        next.settled[2]
    );
    // Carried again (a caller that did not see the answer), nothing is settled twice: the
    // completion finds its lease gone, the retry answers what its first run did. The call
    // takes nothing, so the count the first one owed is paid.
    let again = b
        .fetch(&mut reader, &queue, "w", &carried, 0, Duration::ZERO)
        .await
        .expect("re-sent");
    assert_eq!(
        again.settled[..2],
        [
            Settled::Completed { stale: true },
            Settled::Retried { stale: false }
        ]
    );
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.retry, stats.scheduled, stats.processed), (1, 1, 1));
}
