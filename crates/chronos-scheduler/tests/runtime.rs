//! Runtime schedules against a real Redis, with an in-process scheduler: an added schedule is
//! picked up and fired within about a second, pause stops it, resume restarts it without
//! catching up, update changes its spec, remove stops it and the registry forgets it; run-now
//! enqueues once per request; invalid or conflicting changes are typed errors that write
//! nothing.

mod common;

use common::broker;

use std::collections::BTreeSet;
use std::time::Duration;

use chronos_broker::{
    now_ms, FireOutcome, Inspect, ManageSchedules, QueueName, RedisBroker, ScheduleSource,
    TaskArgs, TaskState, SCHEDULE_HEADER,
};
use chronos_scheduler::{
    list_schedules, Change, NewSchedule, RuntimeSchedules, RuntimeSpec, ScheduleOptions, Scheduler,
    SchedulerConfig, SchedulerError, SchedulerHandle,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Ping {
    n: u32,
}
impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
}

fn config() -> SchedulerConfig {
    SchedulerConfig {
        leader_ttl: Duration::from_millis(1000),
        publish_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    }
}

/// Trigger seconds of every pending task of schedule `id` in `queue`, sorted.
async fn fired(b: &RedisBroker, queue: &str, id: &str) -> Vec<i64> {
    let q = QueueName::new(queue).expect("queue");
    let tasks = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list");
    let prefix = format!("{id}:");
    let mut secs: Vec<i64> = tasks
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.id.strip_prefix(&prefix).and_then(|s| s.parse().ok()))
        .collect();
    secs.sort();
    secs
}

/// Polls `fired` until `done` holds, for at most `within`.
async fn wait_fired(
    b: &RedisBroker,
    queue: &str,
    id: &str,
    within: Duration,
    done: impl Fn(&[i64]) -> bool,
) -> Vec<i64> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let secs = fired(b, queue, id).await;
        if done(&secs) {
            return secs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not reached within {within:?}: {secs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn leader(handle: &SchedulerHandle) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !handle.is_leader() {
        assert!(tokio::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_once_each(secs: &[i64], step: i64) {
    let set: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(set.len(), secs.len(), "a trigger fired twice: {secs:?}");
    for w in secs.windows(2) {
        assert_eq!(w[1] - w[0], step, "a trigger was missed: {secs:?}");
    }
}

/// How long after a change the leader may still act on the old definition: one poll (500 ms)
/// plus the reads, as documented.
const BOUND_MS: i64 = 1000;

/// Waits until `at_ms` by the wall clock (a bounded observation window, not a synchronisation).
async fn until(at_ms: i64) {
    let left = at_ms - now_ms();
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

#[tokio::test]
async fn a_runtime_schedule_is_added_paused_resumed_updated_and_removed_on_a_running_scheduler() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let handle = Scheduler::new(b.clone(), config())
        .start()
        .await
        .expect("start");
    leader(&handle).await;
    let rt = RuntimeSchedules::new(b.clone());
    let opts = ScheduleOptions::new().queue("rt");

    // Added: fires from the first whole second after the add, every trigger once.
    let added_at = now_ms();
    let beat = NewSchedule::interval("beat", Duration::from_secs(1), &Ping { n: 1 }, opts.clone())
        .expect("valid");
    assert_eq!(rt.add(beat.clone()).await.expect("add"), Change::Done);
    assert_eq!(rt.add(beat).await.expect("add again"), Change::Unchanged);
    let secs = wait_fired(&b, "rt", "beat", Duration::from_secs(6), |s| s.len() >= 3).await;
    assert_eq!(secs[0], added_at.div_euclid(1000) + 1, "{secs:?}");
    assert_once_each(&secs, 1);
    let listed = list_schedules(&b, &config()).await.expect("list");
    let entry = listed.iter().find(|e| e.id == "beat").expect("listed");
    assert_eq!(entry.source, ScheduleSource::Runtime);
    assert!(!entry.paused && !entry.stale);

    // Paused: nothing fires once the leader saw it.
    assert_eq!(rt.pause("beat").await.expect("pause"), Change::Done);
    let paused_at = now_ms();
    assert_eq!(
        rt.pause("beat").await.expect("pause again"),
        Change::Unchanged
    );
    until(paused_at + BOUND_MS).await;
    let before = fired(&b, "rt", "beat").await;
    until(paused_at + BOUND_MS + 2500).await;
    let after = fired(&b, "rt", "beat").await;
    assert_eq!(before, after, "a paused schedule fired");
    assert!(after.iter().all(|&t| t * 1000 <= paused_at + BOUND_MS));
    let listed = list_schedules(&b, &config()).await.expect("list");
    assert!(listed.iter().any(|e| e.id == "beat" && e.paused));

    // Resumed: fires again from the resume on, catching nothing up from the pause.
    assert_eq!(rt.resume("beat").await.expect("resume"), Change::Done);
    let resumed_at = now_ms();
    let secs = wait_fired(&b, "rt", "beat", Duration::from_secs(4), |s| {
        s.iter().filter(|&&t| t * 1000 > resumed_at).count() >= 2
    })
    .await;
    let gap: Vec<i64> = secs
        .iter()
        .copied()
        .filter(|&t| t * 1000 > paused_at + BOUND_MS && t * 1000 <= resumed_at)
        .collect();
    assert!(gap.is_empty(), "the pause was caught up: {gap:?}");
    let resumed: Vec<i64> = secs
        .iter()
        .copied()
        .filter(|&t| t * 1000 > resumed_at)
        .collect();
    assert_eq!(resumed[0], resumed_at.div_euclid(1000) + 1, "{secs:?}");
    assert_once_each(&resumed, 1);

    // Updated to every 2 s: takes effect from the next trigger.
    let every2 =
        NewSchedule::interval("beat", Duration::from_secs(2), &Ping { n: 2 }, opts.clone())
            .expect("valid");
    assert_eq!(rt.update(every2).await.expect("update"), Change::Done);
    let updated_at = now_ms();
    let secs = wait_fired(&b, "rt", "beat", Duration::from_secs(7), |s| {
        s.iter()
            .filter(|&&t| t * 1000 > updated_at + BOUND_MS)
            .count()
            >= 2
    })
    .await;
    let late: Vec<i64> = secs
        .into_iter()
        .filter(|&t| t * 1000 > updated_at + BOUND_MS)
        .collect();
    assert!(late.iter().all(|t| t % 2 == 0), "{late:?}");
    assert_once_each(&late, 2);
    assert!(rt
        .get("beat")
        .await
        .expect("get")
        .is_some_and(|d| !d.paused));

    // Removed: nothing fires once the leader saw it, and the registry forgets it.
    assert_eq!(rt.remove("beat").await.expect("remove"), Change::Done);
    let removed_at = now_ms();
    until(removed_at + BOUND_MS).await;
    let before = fired(&b, "rt", "beat").await;
    until(removed_at + BOUND_MS + 2500).await;
    let after = fired(&b, "rt", "beat").await;
    assert_eq!(before, after, "a removed schedule fired");
    let listed = list_schedules(&b, &config()).await.expect("list");
    assert!(listed.iter().all(|e| e.id != "beat"));
    assert!(matches!(
        rt.remove("beat").await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
    handle.shutdown().await;
}

#[tokio::test]
async fn a_schedule_removed_while_its_leader_fires_leaves_no_fire_state() {
    use chronos_broker::{PutOutcome, Schedules};
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let handle = Scheduler::new(b.clone(), config())
        .start()
        .await
        .expect("start");
    leader(&handle).await;
    let rt = RuntimeSchedules::new(b.clone());
    let beat = NewSchedule::interval(
        "late",
        Duration::from_secs(1),
        &Ping { n: 1 },
        ScheduleOptions::new().queue("rm"),
    )
    .expect("valid");
    assert_eq!(rt.add(beat).await.expect("add"), Change::Done);
    wait_fired(&b, "rm", "late", Duration::from_secs(6), |s| !s.is_empty()).await;
    // The race, set up on purpose: the remover forgot the fire state, then the leader fired once
    // more before it reloaded, so the definition is gone and the state is back. Deleting the
    // definition by its compare-and-set alone leaves the state of the fires so far.
    let stored = b.schedule_def("late").await.expect("read").expect("stored");
    assert_eq!(
        b.put_schedule_def("late", Some(&stored.raw), None)
            .await
            .expect("delete"),
        PutOutcome::Written
    );
    let q = QueueName::new("rm").expect("queue");
    let ids = ["late".to_string()];
    // The leader reloads within its poll, fires it no more, and forgets what is left.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let st = b.fire_state(&q, &ids).await.expect("state");
        let history = b.fire_history(&q, "late").await.expect("history");
        if st[0].last_fired_ms.is_none()
            && st[0].last_task_id.is_none()
            && st[0].registered_ms.is_none()
            && history.is_empty()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a removed schedule's fire state stays: {:?}, {} fires",
            st[0],
            history.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn an_edit_changes_spec_and_payload_and_keeps_the_rest() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let rt = RuntimeSchedules::new(b.clone());
    let s = NewSchedule::interval(
        "tick",
        Duration::from_secs(60),
        &Ping { n: 1 },
        ScheduleOptions::new().queue("ticks").max_retry(7),
    )
    .expect("valid");
    rt.add(s).await.expect("add");
    rt.pause("tick").await.expect("pause");
    let before = rt.get("tick").await.expect("get").expect("stored");
    assert_eq!(
        rt.edit("tick", chronos_scheduler::ScheduleEdit::new())
            .await
            .expect("edit"),
        Change::Unchanged
    );
    let edit = chronos_scheduler::ScheduleEdit::new()
        .spec(chronos_scheduler::Spec::cron("*/5 * * * *", "Asia/Tokyo").expect("spec"))
        .payload(serde_json::json!({"n": 2}));
    assert_eq!(
        rt.edit("tick", edit.clone()).await.expect("edit"),
        Change::Done
    );
    // Sent again (a user retrying): nothing more to change.
    assert_eq!(
        rt.edit("tick", edit).await.expect("edit"),
        Change::Unchanged
    );
    let after = rt.get("tick").await.expect("get").expect("stored");
    assert_eq!(
        after.spec,
        chronos_broker::DefSpec::Cron {
            expr: "*/5 * * * *".into(),
            zone: "Asia/Tokyo".into()
        }
    );
    assert_eq!(after.describe, "*/5 * * * * (Asia/Tokyo)");
    let n: Ping = chronos_broker::decode_args(&after.payload).expect("payload");
    assert_eq!(n.n, 2);
    assert_eq!(
        (
            after.queue.as_str(),
            after.kind.as_str(),
            after.max_retry,
            after.paused
        ),
        ("ticks", "ping", Some(7), true),
        "kind, queue, options and the pause stay"
    );
    assert_eq!(after.created_ms, before.created_ms);
    assert!(
        after.active_since_ms >= before.active_since_ms,
        "a new spec fires from the edit on"
    );
    // An edit of the payload alone keeps when the schedule became active.
    let again = rt.get("tick").await.expect("get").expect("stored");
    rt.edit(
        "tick",
        chronos_scheduler::ScheduleEdit::new().payload(serde_json::json!({"n": 3})),
    )
    .await
    .expect("edit");
    let payload_only = rt.get("tick").await.expect("get").expect("stored");
    assert_eq!(payload_only.active_since_ms, again.active_since_ms);
    assert!(matches!(
        rt.edit("nope", chronos_scheduler::ScheduleEdit::new())
            .await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
}

#[tokio::test]
async fn run_now_enqueues_once_per_request_with_the_schedule_headers() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let rt = RuntimeSchedules::new(b.clone());
    let daily = NewSchedule::cron(
        "report",
        "0 3 * * *",
        &Ping { n: 7 },
        ScheduleOptions::new()
            .queue("reports")
            .zone("Europe/Berlin"),
    )
    .expect("valid");
    rt.add(daily).await.expect("add");
    let first = rt.run_now("report", Some("req-1")).await.expect("run");
    assert_eq!(first.outcome, FireOutcome::Fired);
    assert_eq!(first.task_id, "report:run:req-1");
    let again = rt
        .run_now("report", Some("req-1"))
        .await
        .expect("run again");
    assert_eq!(again.outcome, FireOutcome::Duplicate);
    let other = rt
        .run_now("report", None)
        .await
        .expect("run, fresh request");
    assert_eq!(other.outcome, FireOutcome::Fired);
    let q = QueueName::new("reports").expect("queue");
    assert_eq!(b.queue_stats(&q).await.expect("stats").pending, 2);
    let task = b
        .task(&q, &first.task_id)
        .await
        .expect("task")
        .expect("stored");
    let env = task.envelope.expect("envelope");
    assert_eq!(env.kind, "ping");
    assert_eq!(
        env.headers.get(SCHEDULE_HEADER).map(String::as_str),
        Some("report")
    );
    assert!(matches!(
        rt.run_now("nope", None).await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
    assert!(matches!(
        rt.run_now("report", Some("has space")).await,
        Err(SchedulerError::InvalidOption(_))
    ));
}

#[tokio::test]
async fn invalid_or_conflicting_changes_are_typed_errors_that_write_nothing() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let rt = RuntimeSchedules::new(b.clone());
    let opts = ScheduleOptions::new().queue("rt");
    let p = Ping { n: 1 };
    assert!(matches!(
        NewSchedule::interval("x", Duration::from_millis(500), &p, opts.clone()),
        Err(SchedulerError::Spec(_))
    ));
    assert!(matches!(
        NewSchedule::cron("x", "61 * * * *", &p, opts.clone()),
        Err(SchedulerError::Spec(_))
    ));
    assert!(matches!(
        NewSchedule::cron("x", "0 3 * * *", &p, opts.clone().zone("Mars/Olympus")),
        Err(SchedulerError::Spec(_))
    ));
    assert!(matches!(
        NewSchedule::interval("has space", Duration::from_secs(1), &p, opts.clone()),
        Err(SchedulerError::InvalidOption(_))
    ));
    assert!(matches!(
        NewSchedule::interval("x", Duration::from_secs(1), &p, opts.clone().queue("a{b}")),
        Err(SchedulerError::Broker(_))
    ));
    assert!(matches!(
        NewSchedule::raw(
            "x",
            "ping",
            &serde_json::json!({"n": 1}),
            RuntimeSpec::Cron {
                expr: "not cron".into(),
                zone: None
            },
            opts.clone()
        ),
        Err(SchedulerError::Spec(_))
    ));
    let raw = NewSchedule::raw(
        "x",
        "ping",
        &serde_json::json!({"n": 1}),
        RuntimeSpec::Every(Duration::from_secs(30)),
        opts.clone(),
    )
    .expect("valid raw");
    // The JSON payload is stored as the MessagePack a serde type with those fields writes.
    assert_eq!(
        raw.def().payload,
        chronos_broker::encode_args(&p).expect("encode")
    );
    let unknown =
        NewSchedule::interval("ghost", Duration::from_secs(1), &p, opts.clone()).expect("valid");
    assert!(matches!(
        rt.update(unknown).await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
    assert!(matches!(
        rt.pause("ghost").await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
    assert!(matches!(
        rt.resume("ghost").await,
        Err(SchedulerError::UnknownSchedule(_))
    ));
    assert_eq!(b.schedule_revision().await.expect("rev"), 0);

    rt.add(raw).await.expect("add");
    let other =
        NewSchedule::interval("x", Duration::from_secs(5), &p, opts.clone()).expect("valid");
    assert!(matches!(
        rt.add(other).await,
        Err(SchedulerError::ScheduleExists(_))
    ));
    assert_eq!(b.schedule_revision().await.expect("rev"), 1);

    // An id registered in code by a running instance is refused.
    let mut s = Scheduler::new(b.clone(), config());
    s.register_interval(
        Duration::from_secs(60),
        &p,
        ScheduleOptions::new().id("in-code").queue("rt"),
    )
    .expect("register");
    let handle = s.start().await.expect("start");
    let clash = NewSchedule::interval("in-code", Duration::from_secs(1), &p, opts).expect("valid");
    assert!(matches!(
        rt.add(clash).await,
        Err(SchedulerError::CodeSchedule(_))
    ));
    assert_eq!(b.schedule_revision().await.expect("rev"), 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn an_update_that_moves_the_queue_starts_afresh_there() {
    use chronos_broker::Schedules;
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let rt = RuntimeSchedules::new(b.clone());
    let p = Ping { n: 1 };
    let every = Duration::from_secs(1);
    rt.add(
        NewSchedule::interval("mover", every, &p, ScheduleOptions::new().queue("old"))
            .expect("valid"),
    )
    .await
    .expect("add");
    let added = rt.get("mover").await.expect("get").expect("stored");
    // Fire state in the old queue, as a leader would have left it.
    let old = QueueName::new("old").expect("queue");
    b.register_schedules(&old, &["mover".to_string()])
        .await
        .expect("mark");
    // A pure option change keeps the activation; a queue move resets it.
    rt.update(
        NewSchedule::interval(
            "mover",
            every,
            &p,
            ScheduleOptions::new().queue("old").max_retry(1),
        )
        .expect("valid"),
    )
    .await
    .expect("update");
    let same_queue = rt.get("mover").await.expect("get").expect("stored");
    assert_eq!(same_queue.active_since_ms, added.active_since_ms);
    assert_eq!(same_queue.max_retry, Some(1));
    tokio::time::sleep(Duration::from_millis(5)).await;
    rt.update(
        NewSchedule::interval("mover", every, &p, ScheduleOptions::new().queue("new"))
            .expect("valid"),
    )
    .await
    .expect("update");
    let moved = rt.get("mover").await.expect("get").expect("stored");
    assert_eq!(moved.queue, "new");
    assert!(moved.active_since_ms > added.active_since_ms);
    assert_eq!(moved.created_ms, added.created_ms);
    let st = b
        .fire_state(&old, &["mover".to_string()])
        .await
        .expect("state");
    assert_eq!(
        st[0].registered_ms, None,
        "the old queue's state is forgotten"
    );
}

#[tokio::test]
async fn a_queue_move_whose_reply_is_lost_still_forgets_the_old_queues_state() {
    use chronos_broker::Schedules;
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let target: std::net::SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = chronos_testkit::TcpProxy::start(target)
        .await
        .expect("proxy");
    let via = RedisBroker::builder(proxy.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect via proxy");
    let rt = RuntimeSchedules::new(via.clone());
    let p = Ping { n: 1 };
    let every = Duration::from_secs(1);
    let opts = |q: &str| ScheduleOptions::new().queue(q);
    rt.add(NewSchedule::interval("mover", every, &p, opts("old")).expect("valid"))
        .await
        .expect("add");
    let old = QueueName::new("old").expect("queue");
    via.register_schedules(&old, &["mover".to_string()])
        .await
        .expect("mark");
    let sha = via
        .script_shas()
        .into_iter()
        .find(|(n, _)| *n == "sched_put")
        .map(|(_, sha)| sha)
        .expect("script");
    proxy.drop_reply_to(sha);
    // The move is written, its reply lost, and the re-send finds it already stored.
    let change = rt
        .update(NewSchedule::interval("mover", every, &p, opts("new")).expect("valid"))
        .await
        .expect("update");
    assert_eq!(proxy.dropped_replies(), 1, "the reply was dropped");
    assert_eq!(change, Change::Unchanged, "the re-send found its own write");
    let moved = rt.get("mover").await.expect("get").expect("stored");
    assert_eq!(moved.queue, "new");
    let st = via
        .fire_state(&old, &["mover".to_string()])
        .await
        .expect("state");
    assert_eq!(
        st[0].registered_ms, None,
        "the old queue's state is forgotten"
    );
}

/// A runtime schedule keeps its dedup through the stored definition; a mode a schedule does not
/// take is refused before anything is stored.
#[tokio::test]
async fn a_schedules_dedup_is_stored_and_replace_is_refused() {
    use chronos_broker::{Dedup, DedupMode, Release};
    let b = broker("dd").await;
    let runtime = RuntimeSchedules::new(b.clone());
    let window = Duration::from_secs(90);
    let throttled = NewSchedule::interval(
        "dd-throttle",
        Duration::from_secs(1),
        &Ping { n: 1 },
        ScheduleOptions::new().dedup(Dedup::key("nightly").mode(DedupMode::Throttle { window })),
    )
    .expect("schedule");
    let d = throttled.def().dedup.clone().expect("dedup stored");
    assert_eq!(
        (d.key.as_deref(), d.throttle, d.ttl_ms),
        (Some("nightly"), true, 90_000)
    );
    assert_eq!(throttled.def().unique_ms, None);
    runtime.add(throttled).await.expect("add");
    let stored = runtime
        .get("dd-throttle")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(
        stored.dedup.map(|d| d.dedup()),
        Some(Dedup::key("nightly").mode(DedupMode::Throttle { window }))
    );
    let on_start = NewSchedule::interval(
        "dd-start",
        Duration::from_secs(1),
        &Ping { n: 1 },
        ScheduleOptions::new().dedup(Dedup::payload().ttl(window).release(Release::OnStart)),
    )
    .expect("schedule");
    assert_eq!(
        on_start.def().dedup.as_ref().map(|d| d.dedup()),
        Some(Dedup::payload().ttl(window).release(Release::OnStart))
    );
    for mode in [
        DedupMode::Replace,
        DedupMode::Debounce {
            delay: Duration::from_secs(1),
            max_wait: Duration::from_secs(5),
        },
    ] {
        let err = NewSchedule::interval(
            "dd-bad",
            Duration::from_secs(1),
            &Ping { n: 1 },
            ScheduleOptions::new().dedup(Dedup::key("k").mode(mode)),
        )
        .expect_err("refused");
        assert!(
            matches!(
                err,
                SchedulerError::Broker(chronos_broker::BrokerError::InvalidOption(_))
            ),
            "{err:?}"
        );
    }
}
