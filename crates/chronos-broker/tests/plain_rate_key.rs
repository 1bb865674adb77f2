//! A plain task's entry (no hash: lib.lua "Plain tasks") that carries a rate key, as another
//! producer may write one, meets admit.lua (issue 35, 2.12): it runs or is deferred like any
//! task, and is never taken for a gone delivery and deleted.

mod common;

use std::time::Duration;

use chronos_broker::fred::bytes::Bytes;
use chronos_broker::fred::interfaces::StreamsInterface;
use chronos_broker::{
    Admission, Client, Consume, EnqueueOptions, Inspect, KeyRate, QueueName, RedisBroker,
    TaskEnvelope, TaskState, Throttle,
};
use common::{broker, email};

/// Enqueues `n` plain tasks into `queue` and writes each again as a plain entry (`e` only, no
/// `i`) whose envelope names rate key `key`, as a producer other than Rust's may; the original
/// entries go. Returns the new entries' ids (the tasks' ids).
async fn foreign_plain_entries(
    b: &RedisBroker,
    queue: &QueueName,
    key: &str,
    n: u32,
) -> Vec<String> {
    let client = Client::new(b.clone());
    let stream = b.keyspace().queue(queue).stream();
    let mut ids = Vec::new();
    for i in 0..n {
        let info = client
            .enqueue(&email(i), EnqueueOptions::new().queue(queue.as_str()))
            .await
            .expect("enqueue");
        let entries: Vec<(String, Vec<(String, Bytes)>)> = b
            .client()
            .xrange(stream.as_str(), info.id.as_str(), info.id.as_str(), Some(1))
            .await
            .expect("xrange");
        let (_, fields) = entries.into_iter().next().expect("a plain task's entry");
        let env = fields
            .into_iter()
            .find(|(f, _)| f == "e")
            .map(|(_, v)| v)
            .expect("its envelope");
        let mut e = TaskEnvelope::decode(&env).expect("decodes");
        e.rate_key = Some(key.to_string());
        let bytes = e.encode().expect("encode");
        let id: String = b
            .client()
            .xadd(
                stream.as_str(),
                false,
                None,
                "*",
                vec![("e", Bytes::from(bytes))],
            )
            .await
            .expect("xadd");
        let _: i64 = b
            .client()
            .xdel(stream.as_str(), info.id.as_str())
            .await
            .expect("xdel");
        ids.push(id);
    }
    ids
}

#[tokio::test]
async fn a_plain_entry_with_a_rate_key_runs_or_waits_and_is_never_deleted_as_gone() {
    let b = broker().await;
    let queue = QueueName::new("keyed").expect("queue");
    let ids = foreign_plain_entries(&b, &queue, "acme", 3).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &queue, "w1", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    b.close_reader(reader).await;
    assert_eq!(f.leases.len(), 3);
    let deliveries: Vec<_> = f
        .leases
        .into_iter()
        .map(|l| {
            let key = l.envelope.expect("decodes").rate_key.expect("has a key");
            (l.id, key)
        })
        .collect();
    assert!(deliveries.iter().all(|(l, _)| l.is_plain()));
    let limit = KeyRate {
        rate: 1,
        period: Duration::from_secs(60),
    };
    let answers = b.admit(&queue, &deliveries, &limit).await.expect("admit");
    assert_eq!(answers[0], Admission::Run, "{answers:?}");
    assert!(
        answers[1..]
            .iter()
            .all(|a| matches!(a, Admission::Deferred { .. })),
        "{answers:?}"
    );
    // The first runs as fetched; the others wait in the scheduled set, kept whole.
    let state = |id: String| {
        let b = b.clone();
        let queue = queue.clone();
        async move { b.task(&queue, &id).await.expect("task").map(|t| t.state) }
    };
    assert_eq!(state(ids[0].clone()).await, Some(TaskState::Active));
    for id in &ids[1..] {
        let rec = b.task(&queue, id).await.expect("task").expect("kept");
        assert_eq!(rec.state, TaskState::Scheduled);
        assert_eq!(rec.envelope.expect("envelope kept").kind, "email");
    }
    // A re-sent call answers the same for the deferred ones.
    let again = b
        .admit(&queue, &deliveries[1..], &limit)
        .await
        .expect("again");
    assert_eq!(again, answers[1..].to_vec());
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.active, stats.scheduled), (1, 2), "{stats:?}");
}
