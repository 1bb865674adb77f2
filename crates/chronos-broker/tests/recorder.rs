//! The recording enqueuer of `chronos_broker::testing`: producer code runs unchanged on
//! `Client<Recorder>` and the test asserts on what it enqueued. Every test but the last needs no
//! Redis; the last enqueues the same tasks through the recorder and through a real client and
//! compares what each stored.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use chronos_broker::testing::Recorder;
use chronos_broker::time::OffsetDateTime;
use chronos_broker::{
    now_ms, BrokerError, Client, DeadLetter, Enqueue, EnqueueOptions, Inspect, QueueName,
    RedisBroker, TaskArgs, TaskInfo, TaskState,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Email {
    to: String,
}
impl TaskArgs for Email {
    const KIND: &'static str = "email";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    id: u64,
}
impl TaskArgs for Invoice {
    const KIND: &'static str = "invoice";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("billing")
    }
}

fn email(to: &str) -> Email {
    Email { to: to.into() }
}

/// Code under test, written as the module docs advise: generic over the broker.
async fn notify<B: Enqueue>(client: &Client<B>, to: &str) -> Result<TaskInfo, BrokerError> {
    client
        .enqueue(
            &email(to),
            EnqueueOptions::new().queue("mail").header("lang", "de"),
        )
        .await
}

fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("the assertion should fail");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[tokio::test]
async fn typed_query_returns_decoded_args_queue_headers_and_options() {
    let recorder = Recorder::new();
    let client = Client::new(recorder.clone());
    let info = notify(&client, "a@example.com").await.expect("enqueue");
    let deadline = OffsetDateTime::now_utc() + Duration::from_secs(3600);
    client
        .enqueue(
            &Invoice { id: 9 },
            EnqueueOptions::new()
                .max_retry(3)
                .timeout(Duration::from_secs(30))
                .deadline(deadline)
                .retention(Duration::from_secs(600))
                .discard_on_dead_letter()
                .unique(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");

    let emails = recorder.enqueued::<Email>();
    assert_eq!(emails.len(), 1, "only tasks of the asked kind");
    let e = &emails[0];
    assert_eq!(e.args, email("a@example.com"));
    assert_eq!(
        (e.id.as_str(), e.queue.as_str()),
        (info.id.as_str(), "mail")
    );
    assert_eq!(e.state, TaskState::Pending);
    assert_eq!(e.header("lang"), Some("de"));
    assert_eq!(e.max_retry, chronos_broker::DEFAULT_MAX_RETRY);

    let inv = recorder.assert_enqueued::<Invoice>(|t| t.args.id == 9);
    assert_eq!(inv.queue, "billing", "the kind's default options apply");
    assert_eq!(inv.max_retry, 3);
    assert_eq!(inv.timeout, Some(Duration::from_secs(30)));
    assert_eq!(inv.deadline_ms, Some(chronos_broker::unix_ms(deadline)));
    assert_eq!(inv.retention, Some(Duration::from_secs(600)));
    assert_eq!(inv.dead_letter, DeadLetter::Discard);
    assert_eq!(inv.unique_ttl, Some(Duration::from_secs(60)));
    assert_eq!(recorder.len(), 2);
    assert_eq!(recorder.tasks()[1].info.kind, "invoice", "in enqueue order");
}

#[tokio::test]
async fn a_delayed_task_is_scheduled_at_its_run_at_and_a_past_one_runs_now() {
    let recorder = Recorder::new();
    let client = Client::new(&recorder);
    let before = now_ms();
    let later = client
        .enqueue(
            &email("later"),
            EnqueueOptions::new().process_in(Duration::from_secs(90)),
        )
        .await
        .expect("enqueue");
    let after = now_ms();
    assert_eq!(later.state, TaskState::Scheduled);
    assert!((before + 90_000..=after + 90_000).contains(&later.run_at_ms));

    let at = OffsetDateTime::now_utc() + Duration::from_secs(7200);
    let fixed = client
        .enqueue(&email("fixed"), EnqueueOptions::new().process_at(at))
        .await
        .expect("enqueue");
    assert_eq!(
        (fixed.state, fixed.run_at_ms),
        (TaskState::Scheduled, chronos_broker::unix_ms(at))
    );

    let past = OffsetDateTime::now_utc() - Duration::from_secs(60);
    let now = client
        .enqueue(&email("past"), EnqueueOptions::new().process_at(past))
        .await
        .expect("enqueue");
    assert_eq!(now.state, TaskState::Pending);
    assert!(
        now.run_at_ms >= after,
        "a past run-at runs now, as in Redis"
    );

    let t = recorder.assert_enqueued::<Email>(|t| t.args.to == "later");
    assert!(t.is_scheduled());
    assert_eq!(t.run_at_ms, later.run_at_ms);
}

#[tokio::test]
async fn a_unique_task_is_refused_while_its_lock_is_held_and_recorded_once() {
    let recorder = Recorder::new();
    let client = Client::new(recorder.clone());
    let unique = || EnqueueOptions::new().unique(Duration::from_secs(60));
    client.enqueue(&email("x"), unique()).await.expect("first");
    match client.enqueue(&email("x"), unique()).await {
        Err(BrokerError::DuplicateTask { queue }) => assert_eq!(queue, "default"),
        other => panic!("expected DuplicateTask, got {other:?}"),
    }
    // Another payload, or another queue, is another lock.
    client
        .enqueue(&email("y"), unique())
        .await
        .expect("other payload");
    client
        .enqueue(&email("x"), unique().queue("other"))
        .await
        .expect("other queue");
    recorder.assert_enqueued_count::<Email>(3);
    // A lock ends with its TTL.
    let short = EnqueueOptions::new().unique(Duration::from_millis(1));
    client.enqueue(&email("z"), short.clone()).await.expect("z");
    tokio::time::sleep(Duration::from_millis(5)).await;
    client
        .enqueue(&email("z"), short)
        .await
        .expect("after the TTL");
    // Clearing forgets tasks and locks.
    recorder.clear();
    recorder.assert_nothing_enqueued();
    client
        .enqueue(&email("x"), unique())
        .await
        .expect("after clear");
}

#[tokio::test]
async fn an_explicit_id_answers_the_same_task_again_and_refuses_another() {
    let recorder = Recorder::new();
    let client = Client::new(recorder.clone());
    let opts = || EnqueueOptions::new().task_id("order-1");
    let first = client.enqueue(&email("a"), opts()).await.expect("first");
    let again = client.enqueue(&email("a"), opts()).await.expect("again");
    assert_eq!(first, again);
    assert_eq!(recorder.len(), 1, "the same task is stored once");
    match client.enqueue(&email("b"), opts()).await {
        Err(BrokerError::TaskIdConflict { id, .. }) => assert_eq!(id, "order-1"),
        other => panic!("expected TaskIdConflict, got {other:?}"),
    }
}

#[tokio::test]
async fn a_batch_answers_each_task_in_order_and_refuses_only_the_bad_ones() {
    let recorder = Recorder::new().max_payload_bytes(64);
    let client = Client::new(recorder.clone());
    let unique = EnqueueOptions::new().unique(Duration::from_secs(60));
    let big = email(&"x".repeat(100));
    let (a, b) = (email("a"), email("b"));
    let results = client
        .enqueue_batch([
            (&a, unique.clone()),
            (&b, EnqueueOptions::new().queue("bad queue")),
            (&a, unique.clone()),
            (&big, EnqueueOptions::new()),
            (&b, EnqueueOptions::new().process_in(Duration::from_secs(5))),
        ])
        .await
        .expect("batch");
    assert_eq!(results.len(), 5);
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(BrokerError::InvalidQueue { .. })));
    assert!(matches!(results[2], Err(BrokerError::DuplicateTask { .. })));
    assert!(matches!(
        results[3],
        Err(BrokerError::PayloadTooLarge { size: _, limit: 64 })
    ));
    assert_eq!(
        results[4].as_ref().map(|i| i.state).ok(),
        Some(TaskState::Scheduled)
    );
    let stored: Vec<String> = recorder
        .enqueued::<Email>()
        .into_iter()
        .map(|t| t.args.to)
        .collect();
    assert_eq!(stored, ["a", "b"]);
}

#[tokio::test]
async fn failed_assertions_say_what_was_enqueued() {
    let recorder = Recorder::new();
    recorder.assert_nothing_enqueued();
    let client = recorder.client();
    notify(&client, "a@example.com").await.expect("enqueue");

    let msg = panic_message(|| {
        recorder.assert_enqueued::<Email>(|t| t.args.to == "b@example.com");
    });
    assert!(
        msg.contains(r#"expected an enqueued "email" task that matches"#),
        "{msg}"
    );
    assert!(msg.contains("queue=mail"), "{msg}");
    assert!(msg.contains(r#"args={"to":"a@example.com"}"#), "{msg}");
    assert!(msg.contains(r#"{"lang": "de"}"#), "{msg}");

    let msg = panic_message(|| recorder.assert_nothing_enqueued());
    assert!(msg.contains("expected nothing enqueued"), "{msg}");
    let msg = panic_message(|| recorder.assert_enqueued_count::<Email>(2));
    assert!(
        msg.contains("expected 2 enqueued \"email\" task(s), found 1"),
        "{msg}"
    );
    let msg = panic_message(|| recorder.refute_enqueued::<Email>(|t| t.queue == "mail"));
    assert!(msg.contains("expected no enqueued \"email\" task"), "{msg}");
    recorder.refute_enqueued::<Email>(|t| t.queue == "default");
    recorder.refute_enqueued::<Invoice>(|_| true);

    let drained = recorder.drain();
    assert_eq!(drained.len(), 1);
    assert_eq!(
        drained[0].args::<Email>().expect("decodes"),
        email("a@example.com")
    );
    assert!(drained[0].args::<Invoice>().is_err(), "another kind");
    recorder.assert_nothing_enqueued();
}

/// The recorder stores what a real client writes: the same args and options, enqueued through
/// both, give the same answers and the same envelopes (but for the enqueue time, which is each
/// one's own clock), and the same refusals.
#[tokio::test]
async fn recorded_tasks_are_what_a_redis_client_writes() {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let redis = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let real = Client::new(redis.clone());
    let recorder = Recorder::new();
    let fake = Client::new(recorder.clone());
    let at = OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let cases = [
        (email("plain"), EnqueueOptions::new().task_id("t-plain")),
        (
            email("all-options"),
            EnqueueOptions::new()
                .task_id("t-all")
                .queue("mail")
                .max_retry(4)
                .timeout(Duration::from_secs(20))
                .deadline(at)
                .retention(Duration::from_secs(300))
                .discard_on_dead_letter()
                .unique(Duration::from_secs(60))
                .header("tenant", "acme"),
        ),
        (
            email("delayed"),
            EnqueueOptions::new().task_id("t-delayed").process_at(at),
        ),
    ];
    for (args, opts) in &cases {
        let want = real
            .enqueue(args, opts.clone())
            .await
            .expect("redis enqueue");
        let got = fake
            .enqueue(args, opts.clone())
            .await
            .expect("recorder enqueue");
        assert_eq!(got.state, want.state, "{args:?}");
        if want.state == TaskState::Scheduled {
            assert_eq!(got.run_at_ms, want.run_at_ms, "{args:?}");
        }
        assert_eq!(
            (&got.id, &got.queue, &got.kind),
            (&want.id, &want.queue, &want.kind)
        );

        let q = QueueName::new(want.queue.as_str()).expect("queue");
        let stored = redis
            .task(&q, &want.id)
            .await
            .expect("read")
            .expect("stored")
            .envelope
            .expect("decodes");
        let mut recorded = recorder
            .tasks()
            .into_iter()
            .find(|t| t.info.id == want.id)
            .expect("recorded")
            .envelope;
        recorded.enqueued_at_ms = stored.enqueued_at_ms;
        assert_eq!(recorded, stored, "{args:?}");
    }
    // The same refusals: a held unique lock, and an id taken by another task.
    let (args, opts) = &cases[1];
    let again = opts.clone().task_id("t-all-2");
    let refused = |r: Result<TaskInfo, BrokerError>| match r {
        Err(e @ BrokerError::DuplicateTask { .. }) => e.to_string(),
        other => panic!("expected DuplicateTask, got {other:?}"),
    };
    assert_eq!(
        refused(fake.enqueue(args, again.clone()).await),
        refused(real.enqueue(args, again).await)
    );
    let conflict = |r: Result<TaskInfo, BrokerError>| match r {
        Err(e @ BrokerError::TaskIdConflict { .. }) => e.to_string(),
        other => panic!("expected TaskIdConflict, got {other:?}"),
    };
    let other = email("other");
    let taken = EnqueueOptions::new().task_id("t-plain");
    assert_eq!(
        conflict(fake.enqueue(&other, taken.clone()).await),
        conflict(real.enqueue(&other, taken).await)
    );
    // The same task again is answered, not stored twice, by both.
    let (args, opts) = &cases[0];
    assert_eq!(
        fake.enqueue(args, opts.clone()).await.expect("again").state,
        real.enqueue(args, opts.clone()).await.expect("again").state
    );
    assert_eq!(recorder.len(), cases.len());
}

/// Deduplicated enqueues: the recorder answers each mode as Redis does (outcome, the task
/// named, its state), and the holder carries the payload Redis gives it.
#[tokio::test]
async fn deduplicated_enqueues_are_answered_as_redis_answers_them() {
    use chronos_broker::{Dedup, DedupMode, EnqueueOutcome};
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let redis = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let real = Client::new(redis.clone());
    let recorder = Recorder::new();
    let fake = recorder.client();
    let long = Duration::from_secs(60);
    let modes = [
        ("r", Dedup::key("r")),
        (
            "t",
            Dedup::key("t").mode(DedupMode::Throttle { window: long }),
        ),
        ("p", Dedup::key("p").mode(DedupMode::Replace)),
        (
            "d",
            Dedup::key("d").mode(DedupMode::Debounce {
                delay: long,
                max_wait: long * 2,
            }),
        ),
        ("h", Dedup::payload().mode(DedupMode::Replace)),
    ];
    for (name, dedup) in modes {
        let opts = EnqueueOptions::new().queue("dd").dedup(dedup);
        let mut firsts = Vec::new();
        for to in ["first", "second"] {
            let args = email(&format!("{name}-{to}"));
            let want = real.enqueue(&args, opts.clone()).await.expect("redis");
            let got = fake.enqueue(&args, opts.clone()).await.expect("recorder");
            assert_eq!(
                (got.outcome, got.state),
                (want.outcome, want.state),
                "{name} {to}"
            );
            if to == "first" {
                firsts = vec![want.id.clone(), got.id.clone()];
            } else if got.outcome != EnqueueOutcome::Created {
                // Both name their own first task: the holder.
                assert_eq!((&want.id, &got.id), (&firsts[0], &firsts[1]), "{name}");
            }
        }
        let held = recorder
            .tasks()
            .into_iter()
            .find(|t| t.info.id == firsts[1])
            .expect("recorded")
            .args::<Email>()
            .expect("decodes");
        let stored = redis
            .task(&QueueName::new("dd").expect("queue"), &firsts[0])
            .await
            .expect("read")
            .expect("stored")
            .envelope
            .expect("decodes");
        let stored: Email = chronos_broker::decode_args(&stored.payload).expect("payload");
        assert_eq!(held, stored, "{name}: the holder's payload");
    }
}
