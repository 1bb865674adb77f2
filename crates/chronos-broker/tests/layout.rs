//! The storage layout of a task, against a real Redis: the envelope lives in the stream entry
//! while the task is in the stream (so its hash stays a compact listpack) and in the hash while
//! it is out, and every transition keeps it readable.

mod common;

use std::time::Duration;

use chronos_broker::fred::prelude::*;
use chronos_broker::fred::types::{ClusterHash, CustomCommand};
use chronos_broker::{
    decode_args, encode_args, now_ms, ActionOutcome, BrokerError, Client, Completion, Consume,
    DeadOutcome, DecodeError, Enqueue, EnqueueOptions, Inspect, Maintain, NewTask, Operate,
    QueueName, RedisBroker, Results, SettleExt, TaskAction, TaskArgs, TaskState,
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
    // An explicit id: a task with a record from its enqueue on (plain tasks are below).
    let info = client
        .enqueue(&want, EnqueueOptions::new().queue("layout").task_id("x1"))
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
    // The attempt history's row is longer than a listpack value (as most error messages
    // are), so a task that failed keeps a hashtable; the envelope is out of it all the same.
    assert_eq!(
        s.encoding, "hashtable",
        "forwarded task hash, with its attempt history"
    );
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
                .fetch(
                    &mut reader,
                    &q(id),
                    "w",
                    &[],
                    10,
                    Duration::from_millis(100),
                )
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
            .enqueue(
                &body('p'),
                EnqueueOptions::new().queue("poison").task_id("p1"),
            )
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

#[tokio::test]
async fn a_plain_task_is_one_entry_until_it_needs_a_record() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("plain");
    let keys = b.keyspace().queue(&queue);
    let want = body('y');
    let info = client
        .enqueue(&want, EnqueueOptions::new().queue("plain"))
        .await
        .expect("enqueue");
    let id = info.id.clone();
    let entry_fields = |mid: String| {
        let b = b.clone();
        let stream = keys.stream();
        async move {
            let entries: Vec<(String, Vec<(String, Value)>)> = b
                .client()
                .xrange(stream, mid.as_str(), mid.as_str(), Some(1))
                .await
                .expect("xrange");
            entries
                .into_iter()
                .flat_map(|(_, f)| f.into_iter().map(|(k, _)| k))
                .collect::<Vec<_>>()
        }
    };
    let has_hash = |id: String| {
        let b = b.clone();
        let key = keys.task(&id);
        async move { b.client().exists::<i64, _>(key).await.expect("exists") == 1 }
    };

    // Pending: its id is its entry's id, and the entry (the envelope alone) is all there is.
    assert_eq!(entry_fields(id.clone()).await, ["e"]);
    assert!(!has_hash(id.clone()).await, "a plain task has no hash");
    assert_readable(&b, &queue, &id, TaskState::Pending, &want).await;

    // Active once started: the pending entry's delivery count says so, still no hash.
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let lease = f.leases[0].id.clone();
    assert!(lease.is_plain());
    assert_eq!(lease.task_id, id);
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").id, id);
    assert!(!has_hash(id.clone()).await);
    assert_readable(&b, &queue, &id, TaskState::Active, &want).await;

    // Retry: it gets the record a task with an explicit id has, envelope and all.
    let delay = Duration::from_millis(100);
    assert!(b.retry(&lease, delay, "smtp down").await.expect("retry"));
    assert!(b.retry(&lease, delay, "smtp down").await.expect("re-sent"));
    let h: Vec<String> = b
        .client()
        .hmget(keys.task(&id), vec!["s", "r", "x"])
        .await
        .expect("hmget");
    assert_eq!(h, ["retry", "1", "25"]);
    let has_e: bool = b
        .client()
        .hexists(keys.task(&id), "e")
        .await
        .expect("hexists");
    assert!(has_e);
    assert!(entry_fields(id.clone()).await.is_empty());
    assert_readable(&b, &queue, &id, TaskState::Retry, &want).await;

    // Forward: a new entry with `i`, as any task that failed before.
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    assert_readable(&b, &queue, &id, TaskState::Pending, &want).await;
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    let again = f.leases[0].id.clone();
    assert!(!again.is_plain(), "its later deliveries are not plain");
    assert_eq!(again.task_id, id);
    assert_eq!(
        entry_fields(again.msg_id.clone()).await,
        ["i", "e", "r", "err", "f"]
    );
    let env = f.leases[0].envelope.as_ref().expect("decodes");
    assert_eq!((env.id.as_str(), env.retried), (id.as_str(), 1));

    // Complete: nothing is left of it.
    let done = [Completion {
        lease: again,
        retention: None,
        result: None,
    }];
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
    assert!(!has_hash(id.clone()).await);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 1));

    // A plain task completed at once: one ack, counted once even when the call is re-sent.
    let info = client
        .enqueue(&want, EnqueueOptions::new().queue("plain"))
        .await
        .expect("enqueue");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    assert_eq!(f.leases[0].id.task_id, info.id);
    let done = [Completion {
        lease: f.leases[0].id.clone(),
        retention: None,
        result: None,
    }];
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
    assert_eq!(b.complete(&queue, &done).await.expect("re-sent"), 0);
    assert!(entry_fields(info.id.clone()).await.is_empty());
    assert!(b.task(&queue, &info.id).await.expect("task").is_none());
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 2));
    b.close_reader(reader).await;
}

#[tokio::test]
async fn a_plain_task_with_an_undecodable_envelope_is_archived() {
    let b = broker().await;
    let queue = q("plain-poison");
    let keys = b.keyspace().queue(&queue);
    // Register the queue (and its group) by a first plain enqueue, then add a garbage entry
    // shaped as a plain task's.
    let client = Client::new(b.clone());
    let first = client
        .enqueue(&body('a'), EnqueueOptions::new().queue("plain-poison"))
        .await
        .expect("enqueue");
    let garbage = vec![1u8, 0xc1, 0xff];
    let mid: String = b
        .client()
        .xadd(
            keys.stream(),
            false,
            None,
            "*",
            vec![("e", Value::from(garbage.as_slice()))],
        )
        .await
        .expect("xadd");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await;
    assert_eq!(f.leases.len(), 2);
    assert_eq!(f.leases[0].id.task_id, first.id);
    assert_eq!(f.leases[1].id.task_id, mid);
    assert!(matches!(
        f.leases[1].envelope,
        Err(DecodeError::Malformed(_))
    ));
    assert_eq!(
        b.dead_letter(&f.leases[1].id, "undecodable", false)
            .await
            .expect("dead"),
        DeadOutcome::Archived
    );
    let rec = b.task(&queue, &mid).await.expect("task").expect("kept");
    assert_eq!(rec.state, TaskState::Archived);
    assert!(matches!(rec.envelope, Err(DecodeError::Malformed(_))));
    b.close_reader(reader).await;
}

#[tokio::test]
async fn ids_of_the_plain_shape_are_refused_and_plain_tasks_read_as_unfinished() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("plain-ids");
    for id in ["1764633600000-0", "1-2"] {
        let err = client
            .enqueue(
                &body('z'),
                EnqueueOptions::new().queue("plain-ids").task_id(id),
            )
            .await
            .expect_err("a generated id's shape");
        assert!(matches!(err, BrokerError::InvalidTaskId { .. }), "{err:?}");
    }
    // Other ids with digits and dashes stay fine.
    client
        .enqueue(
            &body('z'),
            EnqueueOptions::new()
                .queue("plain-ids")
                .task_id("order-1-2"),
        )
        .await
        .expect("explicit id");
    let plain = client
        .enqueue(&body('z'), EnqueueOptions::new().queue("plain-ids"))
        .await
        .expect("plain");
    assert!(plain.id.split_once('-').is_some_and(|(ms, seq)| {
        ms.parse::<i64>().is_ok_and(|ms| ms >= now_ms() - 60_000) && seq.parse::<u64>().is_ok()
    }));
    // A waiter sees a plain task as waiting, not as unknown.
    let outcome = b.outcome(&queue, &plain.id).await.expect("outcome");
    assert_eq!(
        outcome,
        chronos_broker::TaskOutcome::Unfinished(TaskState::Pending)
    );
}

#[tokio::test]
async fn plain_tasks_in_a_stream_with_huge_sequence_numbers_get_the_ids_redis_gives() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("plain-seq");
    let keys = b.keyspace().queue(&queue);
    // An entry written by hand with a sequence number beyond what Lua counts exactly: the
    // entries after it take that millisecond and count up from there.
    let _: String = b
        .client()
        .xadd(
            keys.stream(),
            false,
            None,
            "99999999999999-18446744073709551000",
            vec![("x", "y")],
        )
        .await
        .expect("xadd");
    let task = body('s');
    let tasks = (0..3).map(|_| (&task, EnqueueOptions::new().queue("plain-seq")));
    let infos = client.enqueue_batch(tasks).await.expect("batch");
    let ids: Vec<String> = infos.into_iter().map(|r| r.expect("enqueued").id).collect();
    assert_eq!(
        ids,
        [
            "99999999999999-18446744073709551001",
            "99999999999999-18446744073709551002",
            "99999999999999-18446744073709551003",
        ]
    );
    for id in &ids {
        let rec = b.task(&queue, id).await.expect("task").expect("readable");
        assert_eq!(rec.state, TaskState::Pending);
    }
}

#[tokio::test]
async fn run_now_of_a_plain_task_answers_already_and_plain_tasks_can_be_turned_off() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("plain-run");
    let info = client
        .enqueue(&body('r'), EnqueueOptions::new().queue("plain-run"))
        .await
        .expect("enqueue");
    let outcome = b
        .act(&queue, &info.id, TaskAction::RunNow)
        .await
        .expect("run now");
    assert_eq!(
        outcome,
        ActionOutcome::Already,
        "a plain task is pending already"
    );

    // Off (a fleet whose workers are not all upgraded yet): every task gets a record again.
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let off = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .plain_tasks(false)
        .connect()
        .await
        .expect("connect");
    let queue = q("plain-off");
    let info = Client::new(off.clone())
        .enqueue(&body('o'), EnqueueOptions::new().queue("plain-off"))
        .await
        .expect("enqueue");
    assert!(!info.id.contains('-'), "a random id: {}", info.id);
    let keys = off.keyspace().queue(&queue);
    let n: i64 = off
        .client()
        .exists(keys.task(&info.id))
        .await
        .expect("exists");
    assert_eq!(n, 1, "a record");
    let mut reader = off.open_reader().await.expect("reader");
    let f = take(&off, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    assert!(!f.leases[0].id.is_plain());
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").id, info.id);
    off.close_reader(reader).await;
}
