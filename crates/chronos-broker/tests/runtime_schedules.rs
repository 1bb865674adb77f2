//! Runtime schedule definitions against a real Redis: the compare-and-set script (idempotent
//! re-sends, conflicts, code-owned ids, the revision) and run-now (once per request), also
//! when a reply is lost and the client re-sends the call.

mod common;

use std::time::Duration;

use chronos_broker::FireOutcome::*;
use chronos_broker::{
    encode_args, now_ms, DefSpec, EnqueueOptions, Inspect, ManageSchedules, NewTask, PutOutcome,
    QueueName, RedisBroker, ScheduleDef, ScheduleEntry, ScheduleSource, Schedules,
};
use common::{broker, email, rig};

fn def(id: &str, every_ms: u64) -> ScheduleDef {
    ScheduleDef {
        id: id.into(),
        queue: "rt".into(),
        kind: "email".into(),
        payload: encode_args(&email(1)).expect("encode"),
        spec: DefSpec::Every { every_ms },
        describe: format!("every {}s", every_ms / 1000),
        max_retry: Some(3),
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
        created_ms: 1,
        updated_ms: 1,
        active_since_ms: 1,
    }
}

fn run_task(id: &str, request: &str) -> NewTask {
    NewTask::build(
        "email",
        encode_args(&email(1)).expect("encode"),
        EnqueueOptions::new()
            .queue("rt")
            .task_id(format!("{id}:run:{request}")),
        now_ms(),
    )
    .expect("task")
}

#[tokio::test]
async fn put_is_a_compare_and_set_that_bumps_the_revision_once_per_change() {
    let b = broker().await;
    assert_eq!(b.schedule_revision().await.expect("rev"), 0);
    let a = def("a", 1000);
    assert_eq!(
        b.put_schedule_def("a", None, Some(&a)).await.expect("add"),
        PutOutcome::Written
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 1);
    // The same call again (a re-send, or a repeated add) writes nothing and keeps the revision.
    assert_eq!(
        b.put_schedule_def("a", None, Some(&a))
            .await
            .expect("again"),
        PutOutcome::Unchanged
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 1);
    let stored = b.schedule_def("a").await.expect("get").expect("stored");
    assert_eq!(stored.def, a);

    // A writer that read an older value is refused.
    let mut a2 = a.clone();
    a2.spec = DefSpec::Every { every_ms: 2000 };
    assert_eq!(
        b.put_schedule_def("a", None, Some(&a2))
            .await
            .expect("stale add"),
        PutOutcome::Conflict
    );
    assert_eq!(
        b.put_schedule_def("a", Some(b"not what is stored"), Some(&a2))
            .await
            .expect("stale update"),
        PutOutcome::Conflict
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 1);
    assert_eq!(
        b.put_schedule_def("a", Some(&stored.raw), Some(&a2))
            .await
            .expect("update"),
        PutOutcome::Written
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 2);

    // A definition stored under another id is refused before anything is sent.
    assert!(b.put_schedule_def("b", None, Some(&a2)).await.is_err());

    // Delete; deleting what is gone is a no-op.
    let stored = b.schedule_def("a").await.expect("get").expect("stored");
    assert_eq!(
        b.put_schedule_def("a", Some(&stored.raw), None)
            .await
            .expect("remove"),
        PutOutcome::Written
    );
    assert_eq!(
        b.put_schedule_def("a", Some(&stored.raw), None)
            .await
            .expect("remove again"),
        PutOutcome::Unchanged
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 3);
    assert!(b.schedule_defs().await.expect("all").is_empty());
}

#[tokio::test]
async fn an_id_registered_in_code_is_refused() {
    let b = broker().await;
    let entry = ScheduleEntry {
        id: "nightly".into(),
        spec: "every 1s".into(),
        zone: "UTC".into(),
        queue: "rt".into(),
        kind: "email".into(),
        next_run_ms: None,
        every_ms: Some(1000),
        last_fired_ms: None,
        last_task_id: None,
        registered_by: "i1".into(),
        last_seen_ms: 0,
        stale: false,
        source: ScheduleSource::Code,
        paused: false,
    };
    b.publish_schedules("i1", &[entry]).await.expect("publish");
    assert_eq!(
        b.put_schedule_def("nightly", None, Some(&def("nightly", 1000)))
            .await
            .expect("put"),
        PutOutcome::CodeOwned
    );
    assert_eq!(b.schedule_revision().await.expect("rev"), 0);
    assert!(b.schedule_defs().await.expect("all").is_empty());
}

#[tokio::test]
async fn the_registry_lists_runtime_schedules_with_their_source_and_paused_flag() {
    let b = broker().await;
    let mut p = def("paused", 5000);
    p.paused = true;
    b.put_schedule_def("live", None, Some(&def("live", 1000)))
        .await
        .expect("add");
    b.put_schedule_def("paused", None, Some(&p))
        .await
        .expect("add");
    let all = b
        .schedules(Duration::from_secs(15), Duration::from_secs(3600))
        .await
        .expect("list");
    assert_eq!(all.len(), 2);
    let live = all.iter().find(|e| e.id == "live").expect("live");
    assert_eq!(live.source, ScheduleSource::Runtime);
    assert!(!live.paused);
    assert!(live.next_run_ms.is_some());
    // No scheduler instance runs: nobody fires it.
    assert!(live.stale);
    let paused = all.iter().find(|e| e.id == "paused").expect("paused");
    assert!(paused.paused);
    assert_eq!(paused.next_run_ms, None);
}

#[tokio::test]
async fn run_now_enqueues_once_per_request_and_counts_it_as_fired() {
    let b = broker().await;
    let q = QueueName::new("rt").expect("queue");
    let run = |r: &'static str| {
        let b: RedisBroker = b.clone();
        let q = q.clone();
        async move { b.run_schedule(&q, "a", r, run_task("a", r)).await }
    };
    assert_eq!(run("r1").await.expect("run"), Fired);
    assert_eq!(run("r1").await.expect("run again"), Duplicate);
    assert_eq!(run("r2").await.expect("another request"), Fired);
    assert_eq!(b.queue_stats(&q).await.expect("stats").pending, 2);
    assert_eq!(b.scheduler_metrics().await.expect("metrics").fired, 2);
    // The schedule's last fired trigger is untouched: regular triggers are not suppressed.
    let st = b.fire_state(&q, &["a".to_string()]).await.expect("state");
    assert_eq!(st[0].last_fired_ms, None);
}

#[tokio::test]
async fn a_change_whose_reply_is_lost_is_applied_once() {
    let rig = rig().await;
    rig.lose_reply_of("sched_put");
    let a = def("a", 1000);
    let outcome = rig
        .via
        .put_schedule_def("a", None, Some(&a))
        .await
        .expect("re-sent put");
    rig.assert_lost(1);
    // The re-send found its own write: nothing written again, the revision bumped once.
    assert_eq!(outcome, PutOutcome::Unchanged);
    assert_eq!(rig.direct.schedule_revision().await.expect("rev"), 1);
    assert_eq!(
        rig.direct
            .schedule_def("a")
            .await
            .expect("get")
            .map(|s| s.def),
        Some(a)
    );
}

#[tokio::test]
async fn a_run_now_whose_reply_is_lost_enqueues_once() {
    let rig = rig().await;
    let q = QueueName::new("rt").expect("queue");
    rig.lose_reply_of("sched_run");
    let outcome = rig
        .via
        .run_schedule(&q, "a", "r1", run_task("a", "r1"))
        .await
        .expect("re-sent run");
    rig.assert_lost(1);
    // The re-send finds its own token in the marker: it tells what this call did.
    assert_eq!(outcome, Fired, "the re-send reports its own first run");
    assert_eq!(rig.direct.queue_stats(&q).await.expect("stats").pending, 1);
    assert_eq!(rig.direct.scheduler_metrics().await.expect("m").fired, 1);
    // Another call with the same request is a repeat, not a re-send.
    let again = rig
        .via
        .run_schedule(&q, "a", "r1", run_task("a", "r1"))
        .await
        .expect("repeat");
    assert_eq!(again, Duplicate);
    assert_eq!(rig.direct.queue_stats(&q).await.expect("stats").pending, 1);
}

#[tokio::test]
async fn a_run_now_blocked_by_a_unique_lock_reports_it_again_when_its_reply_is_lost() {
    let rig = rig().await;
    let q = QueueName::new("rt").expect("queue");
    let unique = |r: &str| {
        NewTask::build(
            "email",
            encode_args(&email(1)).expect("encode"),
            EnqueueOptions::new()
                .queue("rt")
                .task_id(format!("a:run:{r}"))
                .unique(Duration::from_secs(60)),
            now_ms(),
        )
        .expect("task")
    };
    let first = rig.direct.run_schedule(&q, "a", "r1", unique("r1"));
    assert_eq!(first.await.expect("run"), Fired);
    rig.lose_reply_of("sched_run");
    let outcome = rig
        .via
        .run_schedule(&q, "a", "r2", unique("r2"))
        .await
        .expect("re-sent run");
    rig.assert_lost(1);
    assert_eq!(outcome, Unique);
    let m = rig.direct.scheduler_metrics().await.expect("m");
    assert_eq!((m.fired, m.suppressed), (1, 1));
}

#[tokio::test]
async fn a_run_now_over_a_wrong_typed_key_writes_nothing_and_can_run_once_repaired() {
    use chronos_broker::fred::interfaces::KeysInterface;
    let b = broker().await;
    let q = QueueName::new("rt").expect("queue");
    let keys = b.keyspace().queue(&q);
    let metrics = format!("{}sched:metrics", keys.prefix());
    let marker = format!("{}sched:r:a:r1", keys.prefix());
    let c = b.client();
    // Registers the queue (its stream and group) first, as any earlier call would have.
    assert_eq!(
        b.run_schedule(&q, "a", "r0", run_task("a", "r0"))
            .await
            .expect("run"),
        Fired
    );
    for key in [metrics.clone(), keys.stream()] {
        let _: () = c.del(key.as_str()).await.expect("del");
        let _: () = c
            .set(key.as_str(), "x", None, None, false)
            .await
            .expect("set");
        let r = b.run_schedule(&q, "a", "r1", run_task("a", "r1")).await;
        assert!(r.is_err(), "{key}: {r:?}");
        let left: i64 = c.exists(marker.as_str()).await.expect("exists");
        assert_eq!(left, 0, "{key}: nothing written");
        let task: i64 = c
            .exists(keys.task("a:run:r1").as_str())
            .await
            .expect("exists");
        assert_eq!(task, 0, "{key}: nothing written");
        let _: () = c.del(key.as_str()).await.expect("repair");
    }
    // Repaired: the same request runs (it was not marked as run by the failed calls).
    assert_eq!(
        b.run_schedule(&q, "a", "r1", run_task("a", "r1"))
            .await
            .expect("run"),
        Fired
    );
    assert_eq!(b.scheduler_metrics().await.expect("m").fired, 1);
}
