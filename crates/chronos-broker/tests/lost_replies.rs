//! Every transition whose reply is lost: a proxy lets the script call reach Redis and run, drops
//! its reply and cuts the connection; the client reconnects and re-sends the same call. The
//! re-send must leave the state as one run would, and answer what happened.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{HashesInterface, StreamsInterface};
use chronos_broker::{
    Client, Completion, Consume, DeadOutcome, EnqueueOptions, Inspect, Maintain, QueueName,
    SettleExt, Settlement, StartOutcome, TaskState,
};
use common::{email, rig, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

#[tokio::test]
async fn enqueue_whose_reply_is_lost_enqueues_once() {
    // A plain task (push.lua: the re-send must answer the id its entry got) and one with a
    // record (enqueue.lua).
    for (script, opts) in [
        ("push", EnqueueOptions::new()),
        ("enqueue", EnqueueOptions::new().task_id("t1")),
    ] {
        let rig = rig().await;
        let queue = q("default");
        rig.lose_reply_of(script);
        let info = Client::new(rig.via.clone())
            .enqueue(&email(1), opts)
            .await
            .expect("enqueue re-sent");
        rig.assert_lost(1);
        let stats = rig.direct.queue_stats(&queue).await.expect("stats");
        assert_eq!(stats.pending, 1, "{script}");
        let rec = rig
            .direct
            .task(&queue, &info.id)
            .await
            .expect("task")
            .unwrap_or_else(|| panic!("{script}: {} not found", info.id));
        assert_eq!(rec.state, TaskState::Pending);
    }
}

#[tokio::test]
async fn enqueue_resent_after_a_fast_worker_ran_the_task_is_a_no_op() {
    // A random id, an explicit id, and a retention shorter than the client's re-send delay.
    for case in ["random id", "explicit id", "short retention"] {
        let rig = rig().await;
        let queue = q("default");
        let mut opts = EnqueueOptions::new().unique(Duration::from_secs(60));
        let mut keep = None;
        match case {
            "explicit id" => opts = opts.task_id("order-1"),
            "short retention" => {
                keep = Some(Duration::from_millis(100));
                opts = opts.retention(Duration::from_millis(100));
            }
            _ => {}
        }
        // The producer's client cannot reconnect (so cannot re-send) until the task has run.
        rig.proxy.hold(true);
        rig.lose_reply_of("enqueue");
        let producer = Client::new(rig.via.clone());
        let first = opts.clone();
        let sent = tokio::spawn(async move { producer.enqueue(&email(1), first).await });
        rig.proxy.wait_dropped(1).await;

        // Meanwhile a worker runs the task; its unique lock is released.
        let mut reader = rig.direct.open_reader().await.expect("reader");
        let f = take(
            &rig.direct,
            &mut reader,
            &queue,
            "w",
            10,
            Duration::from_millis(200),
        )
        .await;
        assert_eq!(f.leases.len(), 1, "{case}");
        let done = [Completion {
            lease: f.leases[0].id.clone(),
            retention: keep,
            result: None,
        }];
        assert_eq!(rig.direct.complete(&queue, &done).await.expect("ack"), 1);
        if let Some(k) = keep {
            // The retained hash expires before the re-send arrives.
            tokio::time::sleep(k * 2).await;
        }

        // Now the re-send arrives: it must neither enqueue the task again nor take the lock.
        rig.proxy.hold(false);
        let info = sent
            .await
            .expect("join")
            .unwrap_or_else(|e| panic!("{case}: re-sent enqueue: {e}"));
        assert_eq!(info.id, f.leases[0].id.task_id, "{case}");
        let stats = rig.direct.queue_stats(&queue).await.expect("stats");
        assert_eq!(
            (stats.pending, stats.active, stats.processed),
            (0, 0, 1),
            "{case}"
        );
        Client::new(rig.direct.clone())
            .enqueue(&email(1), opts)
            .await
            .unwrap_or_else(|e| {
                panic!("{case}: the unique lock is free, and a new call enqueues: {e}")
            });
        let stats = rig.direct.queue_stats(&queue).await.expect("stats");
        assert_eq!(stats.pending, 1, "{case}: a new call is a new task");
    }
}

#[tokio::test]
async fn claim_whose_reply_is_lost_returns_the_same_batch_and_strands_nothing() {
    let rig = rig().await;
    let queue = q("default");
    let client = Client::new(rig.direct.clone());
    let mut ids = Vec::new();
    for n in 0..3 {
        let opts = EnqueueOptions::new().max_retry(0);
        ids.push(client.enqueue(&email(n), opts).await.expect("enqueue").id);
    }
    rig.via.ensure_queue(&queue).await.expect("queue");
    rig.lose_reply_of("claim");
    let mut reader = rig.via.open_reader().await.expect("reader");
    let f = rig
        .via
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch re-sent");
    rig.assert_lost(1);
    let mut got: Vec<String> = f.leases.iter().map(|l| l.id.task_id.clone()).collect();
    got.sort();
    ids.sort();
    assert_eq!(
        got, ids,
        "the re-send returns the batch the first run delivered"
    );
    // Nothing sits in the consumer's pending list beyond what it was handed.
    let stream = rig.direct.keyspace().queue(&queue).stream();
    type Summary = (u64, Option<String>, Option<String>, Vec<(String, u64)>);
    let pending: Summary = rig
        .direct
        .client()
        .xpending(stream, chronos_broker::GROUP, ())
        .await
        .expect("xpending");
    assert_eq!(pending.0, 3);
    // None of them was charged an attempt: each starts with retried 0 (max_retry 0 would
    // otherwise have archived them unrun).
    let leases: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    for o in rig.direct.start(&queue, &leases).await.expect("start") {
        assert!(
            matches!(&o, StartOutcome::Started(a) if a.retried == 0),
            "{o:?}"
        );
    }
}

#[tokio::test]
async fn start_whose_reply_is_lost_starts_once() {
    let rig = rig().await;
    let queue = q("default");
    Client::new(rig.direct.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = rig.via.open_reader().await.expect("reader");
    let f = rig
        .via
        .fetch(
            &mut reader,
            &queue,
            "w",
            &[],
            10,
            Duration::from_millis(200),
        )
        .await
        .expect("fetch");
    rig.lose_reply_of("start");
    let ids = [f.leases[0].id.clone()];
    let out = rig.via.start(&queue, &ids).await.expect("start re-sent");
    rig.assert_lost(1);
    assert!(
        matches!(&out[..], [StartOutcome::Started(a)] if a.retried == 0),
        "{out:?}"
    );
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active), (0, 1));
}

#[tokio::test]
async fn complete_whose_reply_is_lost_completes_once() {
    let rig = rig().await;
    let queue = q("default");
    let lease = rig.running(EnqueueOptions::new()).await;
    rig.lose_reply_of("complete");
    let done = [Completion {
        lease: lease.id,
        retention: None,
        result: None,
    }];
    // The re-send finds the task already completed and deleted: nothing left to do.
    assert_eq!(rig.via.complete(&queue, &done).await.expect("ack"), 0);
    rig.assert_lost(1);
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 1));
}

#[tokio::test]
async fn retry_whose_reply_is_lost_counts_one_attempt_and_says_so() {
    let rig = rig().await;
    let queue = q("default");
    let lease = rig.running(EnqueueOptions::new()).await;
    rig.lose_reply_of("retry");
    assert!(rig
        .via
        .retry(&lease.id, Duration::from_secs(60), "smtp down")
        .await
        .expect("retry"));
    rig.assert_lost(1);
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.active, stats.retry, stats.failed), (0, 1, 1));
    let key = rig.direct.keyspace().queue(&queue).task(&lease.id.task_id);
    let r: String = rig.direct.client().hget(key, "r").await.expect("hget");
    assert_eq!(r, "1");
}

#[tokio::test]
async fn dead_letter_whose_reply_is_lost_reports_what_happened() {
    for discard in [false, true] {
        let rig = rig().await;
        let queue = q("default");
        let mut opts = EnqueueOptions::new();
        if discard {
            opts = opts.discard_on_dead_letter();
        }
        let lease = rig.running(opts).await;
        rig.lose_reply_of("dead");
        let out = rig
            .via
            .dead_letter(&lease.id, "bad address", true)
            .await
            .expect("dead letter");
        rig.assert_lost(1);
        let want = if discard {
            DeadOutcome::Discarded
        } else {
            DeadOutcome::Archived
        };
        assert_eq!(out, want, "the re-send answers what the first run did");
        let stats = rig.direct.queue_stats(&queue).await.expect("stats");
        assert_eq!(
            (stats.active, stats.archived, stats.failed),
            (0, u64::from(!discard), 1)
        );
    }
}

#[tokio::test]
async fn requeue_forward_and_reclaim_whose_replies_are_lost_move_each_task_once() {
    let rig = rig().await;
    let queue = q("default");
    let client = Client::new(rig.direct.clone());
    client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = rig.via.open_reader().await.expect("reader");

    // requeue
    let f = rig
        .via
        .fetch(&mut reader, &queue, "w", &[], 1, Duration::from_millis(200))
        .await
        .expect("fetch");
    rig.lose_reply_of("requeue");
    let ids = [f.leases[0].id.clone()];
    rig.via.requeue(&queue, &ids).await.expect("requeue");
    rig.assert_lost(1);
    let stream = rig.direct.keyspace().queue(&queue).stream();
    let len: u64 = rig.direct.client().xlen(&stream).await.expect("xlen");
    assert_eq!(len, 1, "one entry after a re-sent requeue");

    // reclaim: a started delivery whose worker is gone
    take(
        &rig.via,
        &mut reader,
        &queue,
        "gone",
        1,
        Duration::from_millis(200),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    rig.lose_reply_of("reclaim");
    rig.via
        .reclaim_idle(&queue, Duration::from_millis(50), 10)
        .await
        .expect("reclaim");
    rig.assert_lost(2);
    let len: u64 = rig.direct.client().xlen(&stream).await.expect("xlen");
    assert_eq!(len, 1, "one entry after a re-sent reclaim");
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.failed), (1, 0, 0));

    // forward: a retry that falls due
    let f = take(
        &rig.via,
        &mut reader,
        &queue,
        "w",
        1,
        Duration::from_millis(200),
    )
    .await;
    assert_eq!(f.leases[0].envelope.as_ref().expect("decodes").retried, 1);
    rig.via
        .retry(&f.leases[0].id, Duration::from_millis(20), "again")
        .await
        .expect("retry");
    tokio::time::sleep(Duration::from_millis(40)).await;
    rig.lose_reply_of("forward");
    rig.via.forward_due(&queue, 100).await.expect("forward");
    rig.assert_lost(3);
    let len: u64 = rig.direct.client().xlen(&stream).await.expect("xlen");
    assert_eq!(len, 1, "one entry after a re-sent forward");
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.retry), (1, 0));
}

#[tokio::test]
async fn a_reclaim_dead_letter_whose_reply_is_lost_stays_in_the_outbox() {
    let rig = rig().await;
    let queue = q("default");
    let info = Client::new(rig.direct.clone())
        .enqueue(&email(1), EnqueueOptions::new().max_retry(0))
        .await
        .expect("enqueue");
    let mut reader = rig.via.open_reader().await.expect("reader");
    take(
        &rig.via,
        &mut reader,
        &queue,
        "gone",
        1,
        Duration::from_millis(200),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    rig.lose_reply_of("reclaim");
    let r = rig
        .via
        .reclaim_idle(&queue, Duration::from_millis(50), 10)
        .await
        .expect("reclaim");
    rig.assert_lost(1);
    // The re-sent call found nothing left to reclaim: its answer names no dead letter, but the
    // first run's outbox entry still does, so its group can still be told.
    assert!(r.dead.is_empty(), "{:?}", r.dead);
    let left = rig.direct.reclaimed_dead(&queue, 10).await.expect("outbox");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].task_id, info.id);
    assert!(left[0].envelope.is_ok());
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 1));
}

#[tokio::test]
async fn settle_and_fetch_whose_reply_is_lost_acks_once_and_returns_the_same_batch() {
    let rig = rig().await;
    let queue = q("default");
    let client = Client::new(rig.direct.clone());
    for n in 0..3 {
        client
            .enqueue(&email(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = rig.direct.open_reader().await.expect("reader");
    let first = take(&rig.direct, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    assert_eq!(first.leases.len(), 1);
    rig.lose_reply_of("claim");
    let done = [Settlement::completed(first.leases[0].id.clone())];
    let mut via_reader = rig.via.open_reader().await.expect("reader");
    let next = rig
        .via
        .fetch(&mut via_reader, &queue, "w", &done, 1, Duration::ZERO)
        .await
        .expect("re-sent");
    let acked = next.settled.iter().filter(|a| !a.is_stale()).count();
    rig.assert_lost(1);
    // The first run acked; the re-send acks nothing and hands back what the first run read.
    assert_eq!((acked, next.leases.len()), (0, 1));
    assert_ne!(next.leases[0].id.msg_id, first.leases[0].id.msg_id);
    let stream = rig.direct.keyspace().queue(&queue).stream();
    type Summary = (u64, Option<String>, Option<String>, Vec<(String, u64)>);
    let pending: Summary = rig
        .direct
        .client()
        .xpending(stream, chronos_broker::GROUP, ())
        .await
        .expect("xpending");
    assert_eq!(pending.0, 1, "only the delivery handed back is pending");
    // Its count was owed once: the two calls that drain the queue pay exactly three.
    let mut held = next.leases[0].id.clone();
    for more in [1, 0] {
        let done = [Settlement::completed(held.clone())];
        let f = rig
            .direct
            .fetch(&mut reader, &queue, "w", &done, 1, Duration::ZERO)
            .await
            .expect("ack");
        let acked = f.settled.iter().filter(|a| !a.is_stale()).count();
        assert_eq!((acked, f.leases.len()), (1, more));
        if let Some(l) = f.leases.first() {
            held = l.id.clone();
        }
    }
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 3));
}
