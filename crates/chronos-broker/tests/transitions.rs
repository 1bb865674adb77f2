//! Every task transition of the Redis broker, against a real Redis.

mod common;

use std::time::Duration;

use chronos_broker::{
    decode_args, now_ms, BrokerError, Client, Completion, Consume, DeadOutcome, EnqueueOptions,
    Inspect, Maintain, QueueName, Results, SettleExt, TaskOutcome, TaskState,
};
use common::{broker, email, take, Email};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

#[tokio::test]
async fn enqueued_task_is_fetched_decoded_and_deleted_on_complete() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!(info.queue, "default");

    let queue = q("default");
    let mut reader = b.open_reader().await.expect("reader");
    let fetched = take(
        &b,
        &mut reader,
        &queue,
        "w1",
        10,
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(fetched.leases.len(), 1);
    let lease = &fetched.leases[0];
    let env = lease.envelope.as_ref().expect("decodes");
    assert_eq!(env.id, info.id);
    assert_eq!(env.kind, "email");
    assert_eq!(env.max_retry, 25);
    assert_eq!(decode_args::<Email>(&env.payload).expect("args"), email(1));
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active), (0, 1));
    assert_eq!(
        b.task(&queue, &info.id)
            .await
            .expect("task")
            .expect("exists")
            .state,
        TaskState::Active
    );

    let done = [Completion {
        lease: lease.id.clone(),
        retention: None,
        result: None,
    }];
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
    // A re-sent ack (the client retries in-flight commands after a reconnect) finds nothing
    // left to do and changes nothing (processed stays 1 below).
    assert_eq!(b.complete(&queue, &done).await.expect("complete again"), 0);
    assert!(b.task(&queue, &info.id).await.expect("task").is_none());
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 1));
    b.close_reader(reader).await;
}

#[tokio::test]
async fn retention_keeps_completed_task_for_inspection() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let opts = EnqueueOptions::new().retention(Duration::from_secs(60));
    let info = client.enqueue(&email(2), opts).await.expect("enqueue");
    let queue = q("default");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 1, Duration::from_millis(100)).await;
    let done = [Completion {
        lease: f.leases[0].id.clone(),
        retention: Some(Duration::from_secs(60)),
        result: None,
    }];
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
    let rec = b
        .task(&queue, &info.id)
        .await
        .expect("task")
        .expect("retained");
    assert_eq!(rec.state, TaskState::Completed);
    let listed = b
        .list_tasks(&queue, TaskState::Completed, 0, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(b.queue_stats(&queue).await.expect("stats").completed, 1);
}

#[tokio::test]
async fn retry_counts_attempt_and_forward_brings_it_back_when_due() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(&email(3), EnqueueOptions::new().queue("r"))
        .await
        .expect("enqueue");
    let queue = q("r");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 1, Duration::from_millis(100)).await;
    let lease = f.leases[0].id.clone();
    let delay = Duration::from_millis(300);
    assert!(b.retry(&lease, delay, "smtp down").await.expect("retry"));
    // A re-sent retry answers what its first run did, and changes nothing.
    assert!(b
        .retry(&lease, delay, "smtp down")
        .await
        .expect("re-sent retry"));
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.retry, stats.active, stats.failed), (1, 0, 1));

    assert_eq!(b.forward_due(&queue, 100).await.expect("forward early"), 0);
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward due"), 1);
    let f = take(&b, &mut reader, &queue, "w1", 1, Duration::from_millis(100)).await;
    let env = f.leases[0].envelope.as_ref().expect("decodes");
    assert_eq!(env.id, info.id);
    assert_eq!(env.retried, 1);
    assert_eq!(env.last_error.as_deref(), Some("smtp down"));
}

#[tokio::test]
async fn delayed_task_becomes_due_at_its_time() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(
            &email(4),
            EnqueueOptions::new()
                .queue("d")
                .process_in(Duration::from_millis(400)),
        )
        .await
        .expect("enqueue");
    assert_eq!(info.state, TaskState::Scheduled);
    let queue = q("d");
    assert_eq!(b.queue_stats(&queue).await.expect("stats").scheduled, 1);
    assert!(info.run_at_ms > now_ms() + 200, "{}", info.run_at_ms);
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 0);
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.scheduled, stats.pending), (0, 1));
}

#[tokio::test]
async fn dead_letter_archives_or_discards_and_releases_unique_lock() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("dl");
    let mut reader = b.open_reader().await.expect("reader");
    let unique = EnqueueOptions::new()
        .queue("dl")
        .unique(Duration::from_secs(60));

    let kept = client
        .enqueue(&email(5), unique.clone())
        .await
        .expect("enqueue");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    assert_eq!(
        b.dead_letter(&f.leases[0].id, "bad address", true)
            .await
            .expect("dead"),
        DeadOutcome::Archived
    );
    // A re-sent call answers what its first run did.
    assert_eq!(
        b.dead_letter(&f.leases[0].id, "bad address", true)
            .await
            .expect("again"),
        DeadOutcome::Archived
    );
    let rec = b
        .task(&queue, &kept.id)
        .await
        .expect("task")
        .expect("archived");
    assert_eq!(rec.state, TaskState::Archived);
    assert_eq!(
        rec.envelope.expect("decodes").last_error.as_deref(),
        Some("bad address")
    );
    // The unique lock was released with the archive, so the same task can be enqueued again.
    client
        .enqueue(&email(5), unique.clone())
        .await
        .expect("unique lock released");

    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    b.complete(
        &queue,
        &[Completion {
            lease: f.leases[0].id.clone(),
            retention: None,
            result: None,
        }],
    )
    .await
    .expect("ack");

    let dropped = client
        .enqueue(&email(6), unique.clone().discard_on_dead_letter())
        .await
        .expect("enqueue");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    assert_eq!(
        b.dead_letter(&f.leases[0].id, "no", false)
            .await
            .expect("dead"),
        DeadOutcome::Discarded
    );
    assert!(b.task(&queue, &dropped.id).await.expect("task").is_none());
    assert_eq!(b.queue_stats(&queue).await.expect("stats").archived, 1);
}

#[tokio::test]
async fn requeue_puts_task_back_without_counting_an_attempt() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("rq");
    client
        .enqueue(&email(7), EnqueueOptions::new().queue("rq"))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    assert_eq!(b.requeue(&queue, &ids).await.expect("requeue"), 1);
    assert_eq!(b.requeue(&queue, &ids).await.expect("re-sent requeue"), 0);
    let f = take(&b, &mut reader, &queue, "w2", 1, Duration::from_millis(100)).await;
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").retried, 0);
}

#[tokio::test]
async fn reclaim_counts_attempt_and_dead_letters_a_task_that_keeps_killing_workers() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("rc");
    let info = client
        .enqueue(&email(8), EnqueueOptions::new().queue("rc").max_retry(1))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let idle = Duration::from_millis(50);

    // Worker 1 takes it and dies.
    take(
        &b,
        &mut reader,
        &queue,
        "dead-1",
        1,
        Duration::from_millis(100),
    )
    .await;
    tokio::time::sleep(idle * 2).await;
    let r = b.reclaim_idle(&queue, idle, 100).await.expect("reclaim");
    assert_eq!((r.requeued, r.dead.len()), (1, 0));
    // Worker 2 takes it and dies too: no retry left.
    let f = take(
        &b,
        &mut reader,
        &queue,
        "dead-2",
        1,
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").retried, 1);
    tokio::time::sleep(idle * 2).await;
    let r = b.reclaim_idle(&queue, idle, 100).await.expect("reclaim");
    assert_eq!((r.requeued, r.dead.len()), (0, 1));
    assert_eq!(r.dead[0].task_id, info.id);
    assert!(!r.dead[0].discarded);
    let rec = b
        .task(&queue, &info.id)
        .await
        .expect("task")
        .expect("archived");
    assert_eq!(rec.state, TaskState::Archived);
    assert!(rec
        .envelope
        .expect("decodes")
        .last_error
        .expect("error")
        .starts_with("worker lost"));
    // The recoverer keeps nothing pending, so it can be pruned like any idle consumer.
    let consumers = b.consumers(&queue).await.expect("consumers");
    assert!(
        consumers.iter().all(|(_, pending, _)| *pending == 0),
        "{consumers:?}"
    );
}

#[tokio::test]
async fn heartbeat_keeps_lease_and_reports_a_reclaimed_one() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("hb");
    for n in 0..2 {
        client
            .enqueue(&email(n), EnqueueOptions::new().queue("hb"))
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 2, Duration::from_millis(100)).await;
    let ids: Vec<String> = f.leases.iter().map(|l| l.id.msg_id.clone()).collect();
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Every lease held is refreshed, not only the first.
    let mut both = b.keep_alive(&queue, "w", &ids, &[]).await.expect("extend");
    both.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(both, want);
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Refresh only the first lease; the second goes idle and is reclaimed.
    assert_eq!(
        b.keep_alive(&queue, "w", &ids[..1], &[])
            .await
            .expect("extend"),
        ids[..1].to_vec()
    );
    let r = b
        .reclaim_idle(&queue, Duration::from_millis(100), 100)
        .await
        .expect("reclaim");
    assert_eq!(r.requeued, 1);
    assert_eq!(
        b.keep_alive(&queue, "w", &ids, &[]).await.expect("extend"),
        ids[..1].to_vec()
    );
    // Another consumer cannot steal a lease through the heartbeat.
    assert!(b
        .keep_alive(&queue, "intruder", &ids, &[])
        .await
        .expect("extend")
        .is_empty());
    // Completing the reclaimed delivery is a no-op: its new delivery is someone else's.
    let stale = [Completion {
        lease: f.leases[1].id.clone(),
        retention: None,
        result: None,
    }];
    assert_eq!(b.complete(&queue, &stale).await.expect("complete"), 0);
}

#[tokio::test]
async fn explicit_task_id_is_idempotent_and_conflicts_on_other_payload() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let opts = EnqueueOptions::new().task_id("order-42");
    let first = client
        .enqueue(&email(9), opts.clone())
        .await
        .expect("enqueue");
    assert_eq!(first.id, "order-42");
    // Same id, different payload: refused, nothing changed.
    let err = client
        .enqueue(&email(10), opts.clone())
        .await
        .expect_err("conflict");
    assert!(
        matches!(err, BrokerError::TaskIdConflict { ref id, .. } if id == "order-42"),
        "{err}"
    );
    assert_eq!(
        b.queue_stats(&q("default")).await.expect("stats").pending,
        1
    );
}

#[tokio::test]
async fn trim_removes_archive_beyond_count_and_age() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("trim");
    let mut reader = b.open_reader().await.expect("reader");
    for n in 0..5 {
        client
            .enqueue(&email(n), EnqueueOptions::new().queue("trim"))
            .await
            .expect("enqueue");
    }
    let f = take(&b, &mut reader, &queue, "w", 5, Duration::from_millis(100)).await;
    for l in &f.leases {
        b.dead_letter(&l.id, "x", true).await.expect("dead");
    }
    assert_eq!(
        b.trim(&queue, Duration::from_secs(3600), 3, 100)
            .await
            .expect("trim"),
        2
    );
    assert_eq!(b.queue_stats(&queue).await.expect("stats").archived, 3);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        b.trim(&queue, Duration::from_millis(1), 100, 100)
            .await
            .expect("trim"),
        3
    );
    assert_eq!(b.queue_stats(&queue).await.expect("stats").archived, 0);
    assert!(b
        .list_tasks(&queue, TaskState::Archived, 0, 10)
        .await
        .expect("list")
        .is_empty());
}

#[tokio::test]
async fn consumer_with_pending_entries_is_never_removed() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("cons");
    client
        .enqueue(&email(1), EnqueueOptions::new().queue("cons"))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(
        &b,
        &mut reader,
        &queue,
        "busy",
        1,
        Duration::from_millis(100),
    )
    .await;
    take(
        &b,
        &mut reader,
        &queue,
        "idle",
        1,
        Duration::from_millis(10),
    )
    .await;
    assert!(!b.remove_consumer(&queue, "busy").await.expect("remove"));
    assert!(b.remove_consumer(&queue, "idle").await.expect("remove"));
    b.complete(
        &queue,
        &[Completion {
            lease: f.leases[0].id.clone(),
            retention: None,
            result: None,
        }],
    )
    .await
    .expect("ack");
    assert!(b.remove_consumer(&queue, "busy").await.expect("remove"));
}

#[tokio::test]
async fn list_tasks_by_state() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("list");
    for n in 0..3 {
        client
            .enqueue(&email(n), EnqueueOptions::new().queue("list"))
            .await
            .expect("enqueue");
    }
    client
        .enqueue(
            &email(9),
            EnqueueOptions::new()
                .queue("list")
                .process_in(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
    assert_eq!(
        b.list_tasks(&queue, TaskState::Pending, 0, 10)
            .await
            .expect("pending")
            .len(),
        2
    );
    assert_eq!(
        b.list_tasks(&queue, TaskState::Pending, 1, 10)
            .await
            .expect("offset")
            .len(),
        1
    );
    assert_eq!(
        b.list_tasks(&queue, TaskState::Active, 0, 10)
            .await
            .expect("active")
            .len(),
        1
    );
    assert_eq!(
        b.list_tasks(&queue, TaskState::Scheduled, 0, 10)
            .await
            .expect("scheduled")
            .len(),
        1
    );
    assert_eq!(b.queues().await.expect("queues"), vec![queue.clone()]);
    b.set_paused(&queue, true).await.expect("pause");
    assert_eq!(
        b.paused_queues().await.expect("paused"),
        vec![queue.clone()]
    );
    b.set_paused(&queue, false).await.expect("resume");
    assert!(b.paused_queues().await.expect("paused").is_empty());
}

#[tokio::test]
async fn janitor_spares_a_task_enqueued_again_under_an_expired_retained_id() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("reuse");
    let opts = EnqueueOptions::new().queue("reuse").task_id("same");
    client
        .enqueue(&email(1), opts.clone().retention(Duration::from_millis(50)))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    let done = [Completion {
        lease: f.leases[0].id.clone(),
        retention: Some(Duration::from_millis(50)),
        result: None,
    }];
    b.complete(&queue, &done).await.expect("complete");
    tokio::time::sleep(Duration::from_millis(120)).await; // the retained hash expires
    client
        .enqueue(&email(1), opts)
        .await
        .expect("same id again");
    b.trim(&queue, Duration::from_secs(3600), 100, 100)
        .await
        .expect("trim");
    let rec = b
        .task(&queue, "same")
        .await
        .expect("task")
        .expect("the new task survives the janitor");
    assert_eq!(rec.state, TaskState::Pending);
}

#[tokio::test]
async fn reclaiming_a_delivery_that_never_reached_a_handler_spends_no_attempt() {
    use chronos_broker::fred::interfaces::StreamsInterface;
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("lost-reply");
    client
        .enqueue(
            &email(1),
            EnqueueOptions::new().queue("lost-reply").max_retry(0),
        )
        .await
        .expect("enqueue");
    // A read whose reply was lost on a reconnect: delivered to the group, never activated.
    let stream = b.keyspace().queue(&queue).stream();
    let _: chronos_broker::fred::prelude::Value = b
        .client()
        .xreadgroup(
            chronos_broker::GROUP,
            "gone",
            Some(1),
            None,
            false,
            stream,
            ">",
        )
        .await
        .expect("raw read");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let r = b
        .reclaim_idle(&queue, Duration::from_millis(50), 100)
        .await
        .expect("reclaim");
    assert_eq!(
        (r.requeued, r.dead.len()),
        (1, 0),
        "max_retry 0, yet not dead: it never ran"
    );
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").retried, 0);
}

#[tokio::test]
async fn reclaim_dead_letters_wait_in_the_outbox_until_acknowledged_and_a_discard_reads_failed() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("rco");
    let kept = client
        .enqueue(&email(1), EnqueueOptions::new().queue("rco").max_retry(0))
        .await
        .expect("enqueue");
    let dropped = client
        .enqueue(
            &email(2),
            EnqueueOptions::new()
                .queue("rco")
                .max_retry(0)
                .discard_on_dead_letter(),
        )
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(
        &b,
        &mut reader,
        &queue,
        "gone",
        2,
        Duration::from_millis(100),
    )
    .await;
    b.close_reader(reader).await;
    assert_eq!(f.leases.len(), 2);
    let idle = Duration::from_millis(50);
    tokio::time::sleep(idle * 2).await;
    let r = b.reclaim_idle(&queue, idle, 100).await.expect("reclaim");
    assert_eq!(r.dead.len(), 2);

    // Both wait in the outbox, with their envelopes, whatever the caller does with the answer.
    let mut left = b.reclaimed_dead(&queue, 100).await.expect("outbox");
    left.sort_by_key(|d| d.task_id == dropped.id);
    let got: Vec<_> = left
        .iter()
        .map(|d| (d.task_id.clone(), d.discarded))
        .collect();
    assert_eq!(got, [(kept.id.clone(), false), (dropped.id.clone(), true)]);
    for d in &left {
        let env = d.envelope.as_ref().expect("outbox envelope decodes");
        assert_eq!(env.id, d.task_id);
    }
    let acked = b
        .ack_reclaimed(&queue, &[kept.id.clone(), dropped.id.clone()])
        .await
        .expect("ack");
    assert_eq!(acked, 2);
    assert!(b
        .reclaimed_dead(&queue, 100)
        .await
        .expect("outbox")
        .is_empty());
    assert_eq!(
        b.ack_reclaimed(&queue, std::slice::from_ref(&kept.id))
            .await
            .expect("ack"),
        0
    );

    // The discarded one reads as failed, not unknown; the lost worker's late dead letter of
    // the same delivery finds it stale, not settled by itself.
    match b.outcome(&queue, &dropped.id).await.expect("outcome") {
        TaskOutcome::Failed { .. } => {}
        other => panic!("a discarded dead letter reads {other:?}"),
    }
    let lease = f
        .leases
        .iter()
        .find(|l| l.id.task_id == dropped.id)
        .expect("lease");
    assert_eq!(
        b.dead_letter(&lease.id, "late", true).await.expect("dead"),
        DeadOutcome::Stale
    );
}
