//! An operator's edit of a waiting task (Operate::edit): payload, run time and level, in each
//! waiting state, for plain and tenant tasks, refused once started, and with lost replies.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{SortedSetsInterface, StreamsInterface};
use chronos_broker::{
    ActionOutcome, BrokerError, Client, Consume, EnqueueOptions, Inspect, Maintain, Operate,
    Priority, QueueName, RedisBroker, SettleExt, StartOutcome, TaskAction, TaskArgs, TaskEdit,
    TaskEnvelope, TaskState, Tenants,
};
use common::{broker, email, redis_ms, rig, take, Email};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

fn level(n: u8) -> Priority {
    Priority::level(n).expect("level")
}

async fn put(b: &RedisBroker, n: u32, opts: EnqueueOptions) -> String {
    Client::new(b.clone())
        .enqueue(&email(n), opts)
        .await
        .expect("enqueue")
        .id
}

/// The task's state, level and envelope as the inspector reads them.
async fn read(b: &RedisBroker, id: &str) -> (TaskState, Priority, TaskEnvelope) {
    let r = b.task(&q(), id).await.expect("task").expect("there");
    (r.state, r.priority, r.envelope.expect("envelope"))
}

fn n_of(env: &TaskEnvelope) -> u32 {
    rmp_serde::from_slice::<Email>(&env.payload)
        .expect("payload")
        .n
}

/// The payload numbers one fetch delivers (not started), in order, with their leases.
async fn fetch(b: &RedisBroker, count: usize) -> Vec<(u32, chronos_broker::LeaseId)> {
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &q(), "w", &[], count, Duration::ZERO)
        .await
        .expect("fetch");
    f.leases
        .into_iter()
        .map(|l| (n_of(l.envelope.as_ref().expect("envelope")), l.id))
        .collect()
}

fn new_args(n: u32) -> TaskEdit {
    TaskEdit::new().args(&email(n)).expect("args")
}

async fn score(b: &RedisBroker, set: String, id: &str) -> Option<f64> {
    b.client().zscore(set, id).await.expect("zscore")
}

#[tokio::test]
async fn a_pending_tasks_payload_and_level_change_in_one_call_and_nothing_else_does() {
    let b = broker().await;
    // A plain task (no record until edited) and one with a record, behind two others.
    let plain = put(&b, 1, EnqueueOptions::new()).await;
    let named = put(&b, 2, EnqueueOptions::new().task_id("named").max_retry(3)).await;
    put(&b, 3, EnqueueOptions::new()).await;
    let (_, _, before) = read(&b, &named).await;

    let edit = new_args(20).priority(level(1));
    assert_eq!(
        b.edit(&q(), &named, &edit).await.expect("edit"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.edit(&q(), &named, &edit).await.expect("again"),
        ActionOutcome::Already,
        "the task already is as asked"
    );
    let (state, prio, after) = read(&b, &named).await;
    assert_eq!(
        (state, prio, n_of(&after)),
        (TaskState::Pending, level(1), 20)
    );
    // Every other envelope field is kept, byte for byte once re-encoded.
    let kept = TaskEnvelope {
        payload: before.payload.clone(),
        ..after.clone()
    };
    assert_eq!(kept, before);
    assert_eq!(
        b.edit(&q(), &plain, &new_args(10)).await.expect("plain"),
        ActionOutcome::Done
    );
    let (state, prio, env) = read(&b, &plain).await;
    assert_eq!(
        (state, prio, n_of(&env)),
        (TaskState::Pending, Priority::NORMAL, 10)
    );
    assert_eq!(env.kind, Email::KIND);
    // Level 1 first; the edited plain task went to the end of its level.
    let order: Vec<u32> = fetch(&b, 10).await.into_iter().map(|(n, _)| n).collect();
    assert_eq!(order, vec![20, 3, 10]);
    assert_eq!(b.queue_stats(&q()).await.expect("stats").pending, 0);
}

#[tokio::test]
async fn a_run_time_schedules_a_pending_task_and_rescores_a_scheduled_or_retry_one() {
    let b = broker().await;
    let keys = b.keyspace().queue(&q());
    let id = put(&b, 1, EnqueueOptions::new().task_id("later")).await;
    let now = redis_ms(&b).await;
    let at = now + 3_600_000;
    let edit = TaskEdit::new().run_at(chronos_broker::Timestamp::from_unix_ms(at));
    assert_eq!(
        b.edit(&q(), &id, &edit).await.expect("edit"),
        ActionOutcome::Done
    );
    assert_eq!(read(&b, &id).await.0, TaskState::Scheduled);
    assert_eq!(score(&b, keys.scheduled(), &id).await, Some(at as f64));
    let entries: u64 = b.client().xlen(keys.stream()).await.expect("xlen");
    assert_eq!(entries, 0, "the pending entry left the stream");
    // A new payload while scheduled, then a time in the past: due now, not in the past.
    assert_eq!(
        b.edit(&q(), &id, &new_args(5).run_in(Duration::ZERO))
            .await
            .expect("due now"),
        ActionOutcome::Done
    );
    let s = score(&b, keys.scheduled(), &id)
        .await
        .expect("still scheduled");
    assert!(s >= now as f64 && s < at as f64, "{s}");
    assert_eq!(n_of(&read(&b, &id).await.2), 5);
    b.forward_due(&q(), 100).await.expect("forward");
    let got = fetch(&b, 1).await;
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![5]);

    // A retry task: re-scored in the retry set, with its attempt count kept.
    put(&b, 2, EnqueueOptions::new().task_id("failing")).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &q(), "w", 1, Duration::ZERO).await;
    let lease = &f.leases[0].id;
    assert!(b
        .retry(lease, Duration::from_secs(3600), "boom")
        .await
        .expect("retry"));
    let at = redis_ms(&b).await + 60_000;
    let edit = new_args(7).run_at(chronos_broker::Timestamp::from_unix_ms(at));
    assert_eq!(
        b.edit(&q(), "failing", &edit).await.expect("retry edit"),
        ActionOutcome::Done
    );
    assert_eq!(score(&b, keys.retry(), "failing").await, Some(at as f64));
    let r = b.task(&q(), "failing").await.expect("task").expect("there");
    let env = r.envelope.expect("envelope");
    assert_eq!((r.state, env.retried, n_of(&env)), (TaskState::Retry, 1, 7));
    assert_eq!(env.last_error.as_deref(), Some("boom"));
}

#[tokio::test]
async fn a_started_finished_or_archived_task_is_refused_and_left_as_it_was() {
    let b = broker().await;
    let id = put(&b, 1, EnqueueOptions::new()).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &q(), "w", 1, Duration::ZERO).await;
    assert_eq!(f.leases.len(), 1);
    for edit in [
        new_args(9),
        TaskEdit::new().priority(level(0)),
        TaskEdit::new().run_in(Duration::from_secs(60)),
    ] {
        assert_eq!(
            b.edit(&q(), &id, &edit).await.expect("active"),
            ActionOutcome::Refused(Some(TaskState::Active))
        );
    }
    let (state, _, env) = read(&b, &id).await;
    assert_eq!((state, n_of(&env)), (TaskState::Active, 1));

    let dead = put(&b, 2, EnqueueOptions::new().task_id("dead")).await;
    b.act(&q(), &dead, TaskAction::Archive)
        .await
        .expect("archive");
    assert_eq!(
        b.edit(&q(), &dead, &new_args(9)).await.expect("archived"),
        ActionOutcome::Refused(Some(TaskState::Archived))
    );
    assert_eq!(n_of(&read(&b, &dead).await.2), 2);
    assert_eq!(
        b.edit(&q(), "nope", &new_args(9)).await.expect("missing"),
        ActionOutcome::NotFound
    );
}

#[tokio::test]
async fn bad_edits_fail_before_anything_is_written() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Sms {
        to: String,
    }
    impl TaskArgs for Sms {
        const KIND: &'static str = "sms";
    }
    let b = broker().await;
    let id = put(&b, 1, EnqueueOptions::new().task_id("t")).await;
    let other = TaskEdit::new().args(&Sms { to: "x".into() }).expect("args");
    assert!(matches!(
        b.edit(&q(), &id, &other).await,
        Err(BrokerError::InvalidOption(m)) if m.contains("sms")
    ));
    // The test broker's payload limit is 4,096 bytes.
    assert!(matches!(
        b.edit(&q(), &id, &TaskEdit::new().payload(vec![0xc0; 5000]))
            .await,
        Err(BrokerError::PayloadTooLarge { size: 5000, .. })
    ));
    assert!(matches!(
        b.edit(&q(), &id, &TaskEdit::new()).await,
        Err(BrokerError::InvalidOption(_))
    ));
    assert_eq!(n_of(&read(&b, &id).await.2), 1);
}

#[tokio::test]
async fn a_task_a_worker_fetched_is_refused_as_active_and_its_delivery_runs_once() {
    // A fetched task's start mark may be skipped (a handler done within the mark window) or
    // its completion carried to the next fetch: a new delivery would run it twice (issue 35,
    // 2.17), so an edit or a prioritize refuses it as the delete and the archive do.
    let b = broker().await;
    let plain = put(&b, 1, EnqueueOptions::new()).await;
    put(&b, 2, EnqueueOptions::new().task_id("named")).await;
    put(
        &b,
        3,
        EnqueueOptions::new()
            .task_id("high")
            .priority(Priority::HIGH),
    )
    .await;
    let old = fetch(&b, 3).await;
    assert_eq!(old.len(), 3);
    let active = ActionOutcome::Refused(Some(TaskState::Active));
    for id in [plain.as_str(), "named", "high"] {
        assert_eq!(
            b.edit(&q(), id, &new_args(11)).await.expect("edit"),
            active,
            "{id}"
        );
        assert_eq!(
            b.prioritize(&q(), id, Priority::LOWEST)
                .await
                .expect("prioritize"),
            active,
            "{id}"
        );
    }
    let ids: Vec<_> = old.iter().map(|(_, l)| l.clone()).collect();
    let outcomes = b.start(&q(), &ids).await.expect("start");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, StartOutcome::Started(_))),
        "{outcomes:?}"
    );
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &q(), "w2", 10, Duration::ZERO).await;
    assert!(f.leases.is_empty(), "no second delivery: {:?}", f.leases);
}

#[tokio::test]
async fn a_tenant_task_keeps_its_place_inside_its_tenant() {
    let b = broker().await;
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(put(&b, n, EnqueueOptions::new().tenant("acme")).await);
    }
    assert_eq!(
        b.edit(&q(), &ids[1], &new_args(100)).await.expect("edit"),
        ActionOutcome::Done
    );
    // Scheduled for later: it leaves its tenant's waiting tasks.
    assert_eq!(
        b.edit(
            &q(),
            &ids[2],
            &TaskEdit::new().run_in(Duration::from_secs(600))
        )
        .await
        .expect("later"),
        ActionOutcome::Done
    );
    assert_eq!(read(&b, &ids[2]).await.0, TaskState::Scheduled);
    let page = b.tenants(&q(), 10).await.expect("tenants");
    assert_eq!(page.waiting, 3, "{page:?}");
    // The first one fetched (held against the tenant's cap) but not started: a worker's, so
    // an edit is refused and its delivery stays good.
    let first = fetch(&b, 1).await;
    assert_eq!(first[0].0, 0);
    assert_eq!(
        b.edit(&q(), &ids[0], &new_args(50)).await.expect("held"),
        ActionOutcome::Refused(Some(TaskState::Active))
    );
    let outcomes = b.start(&q(), &[first[0].1.clone()]).await.expect("start");
    assert!(
        matches!(outcomes[..], [StartOutcome::Started(_)]),
        "{outcomes:?}"
    );
    let mut order = Vec::new();
    for _ in 0..3 {
        order.extend(fetch(&b, 1).await.into_iter().map(|(n, _)| n));
    }
    assert_eq!(order, vec![100, 3]);
}

#[tokio::test]
async fn a_tenant_tasks_level_and_payload_change_together_and_it_moves_ahead_in_its_tenant() {
    let b = broker().await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(put(&b, n, EnqueueOptions::new().tenant("acme")).await);
    }
    // The inspector reads a pending tenant task's envelope from the tenant stream.
    assert_eq!(n_of(&read(&b, &ids[0]).await.2), 0);
    assert_eq!(
        b.edit(&q(), &ids[2], &new_args(200).priority(Priority::HIGHEST))
            .await
            .expect("edit"),
        ActionOutcome::Done
    );
    let (state, prio, env) = read(&b, &ids[2]).await;
    assert_eq!(
        (state, prio, n_of(&env)),
        (TaskState::Pending, Priority::HIGHEST, 200)
    );
    let mut order = Vec::new();
    for _ in 0..3 {
        order.extend(fetch(&b, 1).await.into_iter().map(|(n, _)| n));
    }
    assert_eq!(order, vec![200, 0, 1]);
}

#[tokio::test]
async fn an_edit_whose_reply_is_lost_is_re_sent_and_leaves_the_same_state() {
    let rig = rig().await;
    let keys = rig.direct.keyspace().queue(&q());
    let a = put(&rig.direct, 1, EnqueueOptions::new()).await;
    put(&rig.direct, 2, EnqueueOptions::new()).await;
    rig.lose_reply_of("edit");
    assert_eq!(
        rig.via
            .edit(&q(), &a, &new_args(30).priority(level(3)))
            .await
            .expect("re-sent"),
        ActionOutcome::Already,
        "the re-send finds the first run's work done"
    );
    rig.assert_lost(1);
    let (state, prio, env) = read(&rig.direct, &a).await;
    assert_eq!(
        (state, prio, n_of(&env)),
        (TaskState::Pending, level(3), 30)
    );
    let level3: u64 = rig
        .direct
        .client()
        .xlen(keys.lane(Some(3)))
        .await
        .expect("xlen");
    assert_eq!(level3, 1, "one delivery, not two");

    // A pending task sent to later, reply lost: scheduled once, no entry left behind.
    rig.lose_reply_of("edit");
    let at = redis_ms(&rig.direct).await + 600_000;
    assert_eq!(
        rig.via
            .edit(
                &q(),
                &a,
                &TaskEdit::new().run_at(chronos_broker::Timestamp::from_unix_ms(at))
            )
            .await
            .expect("re-sent"),
        ActionOutcome::Already
    );
    rig.assert_lost(2);
    assert_eq!(read(&rig.direct, &a).await.0, TaskState::Scheduled);
    assert_eq!(
        score(&rig.direct, keys.scheduled(), &a).await,
        Some(at as f64)
    );
    let level3: u64 = rig
        .direct
        .client()
        .xlen(keys.lane(Some(3)))
        .await
        .expect("xlen");
    assert_eq!(level3, 0);
    let stats = rig.direct.queue_stats(&q()).await.expect("stats");
    assert_eq!((stats.pending, stats.scheduled), (1, 1), "{stats:?}");
}
