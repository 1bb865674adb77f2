//! Priority levels inside one queue: the order of delivery, aging, an operator's change of
//! level, the level kept through every transition, the inspector's view, and lost replies.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{HashesInterface, KeysInterface, StreamsInterface};
use chronos_broker::{
    ActionOutcome, Client, Completion, Consume, EnqueueOptions, Inspect, Maintain, Operate,
    Priority, QueueName, RedisBroker, SettleExt, TaskAction, TaskFilter, TaskState,
};
use common::{broker, email, rig, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

fn level(n: u8) -> Priority {
    Priority::level(n).expect("level")
}

/// Enqueues `email(n)` at level `l` and returns the task id.
async fn put(b: &RedisBroker, n: u32, l: u8, opts: EnqueueOptions) -> String {
    Client::new(b.clone())
        .enqueue(&email(n), opts.priority(level(l)))
        .await
        .expect("enqueue")
        .id
}

/// The payload numbers of what one fetch of up to `count` delivers, in order.
async fn fetch_ns(b: &RedisBroker, queue: &QueueName, count: usize) -> Vec<u32> {
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(b, &mut reader, queue, "w", count, Duration::ZERO).await;
    f.leases
        .iter()
        .map(|l| {
            let env = l.envelope.as_ref().expect("envelope");
            rmp_serde::from_slice::<common::Email>(&env.payload)
                .expect("payload")
                .n
        })
        .collect()
}

/// Sets the queue's aging bound in its settings hash, as an operator's settings change does.
async fn set_aging(b: &RedisBroker, queue: &QueueName, ms: u64) {
    let key = b.keyspace().queue(queue).settings();
    let _: i64 = b
        .client()
        .hset(key, ("aging_ms", ms.to_string()))
        .await
        .expect("hset");
}

#[tokio::test]
async fn ready_tasks_come_out_most_urgent_level_first_and_in_order_inside_one() {
    let producer = broker().await;
    let queue = q("default");
    let levels = [9u8, 5, 0, 2];
    for n in 0..16u32 {
        put(&producer, n, levels[n as usize % 4], EnqueueOptions::new()).await;
    }
    // A worker process that never saw the queue: its first fetch learns the levels and still
    // delivers in order.
    let worker = common::broker_in(producer.keyspace().namespace()).await;
    // One at a time (each fetch must pick the most urgent), then the rest in one batch. The
    // main stream holds the entries new levels left, between tasks.
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(fetch_ns(&worker, &queue, 1).await);
    }
    got.extend(fetch_ns(&worker, &queue, 100).await);
    let mut want: Vec<u32> = (0..16).collect();
    let rank = |n: &u32| levels[*n as usize % 4];
    want.sort_by_key(|n| (rank(n), *n));
    assert_eq!(got, want);
    let stats = worker.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active), (0, 16), "{stats:?}");
    let per: Vec<(u8, u64)> = stats
        .levels
        .iter()
        .map(|l| (l.priority.get(), l.active))
        .collect();
    assert_eq!(per, vec![(0, 4), (2, 4), (5, 4), (9, 4)]);
}

#[tokio::test]
async fn a_task_waiting_past_the_aging_bound_goes_ahead_of_newer_urgent_work() {
    let b = broker().await;
    let queue = q("default");
    set_aging(&b, &queue, 300).await;
    put(&b, 1, 9, EnqueueOptions::new()).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    for n in 10..15 {
        put(&b, n, 0, EnqueueOptions::new()).await;
    }
    assert_eq!(
        fetch_ns(&b, &queue, 1).await,
        vec![1],
        "the aged task first"
    );
    assert_eq!(fetch_ns(&b, &queue, 10).await, vec![10, 11, 12, 13, 14]);

    // With a bound far away, urgency alone decides.
    set_aging(&b, &queue, 3_600_000).await;
    put(&b, 2, 9, EnqueueOptions::new()).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    put(&b, 20, 0, EnqueueOptions::new()).await;
    assert_eq!(fetch_ns(&b, &queue, 1).await, vec![20]);
}

#[tokio::test]
async fn a_lifo_task_waiting_past_the_aging_bound_goes_ahead_of_newer_lifo_work() {
    let b = broker().await;
    let queue = q("default");
    set_aging(&b, &queue, 300).await;
    put(&b, 1, 9, EnqueueOptions::new().lifo()).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    for n in 10..13 {
        put(&b, n, 0, EnqueueOptions::new().lifo()).await;
    }
    // Newest first would starve task 1 for as long as new LIFO work comes.
    assert_eq!(
        fetch_ns(&b, &queue, 1).await,
        vec![1],
        "the aged LIFO task first"
    );
    assert_eq!(fetch_ns(&b, &queue, 10).await, vec![12, 11, 10]);
}

#[tokio::test]
async fn an_operator_changes_the_level_of_a_waiting_task() {
    let b = broker().await;
    let queue = q("default");
    put(&b, 1, 9, EnqueueOptions::new()).await;
    let second = put(&b, 2, 9, EnqueueOptions::new()).await;
    // A plain task (the default level, no record) can be moved too.
    let plain = Client::new(b.clone())
        .enqueue(&email(3), EnqueueOptions::new())
        .await
        .expect("enqueue")
        .id;
    let later = put(
        &b,
        4,
        5,
        EnqueueOptions::new().process_in(Duration::from_secs(3600)),
    )
    .await;
    assert_eq!(
        b.prioritize(&queue, &second, level(0)).await.expect("move"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.prioritize(&queue, &second, level(0))
            .await
            .expect("again"),
        ActionOutcome::Already
    );
    assert_eq!(
        b.prioritize(&queue, &plain, level(1)).await.expect("plain"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.prioritize(&queue, &later, Priority::HIGHEST)
            .await
            .expect("scheduled"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.prioritize(&queue, "nope", level(1))
            .await
            .expect("missing"),
        ActionOutcome::NotFound
    );
    let rec = b.task(&queue, &later).await.expect("task").expect("there");
    assert_eq!(
        (rec.state, rec.priority),
        (TaskState::Scheduled, Priority::HIGHEST)
    );
    let rec = b.task(&queue, &second).await.expect("task").expect("there");
    assert_eq!((rec.state, rec.priority), (TaskState::Pending, level(0)));
    assert!(rec.envelope.is_ok(), "{:?}", rec.envelope);
    assert_eq!(fetch_ns(&b, &queue, 10).await, vec![2, 3, 1]);
    // Running now: refused, nothing changes.
    assert_eq!(
        b.prioritize(&queue, &second, level(9))
            .await
            .expect("active"),
        ActionOutcome::Refused(Some(TaskState::Active))
    );
}

#[tokio::test]
async fn a_task_keeps_its_level_through_retry_reclaim_dead_letter_and_run_now() {
    let b = broker().await;
    let queue = q("default");
    let id = put(&b, 1, 2, EnqueueOptions::new().max_retry(3)).await;
    let mut reader = b.open_reader().await.expect("reader");
    let lane_of = |f: &chronos_broker::Fetched| {
        assert_eq!(f.leases.len(), 1, "{f:?}");
        f.leases[0].id.clone()
    };
    // Retry: back through the retry set and the forwarder, into level 2's stream.
    let lease = lane_of(&take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await);
    assert!(lease.msg_id.starts_with("2/"), "{lease:?}");
    // The consumer's deliveries of every level count as held (the janitor and the recoverer
    // read this), and it is not removed while it holds one.
    let held: Vec<(String, u64)> = b
        .consumers(&queue)
        .await
        .expect("consumers")
        .into_iter()
        .map(|(n, p, _)| (n, p))
        .collect();
    assert_eq!(held, vec![("w".to_string(), 1)]);
    assert!(!b.remove_consumer(&queue, "w").await.expect("remove"));
    assert_eq!(b.consumers(&queue).await.expect("consumers").len(), 1);
    assert!(b
        .retry(&lease, Duration::ZERO, "boom")
        .await
        .expect("retry"));
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    put(&b, 9, 5, EnqueueOptions::new()).await;
    let lease = lane_of(&take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await);
    assert_eq!(lease.task_id, id, "the retried task is still more urgent");
    assert!(lease.msg_id.starts_with("2/"), "{lease:?}");
    // Reclaim of a lost worker's delivery: requeued into its level's stream.
    let r = b
        .reclaim_idle(&queue, Duration::ZERO, 100)
        .await
        .expect("reclaim");
    assert_eq!(r.requeued, 1, "{r:?}");
    let lease = lane_of(&take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await);
    assert_eq!(lease.task_id, id);
    assert!(lease.msg_id.starts_with("2/"), "{lease:?}");
    // Dead letter, then an operator's run-now: pending again at level 2.
    b.dead_letter(&lease, "give up", true).await.expect("dead");
    assert_eq!(
        b.act(&queue, &id, TaskAction::RunNow).await.expect("run"),
        ActionOutcome::Done
    );
    let rec = b.task(&queue, &id).await.expect("task").expect("there");
    assert_eq!((rec.state, rec.priority), (TaskState::Pending, level(2)));
    let lease = lane_of(&take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await);
    assert_eq!(lease.task_id, id);
    assert!(lease.msg_id.starts_with("2/"), "{lease:?}");
    // The lease is honoured by the heartbeat and completes.
    let owned = b
        .keep_alive(&queue, "w", std::slice::from_ref(&lease.msg_id), &[])
        .await
        .expect("extend");
    assert_eq!(owned, vec![lease.msg_id.clone()]);
    let done = Completion {
        lease: lease.clone(),
        retention: None,
        result: None,
    };
    assert_eq!(b.complete(&queue, &[done]).await.expect("complete"), 1);
    assert!(b.task(&queue, &id).await.expect("task").is_none());
}

#[tokio::test]
async fn the_inspector_lists_and_deletes_across_levels() {
    let b = broker().await;
    let queue = q("default");
    let mut ids = Vec::new();
    for (n, l) in [(1, 9u8), (2, 5), (3, 0)] {
        ids.push(put(&b, n, l, EnqueueOptions::new()).await);
    }
    let listed: Vec<String> = b
        .list_tasks(&queue, TaskState::Pending, 0, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, vec![ids[2].clone(), ids[1].clone(), ids[0].clone()]);
    // Pages of one task walk from one level's stream to the next.
    let mut cursor = None;
    let mut paged = Vec::new();
    loop {
        let page = b
            .list_page(
                &queue,
                TaskState::Pending,
                &TaskFilter::default(),
                cursor.as_deref(),
                1,
            )
            .await
            .expect("page");
        paged.extend(page.tasks.into_iter().map(|t| t.id));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, listed);
    assert_eq!(
        b.act(&queue, &ids[2], TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::Done
    );
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.pending, 2, "{stats:?}");
    assert!(stats
        .levels
        .iter()
        .all(|l| l.priority != level(0) || l.pending == 0));
    set_aging(&b, &queue, 1000).await;
    b.delete_queue(&queue, true).await.expect("delete queue");
    let keys = b.keyspace().queue(&queue);
    let mut all = keys.lanes();
    all.push(keys.settings());
    let left: i64 = b.client().exists(all).await.expect("exists");
    assert_eq!(
        left, 0,
        "every level's stream, the level hash and the settings are gone"
    );
}

#[tokio::test]
async fn a_blocked_reader_wakes_for_a_queues_first_level() {
    // A server of its own: the test waits until Redis counts exactly one blocked client.
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let b = RedisBroker::builder(redis.url())
        .connect()
        .await
        .expect("connect");
    let queue = q("default");
    b.ensure_queue(&queue).await.expect("queue");
    let mut reader = b.open_reader().await.expect("reader");
    let waiting = {
        let b = b.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let f = b
                .fetch(&mut reader, &queue, "w", &[], 10, Duration::from_secs(4))
                .await
                .expect("fetch");
            (f, reader)
        })
    };
    // Once the read blocks, a task of a level the queue never had.
    chronos_testkit::eventually(Duration::from_secs(5), "the read blocks", || async {
        use chronos_broker::fred::prelude::*;
        let info: String = b
            .client()
            .info(Some(chronos_broker::fred::types::InfoKind::Clients))
            .await
            .expect("info");
        info.lines().any(|l| l.trim() == "blocked_clients:1")
    })
    .await;
    put(&b, 7, 1, EnqueueOptions::new()).await;
    let (f, mut reader) = waiting.await.expect("join");
    assert_eq!(
        (f.leases.len(), f.dropped),
        (0, 1),
        "woken by the level's marker entry, not by the block's end: {f:?}"
    );
    let f = take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await;
    assert_eq!(f.leases.len(), 1);
    assert!(f.leases[0].id.msg_id.starts_with("1/"));
}

#[tokio::test]
async fn prioritize_and_a_level_fetch_whose_replies_are_lost_act_once() {
    let rig = rig().await;
    let queue = q("default");
    let a = put(&rig.direct, 1, 9, EnqueueOptions::new()).await;
    put(&rig.direct, 2, 9, EnqueueOptions::new()).await;
    rig.lose_reply_of("prioritize");
    assert_eq!(
        rig.via
            .prioritize(&queue, &a, level(3))
            .await
            .expect("re-sent"),
        ActionOutcome::Already,
        "the re-send finds the first run's work done"
    );
    rig.assert_lost(1);
    let keys = rig.direct.keyspace().queue(&queue);
    for l in [3, 9] {
        let n: u64 = rig
            .direct
            .client()
            .xlen(keys.lane(Some(l)))
            .await
            .expect("xlen");
        assert_eq!(n, 1, "level {l}");
    }

    // A fetch through the proxy learns the levels, then its claim's reply is lost: the re-send
    // returns the same level deliveries from the receipt.
    let mut reader = rig.via.open_reader().await.expect("reader");
    let first = rig
        .via
        .fetch(&mut reader, &queue, "w", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(first.leases.len(), 1);
    rig.lose_reply_of("claim");
    let second = rig
        .via
        .fetch(&mut reader, &queue, "w", &[], 1, Duration::ZERO)
        .await
        .expect("fetch re-sent");
    rig.assert_lost(2);
    assert_eq!(second.leases.len(), 1, "{second:?}");
    assert!(second.leases[0].id.msg_id.starts_with("9/"));
    let pending: u64 = {
        type Summary = (u64, Option<String>, Option<String>, Vec<(String, u64)>);
        let s: Summary = rig
            .direct
            .client()
            .xpending(keys.lane(Some(9)), chronos_broker::GROUP, ())
            .await
            .expect("xpending");
        s.0
    };
    assert_eq!(pending, 1, "nothing stranded beyond the one delivered");
}

#[tokio::test]
async fn retries_go_ahead_of_the_backlog_at_the_queues_retry_level() {
    let b = broker().await;
    let queue = q("default");
    let key = b.keyspace().queue(&queue).settings();
    let _: i64 = b
        .client()
        .hset(key, ("retry_level", "1"))
        .await
        .expect("hset");
    let failing = put(&b, 1, 5, EnqueueOptions::new().task_id("f1")).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w", 1, Duration::ZERO).await;
    assert_eq!(f.leases[0].id.task_id, failing);
    for n in 10..15 {
        put(&b, n, 5, EnqueueOptions::new()).await;
    }
    assert!(b
        .retry(&f.leases[0].id, Duration::ZERO, "boom")
        .await
        .expect("retry"));
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 1);
    assert_eq!(fetch_ns(&b, &queue, 1).await, vec![1], "the retry first");
    let rec = b
        .task(&queue, &failing)
        .await
        .expect("task")
        .expect("there");
    assert_eq!(rec.priority, level(1));
    assert_eq!(fetch_ns(&b, &queue, 10).await, vec![10, 11, 12, 13, 14]);
}
