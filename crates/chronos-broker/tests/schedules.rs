//! The scheduler's side of the Redis broker, against a real Redis: the leader lock and fences,
//! fire (dedup, counters, enqueue options, lost replies), fire state and the registry.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use chronos_broker::fred::prelude::*;
use chronos_broker::FireOutcome::*;
use chronos_broker::{
    encode_args, now_ms, DefSpec, EnqueueOptions, FireState, Inspect, NewTask, QueueName,
    RedisBroker, ScheduleDef, ScheduleEntry, SchedulerMetrics, Schedules, TaskState, Trigger,
};
use common::{broker, email};

fn trigger_with(schedule: &str, at_ms: i64, opts: EnqueueOptions) -> Trigger {
    let opts = opts.task_id(format!("{schedule}:{}", at_ms / 1000));
    let payload = encode_args(&email(1)).expect("encode");
    Trigger {
        schedule_id: schedule.into(),
        at_ms,
        task: NewTask::build("email", payload, opts, now_ms()).expect("task"),
        forbid_overlap: false,
        prev_task_id: None,
    }
}

fn trigger(schedule: &str, at_ms: i64, queue: &str) -> Trigger {
    trigger_with(schedule, at_ms, EnqueueOptions::new().queue(queue))
}

async fn leader(b: &RedisBroker, token: &str) -> u64 {
    b.acquire_leadership(token, token, Duration::from_secs(30), 0)
        .await
        .expect("acquire")
        .expect("leader")
}

#[tokio::test]
async fn fire_is_fenced_deduplicated_and_monotonic() {
    let b = broker().await;
    let queue = QueueName::new("sched").expect("queue");
    let ttl = Duration::from_secs(30);
    let e1 = b
        .acquire_leadership("t1", "one", ttl, 0)
        .await
        .expect("acquire")
        .expect("leader");
    // A re-sent acquire (its first reply lost) is still a win, with the same epoch.
    assert_eq!(
        b.acquire_leadership("t1", "one", ttl, 0)
            .await
            .expect("acquire"),
        Some(e1)
    );
    assert_eq!(
        b.acquire_leadership("t2", "two", ttl, 0)
            .await
            .expect("acquire"),
        None
    );
    // Two leaders in split-brain fire the same trigger at once: one enqueue.
    let (a, c) = tokio::join!(
        b.fire(&queue, e1, vec![trigger("s", 10_000, "sched")], ttl, 0),
        b.fire(&queue, e1, vec![trigger("s", 10_000, "sched")], ttl, 0),
    );
    let mut outcomes = [a.expect("fire")[0], c.expect("fire")[0]];
    outcomes.sort_by_key(|o| *o != Fired);
    assert_eq!(outcomes, [Fired, Duplicate]);
    // An older trigger than the last fired is refused too (last fired only moves forward).
    assert_eq!(
        b.fire(&queue, e1, vec![trigger("s", 9_000, "sched")], ttl, 0)
            .await
            .expect("fire"),
        vec![Duplicate]
    );
    // A new leader takes over and raises the fence: the deposed one is refused from then on.
    assert!(b.resign_leadership("t1").await.expect("resign"));
    let e2 = b
        .acquire_leadership("t2", "two", ttl, 0)
        .await
        .expect("acquire")
        .expect("leader");
    assert!(e2 > e1);
    assert_eq!(b.fence(&queue, e2).await.expect("fence"), e2);
    assert_eq!(
        b.fence(&queue, e1).await.expect("fence"),
        e2,
        "a fence never goes down"
    );
    assert_eq!(
        b.fire(&queue, e1, vec![trigger("s", 11_000, "sched")], ttl, 0)
            .await
            .expect("fire"),
        vec![Stale]
    );
    assert_eq!(
        b.fire(&queue, e2, vec![trigger("s", 11_000, "sched")], ttl, 0)
            .await
            .expect("fire"),
        vec![Fired]
    );
    let state = b
        .fire_state(&queue, &["s".to_string(), "other".to_string()])
        .await
        .expect("state");
    assert_eq!(
        (state[0].last_fired_ms, state[0].last_task_id.as_deref()),
        (Some(11_000), Some("s:11"))
    );
    assert_eq!(state[1], FireState::default());
    assert_eq!(b.queue_stats(&queue).await.expect("stats").pending, 2);
    let info = b.leader().await.expect("leader").expect("held");
    assert_eq!((info.id.as_str(), info.epoch), ("two", e2));
    assert!((now_ms() - info.since_ms).abs() < 60_000, "{info:?}");
}

#[tokio::test]
async fn epoch_floor_invalid_triggers_and_first_registration() {
    let b = broker().await; // 4096-byte payload limit
    let queue = QueueName::new("floor").expect("queue");
    let ttl = Duration::from_secs(30);
    // The epoch counter was lost while a fence of 40 survived: the next epoch passes the floor.
    let e = b
        .acquire_leadership("t", "one", ttl, 40)
        .await
        .expect("acquire")
        .expect("leader");
    assert_eq!(e, 41);
    // A trigger whose payload is over the limit is refused on its own; the others fire.
    let mut big = trigger("big", 5_000, "floor");
    big.task.envelope.payload = vec![0; 5000];
    let out = b
        .fire(
            &queue,
            e,
            vec![
                trigger("a", 5_000, "floor"),
                big,
                trigger("c", 5_000, "floor"),
            ],
            ttl,
            0,
        )
        .await;
    assert_eq!(out.expect("fire"), vec![Fired, Invalid, Fired]);
    assert_eq!(b.scheduler_metrics().await.expect("metrics").missed, 1);
    // First registrations are marked once, at Redis' clock, and never moved.
    let before = now_ms();
    let first = b
        .register_schedules(&queue, &["a".to_string(), "w".to_string()])
        .await
        .expect("mark");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = b
        .register_schedules(&queue, &["w".to_string()])
        .await
        .expect("mark");
    assert_eq!(again, vec![first[1]]);
    assert!((first[1] - before).abs() < 5_000, "{first:?} vs {before}");
    let st = b
        .fire_state(&queue, &["w".to_string()])
        .await
        .expect("state");
    assert_eq!(
        (st[0].registered_ms, st[0].last_fired_ms),
        (Some(first[1]), None)
    );
}

/// Fired, suppressed and missed counts move in the same script as the triggers: one fire call,
/// no extra round trip, and the cluster-wide sum covers every queue.
#[tokio::test]
async fn fire_counts_its_outcomes_and_the_callers_missed_triggers() {
    let b = broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    let q1 = QueueName::new("m1").expect("queue");
    let q2 = QueueName::new("m2").expect("queue");
    let out = b
        .fire(
            &q1,
            e,
            vec![trigger("a", 1_000, "m1"), trigger("a", 1_000, "m1")],
            ttl,
            3,
        )
        .await
        .expect("fire");
    assert_eq!(out, vec![Fired, Duplicate]);
    // A call with only a missed count (a Skip policy's catch-up) records it too.
    assert_eq!(b.fire(&q2, e, vec![], ttl, 2).await.expect("fire"), vec![]);
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!(
        m,
        SchedulerMetrics {
            fired: 1,
            missed: 5,
            suppressed: 1
        }
    );
}

/// A fire whose reply is lost runs once, is re-sent by the client after the reconnect, and the
/// re-sent call answers what the first did: one task, counted once, reported as fired.
#[tokio::test]
async fn fire_with_a_lost_reply_enqueues_and_counts_once() {
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = chronos_testkit::TcpProxy::start(target)
        .await
        .expect("proxy");
    let b = RedisBroker::builder(proxy.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let e = leader(&b, "t").await;
    let queue = QueueName::new("lost").expect("queue");
    let sha = b
        .script_shas()
        .into_iter()
        .find(|(n, _)| *n == "fire")
        .map(|(_, s)| s)
        .expect("fire script");
    proxy.drop_reply_to(sha.as_bytes());
    let out = b
        .fire(
            &queue,
            e,
            vec![trigger("s", 7_000, "lost"), trigger("u", 7_000, "lost")],
            Duration::from_secs(30),
            4,
        )
        .await
        .expect("re-sent fire");
    assert_eq!(proxy.dropped_replies(), 1, "the reply was really lost");
    assert_eq!(out, vec![Fired, Fired], "the first run's outcomes");
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.pending, 2, "enqueued once each");
    assert_eq!(
        b.scheduler_metrics().await.expect("metrics"),
        SchedulerMetrics {
            fired: 2,
            missed: 4,
            suppressed: 0
        },
        "counted once"
    );
}

/// Unique lock, discard-on-dead-letter, deadline and headers of the schedule's enqueue options
/// reach the fired task.
#[tokio::test]
async fn fire_honours_unique_discard_deadline_and_headers() {
    let b = broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    let queue = QueueName::new("opts").expect("queue");
    let opts = EnqueueOptions::new()
        .queue("opts")
        .unique(Duration::from_secs(60))
        .discard_on_dead_letter()
        .header("team", "ops");
    let mut first = trigger_with("u", 1_000, opts.clone());
    first.task.envelope.deadline_ms = Some(now_ms() + 60_000);
    assert_eq!(
        b.fire(&queue, e, vec![first], ttl, 0).await.expect("fire"),
        vec![Fired]
    );
    let rec = b.task(&queue, "u:1").await.expect("task").expect("stored");
    let env = rec.envelope.expect("decodes");
    assert_eq!(env.headers.get("team").map(String::as_str), Some("ops"));
    assert!(env.deadline_ms.is_some());
    assert_eq!(env.dead_letter, chronos_broker::DeadLetter::Discard);
    let hash: std::collections::HashMap<String, String> = b
        .client()
        .hgetall(b.keyspace().queue(&queue).task("u:1"))
        .await
        .expect("hash");
    assert_eq!(hash.get("dl").map(String::as_str), Some("1"));
    assert!(
        hash.contains_key("u"),
        "the task holds its unique lock: {hash:?}"
    );
    // The next trigger finds the lock held by the unfinished first run: skipped, suppressed.
    assert_eq!(
        b.fire(&queue, e, vec![trigger_with("u", 2_000, opts)], ttl, 0)
            .await
            .expect("fire"),
        vec![Unique]
    );
    // A trigger fired after its deadline (by Redis' clock) is skipped and counted missed.
    let mut late = trigger("late", 3_000, "opts");
    late.task.envelope.deadline_ms = Some(now_ms() - 1_000);
    assert_eq!(
        b.fire(&queue, e, vec![late], ttl, 0).await.expect("fire"),
        vec![Expired]
    );
    assert_eq!(b.queue_stats(&queue).await.expect("stats").pending, 1);
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!((m.fired, m.suppressed, m.missed), (1, 1, 1));
}

/// The overlap check reads the schedule's previous task, which the script must declare: a
/// wrong or missing hint costs one more round trip, never a wrong answer.
#[tokio::test]
async fn overlap_check_finds_the_previous_task_without_a_correct_hint() {
    let b = broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    let queue = QueueName::new("solo").expect("queue");
    let solo = |at: i64, hint: Option<&str>| {
        let mut t = trigger("s", at, "solo");
        t.forbid_overlap = true;
        t.prev_task_id = hint.map(str::to_string);
        t
    };
    assert_eq!(
        b.fire(&queue, e, vec![solo(1_000, None)], ttl, 0)
            .await
            .expect("fire"),
        vec![Fired]
    );
    // No hint, then a wrong one: the previous task s:1 is still pending either way.
    for hint in [None, Some("s:0")] {
        let at = if hint.is_none() { 2_000 } else { 3_000 };
        assert_eq!(
            b.fire(&queue, e, vec![solo(at, hint)], ttl, 0)
                .await
                .expect("fire"),
            vec![Overlap],
            "{hint:?}"
        );
    }
    // Once the previous task is gone (completed and deleted), the next trigger fires.
    let _: i64 = b
        .client()
        .del(b.keyspace().queue(&queue).task("s:1"))
        .await
        .expect("del");
    assert_eq!(
        b.fire(
            &queue,
            e,
            vec![solo(4_000, Some("s:1")), solo(5_000, None)],
            ttl,
            0
        )
        .await
        .expect("fire"),
        vec![Fired, Overlap],
        "within one call the first trigger's task is the second's previous run"
    );
    assert_eq!(
        b.task(&queue, "s:4").await.expect("task").map(|r| r.state),
        Some(TaskState::Pending)
    );
}

#[tokio::test]
async fn each_fire_and_skip_is_kept_in_the_schedules_history_newest_first_and_capped() {
    use chronos_broker::{FireRecord, ManageSchedules, FIRES_KEPT};
    let b = broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    let queue = QueueName::new("kept").expect("queue");
    let solo = |at: i64| {
        let mut t = trigger("h", at, "kept");
        t.forbid_overlap = true;
        t
    };
    assert!(b
        .fire_history(&queue, "h")
        .await
        .expect("history")
        .is_empty());
    // Fired, then skipped by the overlap policy, then a duplicate (not kept), then a run-now.
    let out = b
        .fire(&queue, e, vec![solo(1_000), solo(2_000)], ttl, 0)
        .await
        .expect("fire");
    assert_eq!(out, vec![Fired, Overlap]);
    assert_eq!(
        b.fire(&queue, e, vec![solo(2_000)], ttl, 0)
            .await
            .expect("fire"),
        vec![Duplicate]
    );
    let mut run = trigger("h", 0, "kept").task;
    run.envelope.id = "h:run-1".into();
    assert_eq!(
        b.run_schedule(&queue, "h", "run-1", run)
            .await
            .expect("run"),
        Fired
    );
    let history = b.fire_history(&queue, "h").await.expect("history");
    let seen: Vec<(chronos_broker::FireOutcome, bool, &str)> = history
        .iter()
        .map(|r| (r.outcome, r.run_now, r.task_id.as_str()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (Fired, true, "h:run-1"),
            (Overlap, false, "h:2"),
            (Fired, false, "h:1"),
        ]
    );
    assert_eq!(history[2].at_ms, 1_000);
    assert!(
        history[0].at_ms > 1_000_000_000_000,
        "a run-now is kept at Redis' time"
    );
    // Capped: only the newest FIRES_KEPT are kept.
    let many: Vec<Trigger> = (0..FIRES_KEPT as i64 + 5)
        .map(|i| trigger("h", 10_000 + i * 1_000, "kept"))
        .collect();
    b.fire(&queue, e, many, ttl, 0).await.expect("fire");
    let history = b.fire_history(&queue, "h").await.expect("history");
    assert_eq!(history.len(), FIRES_KEPT);
    assert_eq!(history[0].at_ms, 10_000 + (FIRES_KEPT as i64 + 4) * 1_000);
    // A damaged history reads as none, and the next fire starts it afresh.
    let key = format!("{}sched:fires", b.keyspace().queue(&queue).prefix());
    let _: i64 = b
        .client()
        .hset(&key, ("h", "not a history \u{1}"))
        .await
        .expect("hset");
    assert!(b
        .fire_history(&queue, "h")
        .await
        .expect("history")
        .is_empty());
    b.fire(&queue, e, vec![trigger("h", 100_000, "kept")], ttl, 0)
        .await
        .expect("fire");
    assert_eq!(
        b.fire_history(&queue, "h").await.expect("history"),
        vec![FireRecord {
            at_ms: 100_000,
            outcome: Fired,
            run_now: false,
            task_id: "h:100".into(),
        }]
    );
    // Forgotten with the fire state.
    b.forget_fire_state(&queue, &["h".to_string()])
        .await
        .expect("forget");
    assert!(b
        .fire_history(&queue, "h")
        .await
        .expect("history")
        .is_empty());
}

fn entry(id: &str, queue: &str, every_ms: Option<u64>) -> ScheduleEntry {
    ScheduleEntry {
        id: id.into(),
        spec: "every 1s".into(),
        zone: "UTC".into(),
        queue: queue.into(),
        kind: "email".into(),
        next_run_ms: Some(1),
        every_ms,
        last_fired_ms: None,
        last_task_id: None,
        registered_by: "i1".into(),
        last_seen_ms: 0,
        stale: false,
        source: chronos_broker::ScheduleSource::Code,
        paused: false,
    }
}

/// The registry keeps entries until no live instance registers them; pruning then removes the
/// entry and the schedule's fire state, not only when someone reads the registry.
#[tokio::test]
async fn registry_liveness_and_pruning_of_forgotten_schedules() {
    let b = broker().await;
    let e = leader(&b, "t").await;
    let queue = QueueName::new("reg").expect("queue");
    // An instance the registry does not know is told to write its entries.
    assert!(!b.publish_schedules("i1", &[]).await.expect("mark alive"));
    assert!(b
        .publish_schedules(
            "i1",
            &[entry("keep", "reg", Some(1000)), entry("gone", "reg", None)]
        )
        .await
        .expect("publish"));
    assert!(b
        .publish_schedules("i2", &[entry("keep", "reg", Some(1000))])
        .await
        .expect("publish"));
    assert!(b.publish_schedules("i1", &[]).await.expect("mark alive"));
    b.register_schedules(&queue, &["keep".to_string(), "gone".to_string()])
        .await
        .expect("register");
    for id in ["keep", "gone"] {
        b.fire(
            &queue,
            e,
            vec![trigger(id, 1_000, "reg")],
            Duration::from_secs(30),
            0,
        )
        .await
        .expect("fire");
    }
    let listed = b
        .schedules(Duration::from_secs(15), Duration::from_secs(3600))
        .await
        .expect("list");
    assert_eq!(listed.len(), 2);
    let keep = listed.iter().find(|e| e.id == "keep").expect("keep");
    // Readers compute an interval's next run; the stored one (1) is long past.
    assert!(
        keep.next_run_ms.is_some_and(|n| n > now_ms() - 1_000),
        "{keep:?}"
    );
    assert_eq!(keep.last_fired_ms, Some(1_000));
    assert!(!keep.stale);

    // Entries of an older version name no instance: a full prune keeps the one its writer
    // still refreshes and removes the one nobody refreshed for `remove_after`.
    let registry = b.keyspace().tagged("scheduler", "registry");
    for (id, seen) in [
        ("legacy-live", now_ms()),
        ("legacy-gone", now_ms() - 7_200_000),
    ] {
        let mut e = entry(id, "reg", None);
        e.last_seen_ms = seen;
        let _: i64 = b
            .client()
            .hset(&registry, (id, e.encode().expect("encode")))
            .await
            .expect("seed");
    }
    assert_eq!(
        b.prune_schedules(Duration::from_secs(3600), true)
            .await
            .expect("prune"),
        vec!["legacy-gone".to_string()]
    );
    let _: i64 = b
        .client()
        .hdel(&registry, "legacy-live")
        .await
        .expect("del");
    // Nothing forgotten: a prune removes nothing.
    assert!(b
        .prune_schedules(Duration::from_secs(3600), true)
        .await
        .expect("prune")
        .is_empty());
    // i1 goes silent; i2 stays alive. After `remove_after`, i1 is forgotten, and so is the
    // schedule only it registered, with its fire state; the shared one stays.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(b.publish_schedules("i2", &[]).await.expect("mark alive"));
    let pruned = b
        .prune_schedules(Duration::from_millis(200), false)
        .await
        .expect("prune");
    assert_eq!(pruned, vec!["gone".to_string()]);
    let st = b
        .fire_state(&queue, &["keep".to_string(), "gone".to_string()])
        .await
        .expect("state");
    assert!(st[0].last_fired_ms.is_some() && st[0].registered_ms.is_some());
    assert_eq!(
        st[1],
        FireState::default(),
        "the forgotten id's fire state is gone"
    );
    let listed = b
        .schedules(Duration::from_secs(15), Duration::from_secs(3600))
        .await
        .expect("list");
    assert_eq!(
        listed.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        vec!["keep"]
    );
    // The forgotten instance learns it must write its entries again.
    assert!(!b.publish_schedules("i1", &[]).await.expect("mark alive"));
}

fn def(id: &str) -> ScheduleDef {
    ScheduleDef {
        id: id.into(),
        queue: "defs".into(),
        kind: "email".into(),
        payload: encode_args(&email(7)).expect("encode"),
        spec: DefSpec::Every { every_ms: 1000 },
        describe: "every 1s".into(),
        max_retry: Some(2),
        timeout_ms: None,
        unique_ms: None,
        dedup: None,
        retention_ms: None,
        deadline_after_ms: None,
        discard_on_dead_letter: false,
        headers: Default::default(),
        misfire: None,
        forbid_overlap: false,
        paused: false,
        created_ms: 0,
        updated_ms: 0,
        active_since_ms: 0,
    }
}

/// A code schedule's definition is read back for the ids live instances register (minus those
/// the caller knows), and is pruned with the last instance that registered it.
#[tokio::test]
async fn code_schedule_definitions_follow_the_instances_that_register_them() {
    let b = broker().await;
    leader(&b, "t").await;
    b.publish_schedules("a", &[entry("mine", "defs", Some(1000))])
        .await
        .expect("publish a");
    b.publish_schedules(
        "b",
        &[
            entry("mine", "defs", Some(1000)),
            entry("theirs", "defs", Some(1000)),
        ],
    )
    .await
    .expect("publish b");
    b.publish_schedule_defs(&[def("mine"), def("theirs")])
        .await
        .expect("defs");
    // Idempotent: a re-sent call writes the same.
    b.publish_schedule_defs(&[def("theirs")])
        .await
        .expect("defs again");
    let read = b
        .registered_defs("c", Duration::from_secs(15), &["mine".to_string()])
        .await
        .expect("read");
    assert_eq!(read, vec![def("theirs")]);
    // What the caller registers itself is not sent back.
    assert!(b
        .registered_defs("b", Duration::from_secs(15), &[])
        .await
        .expect("read")
        .is_empty());
    assert_eq!(
        b.registered_defs("a", Duration::from_secs(15), &[])
            .await
            .expect("read"),
        vec![def("theirs")]
    );
    // Only instances seen alive within the window count.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(b.publish_schedules("a", &[]).await.expect("mark a alive"));
    assert!(b
        .registered_defs("c", Duration::from_millis(200), &["mine".to_string()])
        .await
        .expect("read")
        .is_empty());
    // b is forgotten: "theirs" goes with its definition; "mine" (a still registers it) stays.
    let pruned = b
        .prune_schedules(Duration::from_millis(200), false)
        .await
        .expect("prune");
    assert_eq!(pruned, vec!["theirs".to_string()]);
    let stored: Vec<String> = b
        .client()
        .hkeys(b.keyspace().tagged("scheduler", "registry:def"))
        .await
        .expect("hkeys");
    assert_eq!(stored, vec!["mine".to_string()]);
    assert_eq!(
        b.registered_defs("c", Duration::from_secs(15), &[])
            .await
            .expect("read"),
        vec![def("mine")]
    );
}

/// Every scheduler script declares all the keys it touches, so each runs on a Redis Cluster
/// (queues spread over the primaries, the scheduler's own keys in their tag's slot).
#[tokio::test]
async fn scheduler_scripts_run_on_a_cluster() {
    let b = common::cluster_broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    for i in 0..6 {
        let name = format!("cq{i}");
        let queue = QueueName::new(name.clone()).expect("queue");
        assert_eq!(b.fence(&queue, e).await.expect("fence"), e);
        b.register_schedules(&queue, &["s".to_string()])
            .await
            .expect("register");
        let mut t = trigger_with(
            "s",
            1_000,
            EnqueueOptions::new()
                .queue(name.clone())
                .unique(Duration::from_secs(5)),
        );
        t.forbid_overlap = true;
        let mut next = trigger("s", 2_000, &name);
        next.forbid_overlap = true;
        assert_eq!(
            b.fire(&queue, e, vec![t, next], ttl, 1)
                .await
                .expect("fire"),
            vec![Fired, Overlap],
            "{name}"
        );
        let st = b
            .fire_state(&queue, &["s".to_string()])
            .await
            .expect("state");
        assert_eq!(st[0].last_task_id.as_deref(), Some("s:1"));
    }
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!((m.fired, m.suppressed, m.missed), (6, 6, 6));
    assert!(b
        .publish_schedules("i1", &[entry("s", "cq0", Some(1000))])
        .await
        .expect("publish"));
    assert_eq!(
        b.schedules(Duration::from_secs(15), Duration::from_secs(3600))
            .await
            .expect("list")
            .len(),
        1
    );
    b.publish_schedule_defs(&[def("s")]).await.expect("defs");
    assert_eq!(
        b.registered_defs("c", Duration::from_secs(15), &[])
            .await
            .expect("read"),
        vec![def("s")]
    );
    assert!(b
        .prune_schedules(Duration::from_secs(3600), true)
        .await
        .expect("prune")
        .is_empty());
    assert!(b.resign_leadership("t").await.expect("resign"));
}

/// A schedule's dedup: a throttle's lock outlives the fired task for its whole window (the
/// record names no lock), and a lock let go on start is freed by the task's start.
#[tokio::test]
async fn fire_honours_a_throttle_window_and_a_release_on_start() {
    use chronos_broker::{Completion, Consume, Dedup, DedupMode, Release, SettleExt};
    let b = broker().await;
    let e = leader(&b, "t").await;
    let ttl = Duration::from_secs(30);
    let queue = QueueName::new("dd").expect("queue");
    let throttle = EnqueueOptions::new()
        .queue("dd")
        .dedup(Dedup::key("nightly").mode(DedupMode::Throttle {
            window: Duration::from_secs(60),
        }));
    assert_eq!(
        b.fire(
            &queue,
            e,
            vec![trigger_with("t", 1_000, throttle.clone())],
            ttl,
            0
        )
        .await
        .expect("fire"),
        vec![Fired]
    );
    // Run and finish the fired task: the window still holds.
    let mut reader = b.open_reader().await.expect("reader");
    let f = common::take(&b, &mut reader, &queue, "w", 5, Duration::ZERO).await;
    assert_eq!(f.leases.len(), 1);
    let done = [Completion {
        lease: f.leases[0].id.clone(),
        retention: None,
        result: None,
    }];
    b.complete(&queue, &done).await.expect("complete");
    assert_eq!(
        b.fire(&queue, e, vec![trigger_with("t", 2_000, throttle)], ttl, 0)
            .await
            .expect("fire"),
        vec![Unique]
    );
    // Released on start: the next trigger fires while the first still runs.
    let on_start = EnqueueOptions::new()
        .queue("dd")
        .dedup(Dedup::key("hourly").release(Release::OnStart));
    assert_eq!(
        b.fire(
            &queue,
            e,
            vec![trigger_with("h", 1_000, on_start.clone())],
            ttl,
            0
        )
        .await
        .expect("fire"),
        vec![Fired]
    );
    assert_eq!(
        b.fire(
            &queue,
            e,
            vec![trigger_with("h", 2_000, on_start.clone())],
            ttl,
            0
        )
        .await
        .expect("fire"),
        vec![Unique],
        "held while the first waits"
    );
    let f = common::take(&b, &mut reader, &queue, "w", 5, Duration::ZERO).await;
    assert_eq!(f.leases.len(), 1);
    assert_eq!(
        b.fire(&queue, e, vec![trigger_with("h", 3_000, on_start)], ttl, 0)
            .await
            .expect("fire"),
        vec![Fired],
        "let go when the first started"
    );
}
