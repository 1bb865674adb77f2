//! Deduplication modes (`EnqueueOptions::dedup`): what a second enqueue of a key answers and
//! does in each mode, when the lock is let go, and that a lost reply or a holder starting at
//! the same moment neither loses nor doubles a task.

mod common;

use std::time::Duration;

use chronos_broker::{
    decode_args, Client, Completion, Consume, Dedup, DedupMode, EnqueueOptions, EnqueueOutcome,
    Inspect, Lease, Maintain, QueueName, RedisBroker, Release, SettleExt, StartOutcome, TaskInfo,
    TaskState,
};
use common::{broker, email, redis_ms, rig, take, Email};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn put(b: &RedisBroker, n: u32, dedup: Dedup) -> TaskInfo {
    Client::new(b.clone())
        .enqueue(&email(n), EnqueueOptions::new().dedup(dedup))
        .await
        .expect("enqueue")
}

/// Fetches and starts like a worker.
async fn run(b: &RedisBroker, count: usize) -> Vec<Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    take(b, &mut reader, &q(), "w", count, Duration::ZERO)
        .await
        .leases
}

async fn complete(b: &RedisBroker, leases: &[Lease]) {
    let done: Vec<Completion> = leases
        .iter()
        .map(|l| Completion {
            lease: l.id.clone(),
            retention: None,
            result: None,
        })
        .collect();
    b.complete(&q(), &done).await.expect("complete");
}

fn n_of(l: &Lease) -> u32 {
    let env = l.envelope.as_ref().expect("envelope");
    decode_args::<Email>(&env.payload).expect("payload").n
}

async fn counts(b: &RedisBroker) -> (u64, u64, u64) {
    let s = b.queue_stats(&q()).await.expect("stats");
    (s.pending, s.active, s.scheduled)
}

#[tokio::test]
async fn reject_answers_the_holder_until_the_holder_finishes() {
    let b = broker().await;
    let key = Dedup::key("report:7");
    let first = put(&b, 1, key.clone()).await;
    assert_eq!(first.outcome, EnqueueOutcome::Created);
    // Another payload, the same key: a duplicate of the first, nothing written.
    let second = put(&b, 2, key.clone()).await;
    assert_eq!(
        (second.outcome, &second.id, second.state),
        (EnqueueOutcome::Duplicate, &first.id, TaskState::Pending)
    );
    assert_eq!(counts(&b).await, (1, 0, 0));
    // Running does not let go (release on finish is Reject's default); finishing does.
    let leases = run(&b, 10).await;
    let third = put(&b, 3, key.clone()).await;
    assert_eq!(
        (third.outcome, third.state),
        (EnqueueOutcome::Duplicate, TaskState::Active)
    );
    complete(&b, &leases).await;
    let fourth = put(&b, 4, key).await;
    assert_eq!(fourth.outcome, EnqueueOutcome::Created);
    assert_ne!(fourth.id, first.id);
    // The payload hash is the key when none is given.
    let by_payload = Dedup::payload();
    assert_eq!(
        put(&b, 9, by_payload.clone()).await.outcome,
        EnqueueOutcome::Created
    );
    assert_eq!(
        put(&b, 9, by_payload.clone()).await.outcome,
        EnqueueOutcome::Duplicate
    );
    assert_eq!(
        put(&b, 10, by_payload).await.outcome,
        EnqueueOutcome::Created
    );
    // Counted by mode, cluster-wide, in the queue's stats.
    let counted = b.queue_stats(&q()).await.expect("stats").deduplicated;
    assert_eq!(
        (counted.reject, counted.throttle, counted.replace),
        (3, 0, 0)
    );
}

#[tokio::test]
async fn throttle_keeps_the_first_enqueue_for_its_whole_window_even_after_it_completed() {
    let b = broker().await;
    let key = Dedup::key("sync:acme").mode(DedupMode::Throttle { window: ms(600) });
    let first = put(&b, 1, key.clone()).await;
    assert_eq!(first.outcome, EnqueueOutcome::Created);
    let leases = run(&b, 10).await;
    complete(&b, &leases).await;
    // Completed and gone, yet the window holds.
    let again = put(&b, 2, key.clone()).await;
    assert_eq!(
        (again.outcome, &again.id, again.state),
        (EnqueueOutcome::Duplicate, &first.id, TaskState::Completed)
    );
    assert_eq!(counts(&b).await, (0, 0, 0));
    tokio::time::sleep(ms(700)).await;
    assert_eq!(put(&b, 3, key).await.outcome, EnqueueOutcome::Created);
    let counted = b.queue_stats(&q()).await.expect("stats").deduplicated;
    assert_eq!((counted.reject, counted.throttle), (0, 1));
}

#[tokio::test]
async fn replace_gives_the_waiting_task_the_latest_payload_until_it_starts() {
    let b = broker().await;
    let key = Dedup::key("profile:42").mode(DedupMode::Replace);
    let first = put(&b, 1, key.clone()).await;
    let second = put(&b, 2, key.clone()).await;
    assert_eq!(
        (second.outcome, &second.id),
        (EnqueueOutcome::Replaced, &first.id)
    );
    let third = put(&b, 3, key.clone()).await;
    assert_eq!(third.outcome, EnqueueOutcome::Replaced);
    assert_eq!(counts(&b).await, (1, 0, 0), "still one task");
    let leases = run(&b, 10).await;
    assert_eq!(leases.len(), 1);
    assert_eq!(
        (leases[0].id.task_id.as_str(), n_of(&leases[0])),
        (first.id.as_str(), 3)
    );
    // Started: the key is free (Replace lets go on start), so the next enqueue is a new task
    // and the running one keeps its payload.
    let fourth = put(&b, 4, key.clone()).await;
    assert_eq!(fourth.outcome, EnqueueOutcome::Created);
    assert_ne!(fourth.id, first.id);
    complete(&b, &leases).await;
    // A scheduled holder keeps its run time.
    let later = Dedup::key("profile:43").mode(DedupMode::Replace);
    let s1 = Client::new(b.clone())
        .enqueue(
            &email(5),
            EnqueueOptions::new()
                .dedup(later.clone())
                .process_in(ms(60_000)),
        )
        .await
        .expect("enqueue");
    let s2 = put(&b, 6, later).await;
    assert_eq!(
        (s2.outcome, &s2.id, s2.state, s2.run_at_ms),
        (
            EnqueueOutcome::Replaced,
            &s1.id,
            TaskState::Scheduled,
            s1.run_at_ms
        )
    );
    let rec = b.task(&q(), &s1.id).await.expect("task").expect("exists");
    let env = rec.envelope.expect("envelope");
    assert_eq!(decode_args::<Email>(&env.payload).expect("payload").n, 6);
    let counted = b.queue_stats(&q()).await.expect("stats").deduplicated;
    assert_eq!((counted.replace, counted.reject), (3, 0));
}

#[tokio::test]
async fn replace_released_on_finish_answers_a_running_holder_as_a_duplicate() {
    let b = broker().await;
    let key = Dedup::key("k")
        .mode(DedupMode::Replace)
        .release(Release::OnFinish);
    let first = put(&b, 1, key.clone()).await;
    let leases = run(&b, 10).await;
    let second = put(&b, 2, key.clone()).await;
    assert_eq!(
        (second.outcome, &second.id, second.state),
        (EnqueueOutcome::Duplicate, &first.id, TaskState::Active)
    );
    assert_eq!(n_of(&leases[0]), 1);
    complete(&b, &leases).await;
    assert_eq!(put(&b, 3, key).await.outcome, EnqueueOutcome::Created);
}

#[tokio::test]
async fn debounce_pushes_the_run_time_but_never_past_max_wait() {
    let b = broker().await;
    let key = Dedup::key("reindex:user:42").mode(DedupMode::Debounce {
        delay: ms(300),
        max_wait: ms(700),
    });
    let t0 = redis_ms(&b).await;
    let first = put(&b, 1, key.clone()).await;
    assert_eq!(
        (first.outcome, first.state),
        (EnqueueOutcome::Created, TaskState::Scheduled)
    );
    assert!(
        (first.run_at_ms - t0 - 300).abs() < 100,
        "{}",
        first.run_at_ms - t0
    );
    let mut last = first.run_at_ms;
    // Every 150 ms, under the delay: each enqueue pushes the run time, up to t0 + 700.
    for n in 2..=6 {
        tokio::time::sleep(ms(150)).await;
        let got = put(&b, n, key.clone()).await;
        assert_eq!(
            (got.outcome, &got.id),
            (EnqueueOutcome::Extended, &first.id)
        );
        assert!(got.run_at_ms >= last, "the run time never moves back");
        assert!(
            got.run_at_ms <= first.run_at_ms - 300 + 700 + 5,
            "past max_wait by {} ms",
            got.run_at_ms - (first.run_at_ms - 300 + 700)
        );
        last = got.run_at_ms;
        if got.state == TaskState::Pending {
            break;
        }
    }
    assert_eq!(counts(&b).await.0 + counts(&b).await.2, 1, "still one task");
    // Due by max_wait at the latest: it runs once, with the last payload.
    tokio::time::sleep(ms(800)).await;
    b.forward_due(&q(), 100).await.expect("forward");
    let leases = run(&b, 10).await;
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].id.task_id, first.id);
    assert!(
        n_of(&leases[0]) >= 5,
        "the last payload: {}",
        n_of(&leases[0])
    );
    // Its record says when the run began; the next enqueue starts a new run.
    let next = put(&b, 10, key).await;
    assert_eq!(next.outcome, EnqueueOutcome::Created);
    let counted = b.queue_stats(&q()).await.expect("stats").deduplicated;
    assert!(counted.debounce >= 2, "{counted:?}");
}

#[tokio::test]
async fn a_debounce_at_the_moment_the_holder_starts_loses_and_doubles_nothing() {
    let b = broker().await;
    let key = Dedup::key("d").mode(DedupMode::Debounce {
        delay: ms(1),
        max_wait: ms(10_000),
    });
    // 1. The holder was fetched but not started when the debounce came: its delivery is
    //    withdrawn (start answers Lost), and the task runs later once, with the new payload.
    let first = put(&b, 1, key.clone()).await;
    tokio::time::sleep(ms(20)).await;
    b.forward_due(&q(), 100).await.expect("forward");
    let mut reader = b.open_reader().await.expect("reader");
    let fetched = b
        .fetch(&mut reader, &q(), "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(fetched.leases.len(), 1);
    let bounce = Dedup::key("d").mode(DedupMode::Debounce {
        delay: ms(100),
        max_wait: ms(10_000),
    });
    let second = put(&b, 2, bounce).await;
    assert_eq!(
        (second.outcome, &second.id),
        (EnqueueOutcome::Extended, &first.id)
    );
    let ids: Vec<_> = fetched.leases.iter().map(|l| l.id.clone()).collect();
    let started = b.start(&q(), &ids).await.expect("start");
    assert!(matches!(started[0], StartOutcome::Lost), "{:?}", started[0]);
    tokio::time::sleep(ms(150)).await;
    b.forward_due(&q(), 100).await.expect("forward");
    let leases = run(&b, 10).await;
    assert_eq!(leases.len(), 1);
    assert_eq!(
        (leases[0].id.task_id.as_str(), n_of(&leases[0])),
        (first.id.as_str(), 2)
    );
    // 2. The holder started first: the key was let go with the start, so the debounce is a
    //    new task and the running one keeps its payload. Both run, each once.
    let third = put(&b, 3, key).await;
    assert_eq!(third.outcome, EnqueueOutcome::Created);
    assert_ne!(third.id, first.id);
    complete(&b, &leases).await;
    tokio::time::sleep(ms(20)).await;
    b.forward_due(&q(), 100).await.expect("forward");
    let last = run(&b, 10).await;
    assert_eq!(last.len(), 1);
    assert_eq!(n_of(&last[0]), 3);
}

#[tokio::test]
async fn lost_replies_answer_the_same_outcome_and_write_once() {
    let rig = rig().await;
    let key = Dedup::key("lost").mode(DedupMode::Replace);
    let first = put(&rig.via, 1, key.clone()).await;
    // The enqueue's reply is lost: the re-send answers from the call's receipt.
    rig.lose_reply_of("enqueue");
    let second = put(&rig.via, 2, key.clone()).await;
    rig.assert_lost(1);
    assert_eq!(
        (second.outcome, &second.id),
        (EnqueueOutcome::Replaced, &first.id)
    );
    // The edit's reply is lost: the re-send finds the holder already as asked.
    rig.lose_reply_of("edit");
    let third = put(&rig.via, 3, key).await;
    rig.assert_lost(2);
    assert_eq!(
        (third.outcome, &third.id),
        (EnqueueOutcome::Replaced, &first.id)
    );
    assert_eq!(counts(&rig.direct).await, (1, 0, 0));
    let leases = run(&rig.direct, 10).await;
    assert_eq!(n_of(&leases[0]), 3);
    // A duplicate's lost reply: the receipt names the holder again.
    let reject = Dedup::key("lost-reject");
    let holder = put(&rig.via, 4, reject.clone()).await;
    rig.lose_reply_of("enqueue");
    let dup = put(&rig.via, 5, reject).await;
    rig.assert_lost(3);
    assert_eq!(
        (dup.outcome, &dup.id),
        (EnqueueOutcome::Duplicate, &holder.id)
    );
}

#[tokio::test]
async fn a_lock_released_at_expiry_outlives_its_task_and_unique_still_errs() {
    let b = broker().await;
    let key = Dedup::key("x").ttl(ms(500)).release(Release::AtExpiry);
    let first = put(&b, 1, key.clone()).await;
    let leases = run(&b, 10).await;
    complete(&b, &leases).await;
    let again = put(&b, 2, key.clone()).await;
    assert_eq!(
        (again.outcome, &again.id),
        (EnqueueOutcome::Duplicate, &first.id)
    );
    tokio::time::sleep(ms(600)).await;
    assert_eq!(put(&b, 3, key).await.outcome, EnqueueOutcome::Created);
    // `unique` keeps its error.
    let client = Client::new(b.clone());
    let opts = || EnqueueOptions::new().unique(Duration::from_secs(60));
    client.enqueue(&email(7), opts()).await.expect("first");
    let err = client
        .enqueue(&email(7), opts())
        .await
        .expect_err("duplicate");
    assert!(matches!(
        err,
        chronos_broker::BrokerError::DuplicateTask { .. }
    ));
    // Bad options are refused before anything is sent.
    let bad = client
        .enqueue(&email(8), EnqueueOptions::new().dedup(Dedup::key("a b")))
        .await
        .expect_err("bad key");
    assert!(matches!(bad, chronos_broker::BrokerError::InvalidOption(_)));
}
