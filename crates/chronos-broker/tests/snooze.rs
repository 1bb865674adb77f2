//! Snooze (`Consume::snooze`): a running task goes back for later with no attempt spent and no
//! error recorded, counted, bounded, and safe under a lost reply, for plain, recorded, levelled
//! and tenant tasks alike.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::HashesInterface;
use chronos_broker::{
    Client, Consume, EnqueueOptions, Inspect, Lease, Maintain, Priority, QueueName, RedisBroker,
    SettleExt, SnoozeOutcome, TaskState, TenantChange, Tenants,
};
use common::{broker, email, rig, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

async fn fetch(b: &RedisBroker, consumer: &str, count: usize) -> Vec<Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    take(
        b,
        &mut reader,
        &q("default"),
        consumer,
        count,
        Duration::ZERO,
    )
    .await
    .leases
}

#[tokio::test]
async fn a_snoozed_task_comes_back_later_with_no_attempt_spent_and_no_error() {
    let b = broker().await;
    let queue = q("default");
    // A plain task (no record until now) and one at another level.
    let client = Client::new(b.clone());
    let plain = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let urgent = client
        .enqueue(&email(2), EnqueueOptions::new().priority(Priority::HIGH))
        .await
        .expect("enqueue");
    let leases = fetch(&b, "w", 10).await;
    assert_eq!(leases.len(), 2);
    for l in &leases {
        let got = b
            .snooze(&l.id, Duration::from_millis(300), 10)
            .await
            .expect("snooze");
        assert_eq!(got, SnoozeOutcome::Snoozed { snoozes: 1 });
    }
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(
        (stats.pending, stats.active, stats.scheduled, stats.retry),
        (0, 0, 2, 0)
    );
    assert_eq!(stats.failed, 0, "a snooze is no failure");
    for id in [&plain.id, &urgent.id] {
        let rec = b.task(&queue, id).await.expect("task").expect("exists");
        assert_eq!((rec.state, rec.snoozes), (TaskState::Scheduled, 1));
        let env = rec.envelope.expect("envelope");
        assert_eq!((env.retried, env.last_error), (0, None));
    }
    // Not due yet: nothing to fetch.
    b.forward_due(&queue, 100).await.expect("forward");
    assert!(fetch(&b, "w", 10).await.is_empty());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 2);
    let again = fetch(&b, "w", 10).await;
    assert_eq!(again.len(), 2);
    // The urgent one kept its level: it comes first, and both are still on their first attempt.
    assert_eq!(again[0].id.task_id, urgent.id);
    for l in &again {
        assert_eq!(l.envelope.as_ref().expect("envelope").retried, 0);
    }
    // A second snooze counts on.
    assert_eq!(
        b.snooze(&again[0].id, Duration::from_secs(60), 10)
            .await
            .expect("snooze"),
        SnoozeOutcome::Snoozed { snoozes: 2 }
    );
}

#[tokio::test]
async fn a_task_at_its_most_snoozes_is_refused_and_stays_where_it_is() {
    let b = broker().await;
    let queue = q("default");
    Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = fetch(&b, "w", 1).await.remove(0);
    assert_eq!(
        b.snooze(&l.id, Duration::ZERO, 1).await.expect("snooze"),
        SnoozeOutcome::Snoozed { snoozes: 1 }
    );
    b.forward_due(&queue, 10).await.expect("forward");
    let l = fetch(&b, "w", 1).await.remove(0);
    assert_eq!(
        b.snooze(&l.id, Duration::ZERO, 1).await.expect("snooze"),
        SnoozeOutcome::TooMany { snoozes: 1 }
    );
    // Nothing changed: the delivery is still held, so the caller can dead-letter it.
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.active, stats.scheduled), (1, 0));
    assert!(b
        .dead_letter(&l.id, "snoozed too often", false)
        .await
        .is_ok());
    assert_eq!(b.queue_stats(&queue).await.expect("stats").archived, 1);
}

#[tokio::test]
async fn a_stale_lease_snoozes_nothing() {
    let b = broker().await;
    let queue = q("default");
    let info = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new().task_id("t1"))
        .await
        .expect("enqueue");
    let l = fetch(&b, "w", 1).await.remove(0);
    // The recoverer took it (as from a worker presumed dead) and delivered it again.
    tokio::time::sleep(Duration::from_millis(30)).await;
    b.reclaim_idle(&queue, Duration::from_millis(10), 10)
        .await
        .expect("reclaim");
    assert_eq!(
        b.snooze(&l.id, Duration::ZERO, 10).await.expect("snooze"),
        SnoozeOutcome::Stale
    );
    let rec = b
        .task(&queue, &info.id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!(rec.snoozes, 0);
    assert_ne!(rec.state, TaskState::Scheduled);
}

#[tokio::test]
async fn a_snoozed_tenant_task_frees_its_tenants_slot_and_comes_back_to_its_tenant() {
    let b = broker().await;
    let queue = q("default");
    b.change_tenant_settings(&queue, Some("a"), &TenantChange::new().concurrency(Some(1)))
        .await
        .expect("cap");
    let client = Client::new(b.clone());
    for n in 0..2 {
        client
            .enqueue(&email(n), EnqueueOptions::new().tenant("a"))
            .await
            .expect("enqueue");
    }
    let first = fetch(&b, "w", 10).await;
    assert_eq!(first.len(), 1, "the cap lets one run");
    assert_eq!(
        b.snooze(&first[0].id, Duration::from_millis(200), 10)
            .await
            .expect("snooze"),
        SnoozeOutcome::Snoozed { snoozes: 1 }
    );
    // Its slot is free at once: the other task starts.
    let second = fetch(&b, "w", 10).await;
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].id.task_id, first[0].id.task_id);
    let page = b.tenants(&queue, 10).await.expect("tenants");
    let a = page.tenants.iter().find(|t| t.tenant == "a").expect("a");
    assert_eq!((a.running, a.waiting), (1, 0), "{a:?}");
    // Due again, it waits for its tenant's slot, not in the plain stream.
    tokio::time::sleep(Duration::from_millis(250)).await;
    b.forward_due(&queue, 10).await.expect("forward");
    assert!(fetch(&b, "w", 10).await.is_empty(), "the cap still holds");
    let page = b.tenants(&queue, 10).await.expect("tenants");
    let a = page.tenants.iter().find(|t| t.tenant == "a").expect("a");
    assert_eq!((a.running, a.waiting), (1, 1), "{a:?}");
}

#[tokio::test]
async fn a_snooze_whose_reply_is_lost_counts_once_and_says_so() {
    let rig = rig().await;
    let queue = q("default");
    let lease = rig.running(EnqueueOptions::new()).await;
    rig.lose_reply_of("snooze");
    assert_eq!(
        rig.via
            .snooze(&lease.id, Duration::from_secs(60), 10)
            .await
            .expect("snooze"),
        SnoozeOutcome::Snoozed { snoozes: 1 }
    );
    rig.assert_lost(1);
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.active, stats.scheduled, stats.failed), (0, 1, 0));
    let key = rig.direct.keyspace().queue(&queue).task(&lease.id.task_id);
    let (sn, r): (String, String) = rig
        .direct
        .client()
        .hmget(key, vec!["sn", "r"])
        .await
        .expect("hmget");
    assert_eq!((sn.as_str(), r.as_str()), ("1", "0"));
}
