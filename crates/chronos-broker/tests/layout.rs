//! The storage layout of a task, against a real Redis: the envelope lives in the stream entry
//! while the task is in the stream (so its hash stays a compact listpack) and in the hash while
//! it is out, and every transition keeps it readable.

mod common;

use std::time::Duration;

use chronos_broker::fred::prelude::*;
use chronos_broker::fred::types::{ClusterHash, CustomCommand};
use chronos_broker::{
    decode_args, encode_args, now_ms, BrokerError, Client, Completion, Consume, DeadOutcome,
    DecodeError, Enqueue, EnqueueOptions, Inspect, Maintain, NewTask, QueueName, RedisBroker,
    TaskArgs, TaskState,
};
use common::{broker, take};

/// A task with a 100-byte payload body, as in the bench.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Body {
    body: String,
}

impl TaskArgs for Body {
    const KIND: &'static str = "body";
}

fn body(c: char) -> Body {
    Body {
        body: c.to_string().repeat(100),
    }
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

/// What Redis stores for one task: the hash's encoding, whether it holds `e`, its `m`, and the
/// fields of the stream entry at `m` (empty when there is none).
struct Stored {
    encoding: String,
    hash_has_e: bool,
    entry_fields: Vec<String>,
}

async fn stored(b: &RedisBroker, queue: &QueueName, id: &str) -> Stored {
    let keys = b.keyspace().queue(queue);
    let key = keys.task(id);
    let encoding: String = b
        .client()
        .custom(
            CustomCommand::new_static("OBJECT", ClusterHash::Offset(1), false),
            vec!["ENCODING", key.as_str()],
        )
        .await
        .expect("object encoding");
    let hash_has_e: bool = b.client().hexists(&key, "e").await.expect("hexists");
    let mid: Option<String> = b.client().hget(&key, "m").await.expect("hget");
    let mut entry_fields = Vec::new();
    if let Some(mid) = mid {
        let entries: Vec<(String, Vec<(String, Value)>)> = b
            .client()
            .xrange(keys.stream(), mid.as_str(), mid.as_str(), Some(1))
            .await
            .expect("xrange");
        for (_, fields) in entries {
            entry_fields.extend(fields.into_iter().map(|(k, _)| k));
        }
    }
    Stored {
        encoding,
        hash_has_e,
        entry_fields,
    }
}

/// Asserts the task is in `state` and its envelope (as the inspector and the listing read it)
/// decodes to `want`.
async fn assert_readable(
    b: &RedisBroker,
    queue: &QueueName,
    id: &str,
    state: TaskState,
    want: &Body,
) {
    let rec = b
        .task(queue, id)
        .await
        .expect("task")
        .unwrap_or_else(|| panic!("task {id} missing in {state:?}"));
    assert_eq!(rec.state, state);
    let env = rec
        .envelope
        .unwrap_or_else(|e| panic!("envelope unreadable in {state:?}: {e}"));
    assert_eq!(env.id, id);
    assert_eq!(decode_args::<Body>(&env.payload).expect("args"), *want);
    let listed = b
        .list_tasks(queue, state, 0, 10)
        .await
        .expect("list")
        .into_iter()
        .find(|r| r.envelope.as_ref().is_ok_and(|e| e.id == id))
        .unwrap_or_else(|| panic!("task {id} not listed as {state:?}"));
    assert_eq!(listed.state, state);
}

#[tokio::test]
async fn pending_hash_is_a_listpack_and_the_envelope_follows_every_transition() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("layout");
    let want = body('x');
    let info = client
        .enqueue(&want, EnqueueOptions::new().queue("layout"))
        .await
        .expect("enqueue");
    let id = info.id.as_str();

    // Pending: the envelope is in the entry, the hash holds small fields only.
    let s = stored(&b, &queue, id).await;
    assert_eq!(s.encoding, "listpack", "pending task hash");
    assert!(!s.hash_has_e);
    assert_eq!(s.entry_fields, ["i", "e"]);
    assert_readable(&b, &queue, id, TaskState::Pending, &want).await;

    // Active (blocking fetch path): still in the entry.
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let lease = f.leases[0].id.clone();
    let env = f.leases[0].envelope.as_ref().expect("lease decodes");
    assert_eq!(decode_args::<Body>(&env.payload).expect("args"), want);
    assert_eq!(stored(&b, &queue, id).await.encoding, "listpack");
    assert_readable(&b, &queue, id, TaskState::Active, &want).await;

    // Retry: out of the stream, the envelope moved into the hash.
    let delay = Duration::from_millis(100);
    assert!(b.retry(&lease, delay, "smtp down").await.expect("retry"));
    assert!(b.retry(&lease, delay, "smtp down").await.expect("re-sent"));
    let s = stored(&b, &queue, id).await;
    assert!(s.hash_has_e, "retry keeps the envelope in the hash");
    assert!(s.entry_fields.is_empty());
    assert_readable(&b, &queue, id, TaskState::Retry, &want).await;

    // Forward: back in the stream with the envelope in the entry, and the hash rebuilt small.
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    let s = stored(&b, &queue, id).await;
    assert_eq!(s.encoding, "listpack", "forwarded task hash");
    assert!(!s.hash_has_e);
    // A task that failed before carries its attempt count and last error in the entry, so a
    // worker knows them without reading the hash.
    assert_eq!(s.entry_fields, ["i", "e", "r", "err", "f"]);
    assert_readable(&b, &queue, id, TaskState::Pending, &want).await;

    // Fetch again without waiting: the attempt count and error come with the entry.
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    let env = f.leases[0].envelope.as_ref().expect("lease decodes");
    assert_eq!(decode_args::<Body>(&env.payload).expect("args"), want);
    assert_eq!(env.retried, 1);
    assert_eq!(env.last_error.as_deref(), Some("smtp down"));
    assert_readable(&b, &queue, id, TaskState::Active, &want).await;

    // Complete with retention: out of the stream, the envelope moved into the hash.
    let done = [Completion {
        lease: f.leases[0].id.clone(),
        retention: Some(Duration::from_secs(60)),
        result: None,
    }];
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
    assert_eq!(b.complete(&queue, &done).await.expect("re-sent"), 1);
    let s = stored(&b, &queue, id).await;
    assert!(
        s.hash_has_e,
        "a retained task keeps its envelope in the hash"
    );
    assert_readable(&b, &queue, id, TaskState::Completed, &want).await;
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.completed), (0, 0, 1));
    b.close_reader(reader).await;
}

#[tokio::test]
async fn delayed_task_keeps_its_envelope_in_the_hash_until_forwarded() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("later");
    let want = body('d');
    let info = client
        .enqueue(
            &want,
            EnqueueOptions::new()
                .queue("later")
                .process_in(Duration::from_millis(300)),
        )
        .await
        .expect("enqueue");
    let s = stored(&b, &queue, &info.id).await;
    assert!(s.hash_has_e);
    assert!(s.entry_fields.is_empty());
    assert_readable(&b, &queue, &info.id, TaskState::Scheduled, &want).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    let s = stored(&b, &queue, &info.id).await;
    assert_eq!(s.encoding, "listpack");
    assert_eq!(s.entry_fields, ["i", "e"]);
    assert_readable(&b, &queue, &info.id, TaskState::Pending, &want).await;
}

#[tokio::test]
async fn resent_task_id_is_idempotent_wherever_the_envelope_lives() {
    let b = broker().await;
    let now = now_ms();
    // One queue per case: the id is also the queue name.
    let task = |id: &str, c: char, delay: Option<Duration>| {
        let mut opts = EnqueueOptions::new().queue(id).task_id(id);
        if let Some(d) = delay {
            opts = opts.process_in(d);
        }
        NewTask::build(Body::KIND, encode_args(&body(c)).expect("args"), opts, now).expect("task")
    };
    let outcome = |r: Vec<Result<chronos_broker::TaskInfo, BrokerError>>| {
        r.into_iter().next().expect("one result")
    };
    // In the stream (pending, then active) and in the hash (scheduled).
    let mut reader = b.open_reader().await.expect("reader");
    for (id, delay, fetch) in [
        ("in-stream", None, false),
        ("in-pel", None, true),
        ("in-hash", Some(Duration::from_secs(60)), false),
    ] {
        let same = task(id, 'a', delay);
        outcome(b.enqueue(vec![same.clone()]).await.expect("enqueue")).expect("first");
        if fetch {
            let f = b
                .fetch(&mut reader, &q(id), "w", 10, Duration::from_millis(100))
                .await
                .expect("fetch");
            assert_eq!(f.leases.len(), 1, "{id}");
        }
        // The same bytes again (a re-sent call): success, nothing changed.
        outcome(b.enqueue(vec![same]).await.expect("enqueue"))
            .unwrap_or_else(|e| panic!("{id}: re-send refused: {e}"));
        // Other bytes under the same id: a conflict.
        let err = outcome(
            b.enqueue(vec![task(id, 'b', delay)])
                .await
                .expect("enqueue"),
        )
        .expect_err("conflict");
        assert!(
            matches!(err, BrokerError::TaskIdConflict { .. }),
            "{id}: {err}"
        );
        let stats = b.queue_stats(&q(id)).await.expect("stats");
        let one = (stats.pending, stats.active, stats.scheduled);
        let want = match (delay, fetch) {
            (Some(_), _) => (0, 0, 1),
            (None, true) => (0, 1, 0),
            (None, false) => (1, 0, 0),
        };
        assert_eq!(one, want, "{id}: nothing was written twice");
    }
    b.close_reader(reader).await;
}

#[tokio::test]
async fn requeue_and_reclaim_carry_the_envelope() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("carry");
    let want = body('r');
    let kept = client
        .enqueue(&want, EnqueueOptions::new().queue("carry").max_retry(1))
        .await
        .expect("enqueue");
    let dropped = client
        .enqueue(
            &want,
            EnqueueOptions::new()
                .queue("carry")
                .max_retry(0)
                .discard_on_dead_letter(),
        )
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 10, Duration::from_millis(100)).await;
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    assert_eq!(b.requeue(&queue, &ids).await.expect("requeue"), 2);
    for id in [&kept.id, &dropped.id] {
        let s = stored(&b, &queue, id).await;
        assert_eq!((s.encoding.as_str(), s.hash_has_e), ("listpack", false));
        assert_eq!(s.entry_fields, ["i", "e"]);
        assert_readable(&b, &queue, id, TaskState::Pending, &want).await;
    }

    // Both die in their worker: `kept` is re-queued once, `dropped` has no retry left.
    let idle = Duration::from_millis(30);
    let f = take(
        &b,
        &mut reader,
        &queue,
        "dead-1",
        10,
        Duration::from_millis(100),
    )
    .await;
    assert!(f.leases.iter().all(|l| l.envelope.is_ok()));
    tokio::time::sleep(idle * 2).await;
    let r = b.reclaim_idle(&queue, idle, 100).await.expect("reclaim");
    assert_eq!((r.requeued, r.dead.len()), (1, 1));
    assert_eq!(r.dead[0].task_id, dropped.id);
    assert!(r.dead[0].discarded);
    let env = r.dead[0].envelope.as_ref().expect("dead envelope decodes");
    assert_eq!(decode_args::<Body>(&env.payload).expect("args"), want);
    assert_eq!(
        stored(&b, &queue, &kept.id).await.entry_fields,
        ["i", "e", "r", "err", "f"]
    );
    assert_readable(&b, &queue, &kept.id, TaskState::Pending, &want).await;

    take(
        &b,
        &mut reader,
        &queue,
        "dead-2",
        10,
        Duration::from_millis(100),
    )
    .await;
    tokio::time::sleep(idle * 2).await;
    let r = b.reclaim_idle(&queue, idle, 100).await.expect("reclaim");
    assert_eq!((r.requeued, r.dead.len()), (0, 1));
    assert!(!r.dead[0].discarded);
    let env = r.dead[0].envelope.as_ref().expect("dead envelope decodes");
    assert_eq!(env.id, kept.id);
    assert!(stored(&b, &queue, &kept.id).await.hash_has_e);
    assert_readable(&b, &queue, &kept.id, TaskState::Archived, &want).await;
    b.close_reader(reader).await;
}

#[tokio::test]
async fn undecodable_envelope_in_the_entry_is_leased_and_archived() {
    for block in [Duration::from_millis(100), Duration::ZERO] {
        let b = broker().await;
        let client = Client::new(b.clone());
        let queue = q("poison");
        let keys = b.keyspace().queue(&queue);
        let bad = client
            .enqueue(&body('p'), EnqueueOptions::new().queue("poison"))
            .await
            .expect("enqueue");
        // Replace the task's entry with one whose envelope bytes are garbage.
        let key = keys.task(&bad.id);
        let mid: String = b.client().hget(&key, "m").await.expect("hget");
        let _: i64 = b
            .client()
            .xdel(keys.stream(), mid.as_str())
            .await
            .expect("xdel");
        let garbage = vec![1u8, 0xc1, 0xff];
        let new: String = b
            .client()
            .xadd(
                keys.stream(),
                false,
                None,
                "*",
                vec![
                    ("i", Value::from(bad.id.as_str())),
                    ("e", Value::from(garbage.as_slice())),
                ],
            )
            .await
            .expect("xadd");
        let _: i64 = b
            .client()
            .hset(&key, ("m", new.as_str()))
            .await
            .expect("hset");

        let mut reader = b.open_reader().await.expect("reader");
        let f = take(&b, &mut reader, &queue, "w", 10, block).await;
        assert_eq!(f.leases.len(), 1, "{block:?}");
        assert!(
            matches!(f.leases[0].envelope, Err(DecodeError::Malformed(_))),
            "{block:?}"
        );
        assert_eq!(
            b.dead_letter(&f.leases[0].id, "undecodable", false)
                .await
                .expect("dead"),
            DeadOutcome::Archived
        );
        // The garbage moved into the hash with the task: still there to inspect.
        let rec = b.task(&queue, &bad.id).await.expect("task").expect("kept");
        assert_eq!(rec.state, TaskState::Archived);
        assert!(matches!(rec.envelope, Err(DecodeError::Malformed(_))));
        b.close_reader(reader).await;
    }
}
