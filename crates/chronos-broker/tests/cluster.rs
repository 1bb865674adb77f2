//! The broker on a 3-primary Redis Cluster: every script runs in one slot per queue.

mod common;

use std::time::Duration;

use chronos_broker::{
    BrokerError, Client, Completion, Consume, Coordinate, EnqueueOptions, Inspect, Maintain,
    QueueName, SettleExt,
};
use common::{cluster_broker, email, take, Email};

#[tokio::test]
async fn full_task_cycle_runs_on_a_cluster_across_many_queues() {
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    // Ten queues spread their hash tags over the three primaries.
    let names: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    let items: Vec<Email> = (0..100).map(email).collect();
    let results = client
        .enqueue_batch(
            items
                .iter()
                .enumerate()
                .map(|(i, e)| (e, EnqueueOptions::new().queue(names[i % 10].clone()))),
        )
        .await
        .expect("batch");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");

    let mut reader = b.open_reader().await.expect("reader");
    for name in &names {
        let queue = QueueName::new(name.clone()).expect("queue");
        let f = take(
            &b,
            &mut reader,
            &queue,
            "w",
            100,
            Duration::from_millis(100),
        )
        .await;
        assert_eq!(f.leases.len(), 10, "{name}");
        let (first, rest) = f.leases.split_first().expect("lease");
        assert!(b
            .retry(&first.id, Duration::ZERO, "again")
            .await
            .expect("retry"));
        assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
        let done: Vec<Completion> = rest
            .iter()
            .map(|l| Completion {
                lease: l.id.clone(),
                retention: None,
                result: None,
            })
            .collect();
        assert_eq!(b.complete(&queue, &done).await.expect("complete"), 9);
        let again = take(&b, &mut reader, &queue, "w", 10, Duration::from_millis(100)).await;
        assert_eq!(again.leases.len(), 1);
        assert_eq!(
            b.keep_alive(&queue, "w", &[again.leases[0].id.msg_id.clone()], &[])
                .await
                .expect("hb")
                .len(),
            1
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        let r = b
            .reclaim_idle(&queue, Duration::from_millis(10), 100)
            .await
            .expect("reclaim");
        assert_eq!(r.requeued, 1);
        assert_eq!(
            b.trim(&queue, Duration::from_secs(60), 10, 100)
                .await
                .expect("trim"),
            0
        );
        let stats = b.queue_stats(&queue).await.expect("stats");
        assert_eq!((stats.pending, stats.processed), (1, 9), "{name}");
    }
}

#[tokio::test]
async fn unique_lock_and_leader_lock_work_on_a_cluster() {
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    let opts = EnqueueOptions::new()
        .queue("cu")
        .unique(Duration::from_secs(30));
    client
        .enqueue(&email(1), opts.clone())
        .await
        .expect("first");
    let err = client.enqueue(&email(1), opts).await.expect_err("dup");
    assert!(matches!(err, BrokerError::DuplicateTask { .. }));
    let key = b.keyspace().tagged("sched", "leader");
    assert!(b
        .try_lock(&key, "a", Duration::from_secs(5))
        .await
        .expect("lock"));
    assert!(b
        .renew_lock(&key, "a", Duration::from_secs(5))
        .await
        .expect("renew"));
    assert!(b
        .release_lock(&key, "a", Some("resign"))
        .await
        .expect("release"));
}

#[tokio::test]
async fn priority_levels_work_on_a_cluster() {
    use chronos_broker::{Operate, Priority};
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    let mut ids = Vec::new();
    for (n, l) in [(0u32, 9u8), (1, 5), (2, 0), (3, 9)] {
        // Every task in one queue: the levels' streams share its slot.
        let opts = EnqueueOptions::new()
            .queue("prio")
            .priority(Priority::level(l).expect("level"));
        ids.push(client.enqueue(&email(n), opts).await.expect("enqueue").id);
    }
    let queue = QueueName::new("prio").expect("queue");
    assert_eq!(
        b.prioritize(&queue, &ids[3], Priority::HIGHEST)
            .await
            .expect("prioritize"),
        chronos_broker::ActionOutcome::Done
    );
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.pending, 4, "{stats:?}");
    let mut reader = b.open_reader().await.expect("reader");
    let mut order = Vec::new();
    for _ in 0..4 {
        let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
        for l in f.leases {
            order.push(l.id.task_id.clone());
            let done = Completion {
                lease: l.id,
                retention: None,
                result: None,
            };
            assert_eq!(b.complete(&queue, &[done]).await.expect("complete"), 1);
        }
    }
    let want = vec![
        ids[2].clone(),
        ids[3].clone(),
        ids[1].clone(),
        ids[0].clone(),
    ];
    assert_eq!(order, want);
    b.delete_queue(&queue, true).await.expect("delete");
}

#[tokio::test]
async fn a_snooze_runs_in_its_queues_slot() {
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    let mut reader = b.open_reader().await.expect("reader");
    for name in ["s0", "s1", "s2", "s3"] {
        let queue = QueueName::new(name).expect("queue");
        client
            .enqueue(&email(1), EnqueueOptions::new().queue(name))
            .await
            .expect("enqueue");
        let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
        let lease = f.leases.into_iter().next().expect("lease");
        assert_eq!(
            b.snooze(&lease.id, Duration::ZERO, 5)
                .await
                .expect("snooze"),
            chronos_broker::SnoozeOutcome::Snoozed { snoozes: 1 }
        );
        assert_eq!(b.forward_due(&queue, 10).await.expect("forward"), 1);
        let again = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
        assert_eq!(again.leases.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn deduplication_answers_in_its_queues_slot() {
    use chronos_broker::{Dedup, DedupMode, EnqueueOutcome, TaskState};
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    let mut reader = b.open_reader().await.expect("reader");
    for name in ["d0", "d1", "d2", "d3"] {
        let queue = QueueName::new(name).expect("queue");
        let opts = |mode| {
            EnqueueOptions::new()
                .queue(name)
                .dedup(Dedup::key("k").mode(mode))
        };
        let first = client
            .enqueue(&email(1), opts(DedupMode::Replace))
            .await
            .expect("enqueue");
        // The holder's payload is replaced by edit.lua, in the queue's slot.
        let replaced = client
            .enqueue(&email(2), opts(DedupMode::Replace))
            .await
            .expect("enqueue");
        assert_eq!(
            (replaced.outcome, &replaced.id),
            (EnqueueOutcome::Replaced, &first.id),
            "{name}"
        );
        // A duplicate reads its holder's state on the node of the queue's slot.
        let dup = client
            .enqueue(&email(3), opts(DedupMode::Reject))
            .await
            .expect("enqueue");
        assert_eq!(
            (dup.outcome, dup.state),
            (EnqueueOutcome::Duplicate, TaskState::Pending),
            "{name}"
        );
        // The operator's listing scans the node of the queue's slot, and releases there.
        let locks = b.dedup_locks(&queue, 10).await.expect("locks");
        assert_eq!(locks.len(), 1, "{name}: {locks:?}");
        assert_eq!((locks[0].key.as_str(), &locks[0].holder), ("k", &first.id));
        assert!(b
            .release_dedup_lock(&queue, "k", Some(&first.id))
            .await
            .expect("release"));
        assert!(b.dedup_locks(&queue, 10).await.expect("locks").is_empty());
        let f = take(&b, &mut reader, &queue, "w", 5, Duration::from_millis(100)).await;
        assert_eq!(f.leases.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn a_backoff_and_its_holds_run_in_their_queues_slot() {
    use chronos_broker::{BackoffOutcome, BackoffScope, Throttle};
    let b = cluster_broker().await;
    let client = Client::new(b.clone());
    let mut reader = b.open_reader().await.expect("reader");
    for name in ["b0", "b1", "b2", "b3"] {
        let queue = QueueName::new(name).expect("queue");
        for _ in 0..2 {
            client
                .enqueue(&email(1), EnqueueOptions::new().queue(name).rate_key("k"))
                .await
                .expect("enqueue");
        }
        let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
        let lease = f.leases.into_iter().next().expect("lease");
        let got = b
            .back_off(
                &lease.id,
                &BackoffScope::Key("k".into()),
                Duration::from_secs(60),
            )
            .await
            .expect("back off");
        assert!(matches!(got, BackoffOutcome::Blocked { .. }), "{name}");
        let f = b
            .fetch(&mut reader, &queue, "w", &[], 1, Duration::ZERO)
            .await
            .expect("fetch");
        assert!(f.key_blocks, "{name}");
        let keyed: Vec<_> = f
            .leases
            .iter()
            .map(|l| (l.id.clone(), "k".to_string()))
            .collect();
        let rate = chronos_broker::KeyRate {
            rate: 0,
            period: Duration::from_secs(1),
        };
        let a = b.admit(&queue, &keyed, &rate).await.expect("admit");
        assert!(
            matches!(a[0], chronos_broker::Admission::Deferred { .. }),
            "{name}"
        );
        assert_eq!(
            b.queue_blocks(&queue, 10).await.expect("blocks").keys.len(),
            1
        );
    }
}
