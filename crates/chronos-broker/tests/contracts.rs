//! Concurrency, bad input, batching, locks and scripts of the Redis broker, against a real Redis.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use chronos_broker::fred::prelude::*;
use chronos_broker::{
    BrokerError, Client, Completion, Consume, Coordinate, EnqueueOptions, Inspect, QueueName,
    RedisBroker, SettleExt, TaskArgs,
};
use common::{broker, email, take, Email};

#[tokio::test]
async fn every_script_is_loaded_on_connect() {
    let b = broker().await;
    let shas = b.script_shas();
    assert!(shas.len() >= 14, "{shas:?}");
    let hashes: Vec<String> = shas.iter().map(|(_, s)| s.clone()).collect();
    let exists: Vec<bool> = b
        .client()
        .script_exists(hashes)
        .await
        .expect("script exists");
    assert!(exists.iter().all(|e| *e), "{shas:?} {exists:?}");
}

#[tokio::test]
async fn two_consumers_never_receive_the_same_entry() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let items: Vec<Email> = (0..600).map(email).collect();
    let opts = EnqueueOptions::new().queue("race");
    let results = client
        .enqueue_batch(items.iter().map(|e| (e, opts.clone())))
        .await
        .expect("batch");
    assert!(results.iter().all(|r| r.is_ok()));
    let queue = QueueName::new("race").expect("queue");

    let consume = |name: &'static str| {
        let b = b.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut reader = b.open_reader().await.expect("reader");
            let mut got = Vec::new();
            loop {
                let f = take(&b, &mut reader, &queue, name, 7, Duration::from_millis(50)).await;
                if f.leases.is_empty() {
                    break;
                }
                got.extend(f.leases.into_iter().map(|l| l.id.task_id));
            }
            got
        })
    };
    let (a, c) = tokio::join!(consume("a"), consume("c"));
    let (a, c) = (a.expect("join"), c.expect("join"));
    let all: HashSet<&String> = a.iter().chain(c.iter()).collect();
    assert_eq!(a.len() + c.len(), 600, "every task delivered once");
    assert_eq!(all.len(), 600, "no task delivered twice");
    assert!(!a.is_empty() && !c.is_empty(), "both consumers got work");
}

#[tokio::test]
async fn fifty_concurrent_unique_enqueues_leave_exactly_one() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let opts = EnqueueOptions::new()
        .queue("uniq")
        .unique(Duration::from_secs(30));
    let calls = (0..50).map(|_| {
        let client = client.clone();
        let opts = opts.clone();
        tokio::spawn(async move { client.enqueue(&email(77), opts).await })
    });
    let results: Vec<_> = futures_join(calls).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let dup = results
        .iter()
        .filter(|r| matches!(r, Err(BrokerError::DuplicateTask { .. })))
        .count();
    assert_eq!((ok, dup), (1, 49));
    let stats = b
        .queue_stats(&QueueName::new("uniq").expect("queue"))
        .await
        .expect("stats");
    assert_eq!(stats.pending, 1);
    // A different payload is not a duplicate.
    client
        .enqueue(&email(78), opts)
        .await
        .expect("other payload");
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("join"));
    }
    out
}

#[tokio::test]
async fn bad_queue_names_are_typed_errors_and_write_nothing() {
    let b = broker().await;
    let client = Client::new(b.clone());
    for bad in ["", "a b", "x{y}", "tab\there", &"q".repeat(129)] {
        let err = client
            .enqueue(&email(1), EnqueueOptions::new().queue(bad))
            .await
            .expect_err(bad);
        assert!(
            matches!(err, BrokerError::InvalidQueue { .. }),
            "{bad:?}: {err}"
        );
    }
    assert!(b.queues().await.expect("queues").is_empty());
    assert!(matches!(
        RedisBroker::builder("redis://127.0.0.1:1")
            .namespace("a{b}")
            .connect()
            .await,
        Err(BrokerError::InvalidNamespace { .. })
    ));
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Blob(Vec<u8>);
impl TaskArgs for Blob {
    const KIND: &'static str = "blob";
}

#[tokio::test]
async fn oversized_payload_is_refused_and_leaves_the_rest_of_a_batch() {
    let b = broker().await; // 4096-byte limit
    let client = Client::new(b.clone());
    let big = Blob(vec![7; 5000]);
    let small = Blob(vec![7; 10]);
    let err = client
        .enqueue(&big, EnqueueOptions::new())
        .await
        .expect_err("too large");
    assert!(
        matches!(err, BrokerError::PayloadTooLarge { limit: 4096, .. }),
        "{err}"
    );
    let results = client
        .enqueue_batch([
            (&small, EnqueueOptions::new()),
            (&big, EnqueueOptions::new()),
            (&small, EnqueueOptions::new()),
        ])
        .await
        .expect("batch");
    assert!(results[0].is_ok() && results[2].is_ok());
    assert!(matches!(
        results[1],
        Err(BrokerError::PayloadTooLarge { .. })
    ));
    let stats = b
        .queue_stats(&QueueName::new("default").expect("queue"))
        .await
        .expect("stats");
    assert_eq!(stats.pending, 2);
}

#[tokio::test]
async fn undecodable_entries_and_envelopes_never_block_the_queue() {
    // With and without a blocking wait.
    undecodable_entries_case(Duration::from_millis(100)).await;
    undecodable_entries_case(Duration::ZERO).await;
}

async fn undecodable_entries_case(block: Duration) {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = QueueName::new("poison").expect("queue");
    let keys = b.keyspace().queue(&queue);
    let good = client
        .enqueue(&email(1), EnqueueOptions::new().queue("poison"))
        .await
        .expect("enqueue");
    // A foreign entry with no task id, and a task whose envelope bytes are garbage.
    let _: String = b
        .client()
        .xadd(keys.stream(), false, None, "*", vec![("junk", "1")])
        .await
        .expect("xadd");
    // A task whose entry carries garbage bytes as its envelope (its record is sound).
    let bad_id = format!("bad-{}", block.as_millis());
    let bad_mid: String = b
        .client()
        .xadd(
            keys.stream(),
            false,
            None,
            "*",
            vec![
                ("i", bad_id.as_bytes()),
                ("e", [1u8, 0xc1, 0xff].as_slice()),
            ],
        )
        .await
        .expect("xadd");
    let _: i64 = b
        .client()
        .hset(
            keys.task(&bad_id),
            vec![
                ("r", "0"),
                ("x", "25"),
                ("s", "pending"),
                ("m", bad_mid.as_str()),
            ],
        )
        .await
        .expect("hset");
    struct Bad {
        id: String,
    }
    let bad = Bad { id: bad_id };
    let after = client
        .enqueue(&email(3), EnqueueOptions::new().queue("poison"))
        .await
        .expect("enqueue");

    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 10, block).await;
    assert_eq!(f.dropped, 1, "the foreign entry is dropped");
    assert_eq!(f.leases.len(), 3);
    let by_id = |id: &str| f.leases.iter().find(|l| l.id.task_id == id).expect("lease");
    assert!(by_id(&good.id).envelope.is_ok());
    assert!(by_id(&after.id).envelope.is_ok());
    assert!(matches!(
        by_id(&bad.id).envelope,
        Err(chronos_broker::DecodeError::Malformed(_))
    ));
    // The poison task can still be settled through its lease.
    let out = b
        .dead_letter(&by_id(&bad.id).id, "undecodable", false)
        .await
        .expect("dead");
    assert_eq!(out, chronos_broker::DeadOutcome::Archived);
    let done: Vec<Completion> = [&good.id, &after.id]
        .iter()
        .map(|id| Completion {
            lease: by_id(id).id.clone(),
            retention: None,
            result: None,
        })
        .collect();
    assert_eq!(b.complete(&queue, &done).await.expect("ack batch"), 2);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 1));
}

#[tokio::test]
async fn batch_enqueue_spans_queues_and_chunks() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let items: Vec<Email> = (0..2500).map(email).collect();
    let results = client
        .enqueue_batch(items.iter().enumerate().map(|(i, e)| {
            (
                e,
                EnqueueOptions::new().queue(if i % 2 == 0 { "even" } else { "odd" }),
            )
        }))
        .await
        .expect("batch");
    assert_eq!(results.len(), 2500);
    assert!(results.iter().all(|r| r.is_ok()));
    for name in ["even", "odd"] {
        let stats = b
            .queue_stats(&QueueName::new(name).expect("queue"))
            .await
            .expect("stats");
        assert_eq!(stats.pending, 1250, "{name}");
    }
}

#[tokio::test]
async fn lock_is_exclusive_renewable_and_released_only_by_its_holder() {
    let b = broker().await;
    let key = b.keyspace().tagged("sched", "leader");
    let ttl = Duration::from_secs(5);
    assert!(b.try_lock(&key, "a", ttl).await.expect("lock"));
    assert!(!b.try_lock(&key, "b", ttl).await.expect("lock"));
    assert!(b.renew_lock(&key, "a", ttl).await.expect("renew"));
    assert!(!b.renew_lock(&key, "b", ttl).await.expect("renew"));
    assert!(!b.release_lock(&key, "b", None).await.expect("release"));
    assert!(b
        .release_lock(&key, "a", Some("chan"))
        .await
        .expect("release"));
    assert!(b
        .try_lock(&key, "b", ttl)
        .await
        .expect("lock after release"));
    assert!(matches!(
        b.try_lock(&key, "c", Duration::ZERO).await,
        Err(BrokerError::InvalidDuration(_))
    ));
}

#[tokio::test]
async fn unreachable_redis_is_a_typed_transient_error() {
    let err = RedisBroker::connect("redis://127.0.0.1:1")
        .await
        .expect_err("refused");
    assert!(err.is_transient(), "{err}");
}
