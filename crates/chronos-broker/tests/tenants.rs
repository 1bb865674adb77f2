//! Fair sharing between the tenants of one queue: the rotation, weights, the concurrency cap
//! and its tokens through every way a delivery ends, pause, the backlog cap, blocked readers,
//! and lost replies of the tenant scripts.

mod common;

use std::time::{Duration, Instant};

use chronos_broker::{
    BrokerError, Client, Completion, Consume, EnqueueOptions, Lease, Maintain, Priority, QueueName,
    RedisBroker, SettleExt, TenantChange, Tenants,
};
use common::{broker, calls_of, email, reset_stats, rig, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

/// Enqueues `email(n)` for `tenant`, each in one batch call.
async fn put(b: &RedisBroker, tenant: &str, ns: std::ops::Range<u32>, opts: EnqueueOptions) {
    let items: Vec<_> = ns.map(email).collect();
    let res = Client::new(b.clone())
        .enqueue_batch(items.iter().map(|e| (e, opts.clone().tenant(tenant))))
        .await
        .expect("enqueue");
    for r in res {
        r.expect("enqueued");
    }
}

fn n_of(l: &Lease) -> u32 {
    let env = l.envelope.as_ref().expect("envelope");
    rmp_serde::from_slice::<common::Email>(&env.payload)
        .expect("payload")
        .n
}

/// One fetch of up to `count`, started.
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

async fn complete(b: &RedisBroker, leases: &[Lease]) {
    let done: Vec<Completion> = leases
        .iter()
        .map(|l| Completion {
            lease: l.id.clone(),
            retention: None,
            result: None,
        })
        .collect();
    b.complete(&q("default"), &done).await.expect("complete");
}

async fn set(b: &RedisBroker, tenant: Option<&str>, change: TenantChange) {
    b.change_tenant_settings(&q("default"), tenant, &change)
        .await
        .expect("settings");
}

#[tokio::test]
async fn one_tenants_backlog_never_keeps_anothers_task_waiting() {
    let b = broker().await;
    put(&b, "big", 0..2000, EnqueueOptions::new()).await;
    // Some of the big tenant's tasks run first, then a small tenant's single task arrives.
    let mut starts = Vec::new();
    for _ in 0..5 {
        let got = fetch(&b, "w", 1).await;
        complete(&b, &got).await;
        starts.extend(got.iter().map(n_of));
    }
    put(&b, "small", 10_000..10_001, EnqueueOptions::new()).await;
    let mut behind = 0;
    loop {
        let got = fetch(&b, "w", 1).await;
        assert_eq!(got.len(), 1);
        complete(&b, &got).await;
        if n_of(&got[0]) == 10_000 {
            break;
        }
        behind += 1;
        assert!(behind < 100, "the small tenant's task is still waiting");
    }
    assert!(
        behind <= 1,
        "started {behind} of the big tenant's tasks first"
    );
    // The big tenant's own order held: 0, 1, 2, ...
    assert_eq!(starts, vec![0, 1, 2, 3, 4]);
    let page = b.tenants(&q("default"), 10).await.expect("tenants");
    assert_eq!(page.tenants.len(), 1, "{page:?}");
    assert_eq!(page.tenants[0].tenant, "big");
    assert_eq!(page.waiting, 2000 - 5 - behind as u64);
    assert_eq!(page.running, 0);
}

#[tokio::test]
async fn weights_share_the_starts_and_an_idle_tenant_saves_no_credit() {
    let b = broker().await;
    set(&b, Some("gold"), TenantChange::new().weight(Some(3))).await;
    put(&b, "gold", 0..100, EnqueueOptions::new()).await;
    put(&b, "iron", 1000..1100, EnqueueOptions::new()).await;
    let got = fetch(&b, "w", 40).await;
    let gold = got.iter().filter(|l| n_of(l) < 1000).count();
    assert_eq!(got.len(), 40);
    assert!((29..=31).contains(&gold), "gold started {gold} of 40");
    complete(&b, &got).await;
    // Work-conserving: with one tenant left, it takes every start.
    let all = fetch(&b, "w", 1000).await;
    assert_eq!(all.len(), 160);
    complete(&b, &all).await;
    // Idle for a while, the iron tenant comes back at the current turn: it shares from now on
    // instead of taking every start until it "catches up".
    put(&b, "gold", 200..300, EnqueueOptions::new()).await;
    let first = fetch(&b, "w", 20).await;
    complete(&b, &first).await;
    put(&b, "iron", 2000..2100, EnqueueOptions::new()).await;
    let next = fetch(&b, "w", 8).await;
    let iron = next.iter().filter(|l| n_of(l) >= 2000).count();
    assert!((1..=3).contains(&iron), "iron started {iron} of the next 8");
}

#[tokio::test]
async fn a_tenants_cap_holds_across_consumers_and_every_way_a_delivery_ends_frees_it() {
    let b = broker().await;
    set(&b, Some("a"), TenantChange::new().concurrency(Some(2))).await;
    put(&b, "a", 0..10, EnqueueOptions::new().max_retry(5)).await;
    put(&b, "b", 100..103, EnqueueOptions::new()).await;
    // Three consumers (as three servers would): a's cap counts across them.
    let w1 = fetch(&b, "w1", 10).await;
    let w2 = fetch(&b, "w2", 10).await;
    let w3 = fetch(&b, "w3", 10).await;
    let a_of = |ls: &[Lease]| ls.iter().filter(|l| n_of(l) < 100).count();
    assert_eq!(a_of(&w1) + a_of(&w2) + a_of(&w3), 2, "{w1:?} {w2:?} {w3:?}");
    assert_eq!(
        w1.len() + w2.len() + w3.len(),
        5,
        "b's three run beside them"
    );
    let held: Vec<Lease> = [w1, w2, w3]
        .into_iter()
        .flatten()
        .filter(|l| n_of(l) < 100)
        .collect();
    // A completion frees one slot.
    complete(&b, &held[..1]).await;
    let next = fetch(&b, "w1", 10).await;
    assert_eq!(next.len(), 1);
    // A retry frees it too, and the retried task comes back through its tenant.
    assert!(b
        .retry(&next[0].id, Duration::ZERO, "boom")
        .await
        .expect("retry"));
    let again = fetch(&b, "w2", 10).await;
    assert_eq!(again.len(), 1, "one slot free after the retry");
    // A dead letter frees it.
    b.dead_letter(&again[0].id, "bad", true)
        .await
        .expect("dead");
    b.forward_due(&q("default"), 100).await.expect("forward");
    let after = fetch(&b, "w3", 10).await;
    assert_eq!(after.len(), 1);
    // Handing back (a server shutting down) frees it and keeps the task's place.
    let first = n_of(&after[0]);
    b.requeue(&q("default"), &[after[0].id.clone()])
        .await
        .expect("requeue");
    let back = fetch(&b, "w1", 10).await;
    assert_eq!(back.iter().map(n_of).collect::<Vec<_>>(), vec![first]);
    // The retried one was forwarded and waits in its tenant again.
    let page = b.tenants(&q("default"), 10).await.expect("tenants");
    let a = page.tenants.iter().find(|t| t.tenant == "a").expect("a");
    assert_eq!(a.running, 2, "{a:?}");
    assert!(!a.ready, "at its cap, out of the rotation");
    // Raising the cap at run time lets its tasks start at once.
    set(&b, Some("a"), TenantChange::new().concurrency(Some(4))).await;
    assert_eq!(fetch(&b, "w2", 10).await.len(), 2);
}

#[tokio::test]
async fn a_lost_workers_hold_comes_back_through_the_recoverer() {
    let b = broker().await;
    set(&b, Some("a"), TenantChange::new().concurrency(Some(1))).await;
    put(&b, "a", 0..3, EnqueueOptions::new()).await;
    let lost = fetch(&b, "dead", 10).await;
    assert_eq!(lost.len(), 1);
    assert!(fetch(&b, "w", 10).await.is_empty(), "a is at its cap");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = b
        .reclaim_idle(&q("default"), Duration::from_millis(200), 100)
        .await
        .expect("reclaim");
    assert_eq!(r.requeued, 1, "{r:?}");
    // The lost task goes back to its place (an attempt counted: it had started) and runs again.
    let got = fetch(&b, "w", 10).await;
    assert_eq!(
        got.iter().map(n_of).collect::<Vec<_>>(),
        vec![n_of(&lost[0])]
    );
    assert_eq!(got[0].envelope.as_ref().expect("env").retried, 1);
    complete(&b, &got).await;
    assert_eq!(fetch(&b, "w", 10).await.len(), 1);
    // The lost worker's late completion is stale and frees nothing twice.
    complete(&b, &lost).await;
    assert!(fetch(&b, "w", 10).await.is_empty(), "still one at a time");
}

#[tokio::test]
async fn a_paused_tenant_waits_and_a_full_one_refuses_enqueues() {
    let b = broker().await;
    set(&b, Some("p"), TenantChange::new().paused(Some(true))).await;
    put(&b, "p", 0..3, EnqueueOptions::new()).await;
    put(&b, "o", 100..101, EnqueueOptions::new()).await;
    let got = fetch(&b, "w", 10).await;
    assert_eq!(got.iter().map(n_of).collect::<Vec<_>>(), vec![100]);
    set(&b, Some("p"), TenantChange::new().paused(Some(false))).await;
    assert_eq!(fetch(&b, "w", 10).await.len(), 3);

    set(&b, None, TenantChange::new().backlog(Some(2))).await;
    put(&b, "f", 0..2, EnqueueOptions::new()).await;
    let err = Client::new(b.clone())
        .enqueue(&email(9), EnqueueOptions::new().tenant("f"))
        .await
        .expect_err("full");
    assert!(
        matches!(&err, BrokerError::TenantFull { tenant, .. } if tenant == "f"),
        "{err:?}"
    );
    // A delayed task is no way around the cap.
    let err = Client::new(b.clone())
        .enqueue(
            &email(10),
            EnqueueOptions::new()
                .tenant("f")
                .process_in(std::time::Duration::from_secs(60)),
        )
        .await
        .expect_err("full, delayed");
    assert!(
        matches!(&err, BrokerError::TenantFull { tenant, .. } if tenant == "f"),
        "{err:?}"
    );
    // Another tenant has room of its own.
    put(&b, "g", 0..1, EnqueueOptions::new()).await;
    let bad = Client::new(b.clone())
        .enqueue(&email(9), EnqueueOptions::new().tenant("has space"))
        .await
        .expect_err("bad key");
    assert!(matches!(bad, BrokerError::InvalidOption(_)), "{bad:?}");
}

#[tokio::test]
async fn levels_order_a_tenants_own_tasks_and_delays_keep_the_tenant() {
    let b = broker().await;
    for (n, l) in [(0u32, 9u8), (1, 5), (2, 0)] {
        Client::new(b.clone())
            .enqueue(
                &email(n),
                EnqueueOptions::new()
                    .tenant("t")
                    .priority(Priority::level(l).expect("level")),
            )
            .await
            .expect("enqueue");
    }
    Client::new(b.clone())
        .enqueue(
            &email(3),
            EnqueueOptions::new()
                .tenant("t")
                .process_in(Duration::from_millis(50)),
        )
        .await
        .expect("enqueue");
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.forward_due(&q("default"), 100).await.expect("forward");
    let got = fetch(&b, "w", 10).await;
    assert_eq!(got.iter().map(n_of).collect::<Vec<_>>(), vec![2, 1, 3, 0]);
    assert!(got.iter().all(|l| l.id.msg_id.starts_with("10/")));
}

#[tokio::test]
async fn a_blocked_reader_wakes_for_a_tenant_task() {
    let b = broker().await;
    // The queue learns of tenants first (a reader blocked before any tenant task exists is
    // woken by the entry the first one leaves on the main stream).
    put(&b, "t", 0..1, EnqueueOptions::new()).await;
    let first = fetch(&b, "w", 10).await;
    complete(&b, &first).await;
    let producer = b.clone();
    let put_later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        put(&producer, "t", 1..2, EnqueueOptions::new()).await;
    });
    let mut reader = b.open_reader().await.expect("reader");
    let started = Instant::now();
    let mut got = Vec::new();
    // A wake entry is dropped by the blocking read; the next fetch takes the task.
    while got.is_empty() && started.elapsed() < Duration::from_secs(5) {
        got = take(
            &b,
            &mut reader,
            &q("default"),
            "w",
            10,
            Duration::from_secs(5),
        )
        .await
        .leases;
    }
    put_later.await.expect("producer");
    assert_eq!(got.iter().map(n_of).collect::<Vec<_>>(), vec![1]);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "woken after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn lost_replies_of_the_tenant_scripts_change_nothing_twice() {
    let rig = rig().await;
    let queue = q("default");
    rig.lose_reply_of("tenant_put");
    rig.via
        .change_tenant_settings(&queue, Some("a"), &TenantChange::new().concurrency(Some(1)))
        .await
        .expect("re-sent");
    rig.assert_lost(1);
    rig.lose_reply_of("enqueue");
    put(&rig.via, "a", 0..3, EnqueueOptions::new()).await;
    rig.assert_lost(2);
    let page = rig.direct.tenants(&queue, 10).await.expect("tenants");
    assert_eq!(page.waiting, 3, "{page:?}");
    // A claim whose reply is lost returns the same delivery when re-sent.
    let warm = fetch(&rig.via, "w", 1).await;
    assert_eq!(warm.len(), 1);
    complete(&rig.via, &warm).await;
    rig.lose_reply_of("claim");
    let got = fetch(&rig.via, "w", 10).await;
    rig.assert_lost(3);
    assert_eq!(got.len(), 1, "{got:?}");
    rig.lose_reply_of("complete");
    complete(&rig.via, &got).await;
    rig.assert_lost(4);
    let last = fetch(&rig.via, "w", 10).await;
    assert_eq!(last.len(), 1);
    rig.lose_reply_of("retry");
    assert!(rig
        .via
        .retry(&last[0].id, Duration::from_secs(60), "x")
        .await
        .expect("retry"));
    rig.assert_lost(5);
    let page = rig.direct.tenants(&queue, 10).await.expect("tenants");
    assert_eq!((page.waiting, page.running), (0, 0), "{page:?}");
}

#[tokio::test]
async fn operators_act_on_tenant_tasks_where_they_wait() {
    use chronos_broker::{ActionOutcome, Inspect, Operate, TaskAction};
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    let mut ids = Vec::new();
    for n in 0..4u32 {
        ids.push(
            client
                .enqueue(&email(n), EnqueueOptions::new().tenant("t"))
                .await
                .expect("enqueue")
                .id,
        );
    }
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active), (4, 0), "{stats:?}");
    // Delete a waiting one, archive another, move the last one ahead of the rest.
    assert_eq!(
        b.act(&queue, &ids[0], TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.act(&queue, &ids[1], TaskAction::Archive)
            .await
            .expect("archive"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.prioritize(&queue, &ids[3], Priority::HIGHEST)
            .await
            .expect("prioritize"),
        ActionOutcome::Done
    );
    let page = b.tenants(&queue, 10).await.expect("tenants");
    assert_eq!(page.waiting, 2, "{page:?}");
    let got = fetch(&b, "w", 1).await;
    assert_eq!(got.iter().map(n_of).collect::<Vec<_>>(), vec![3]);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (1, 1, 1));
    // Run-now brings the archived one back to its tenant, behind what waits there (as run-now
    // puts other tasks at the end of their stream).
    assert_eq!(
        b.act(&queue, &ids[1], TaskAction::RunNow)
            .await
            .expect("run"),
        ActionOutcome::Done
    );
    let rest = fetch(&b, "w", 10).await;
    assert_eq!(rest.iter().map(n_of).collect::<Vec<_>>(), vec![2, 1]);
    // A forced delete of running tasks ends their holds: the queue is empty and deletable.
    set(&b, Some("t"), TenantChange::new().concurrency(Some(3))).await;
    let deleted = b.delete_queue(&queue, true).await.expect("delete queue");
    assert_eq!(deleted, 3);
    let page = b.tenants(&queue, 10).await.expect("tenants");
    assert_eq!(
        (page.total, page.waiting, page.running),
        (0, 0, 0),
        "{page:?}"
    );
    // The queue comes back clean: a new tenant task runs.
    put(&b, "t", 9..10, EnqueueOptions::new()).await;
    assert_eq!(fetch(&b, "w", 10).await.len(), 1);
}

#[tokio::test]
async fn a_rate_keys_deferral_ends_the_tenant_hold_and_the_task_comes_back() {
    use chronos_broker::{Admission, KeyRate, Throttle};
    let b = broker().await;
    let queue = q("default");
    set(&b, Some("t"), TenantChange::new().concurrency(Some(1))).await;
    put(&b, "t", 0..2, EnqueueOptions::new().rate_key("k")).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(f.leases.len(), 1, "the cap of 1");
    let limit = KeyRate {
        rate: 1,
        period: Duration::from_millis(300),
    };
    // Use the key's one start, then the next delivery of the tenant is deferred.
    let ids: Vec<_> = f
        .leases
        .iter()
        .map(|l| (l.id.clone(), "k".to_string()))
        .collect();
    assert_eq!(
        b.admit(&queue, &ids, &limit).await.expect("admit")[0],
        Admission::Run
    );
    complete(&b, &f.leases).await;
    let g = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(g.leases.len(), 1);
    let ids: Vec<_> = g
        .leases
        .iter()
        .map(|l| (l.id.clone(), "k".to_string()))
        .collect();
    assert!(matches!(
        b.admit(&queue, &ids, &limit).await.expect("admit")[0],
        Admission::Deferred { .. }
    ));
    let page = b.tenants(&queue, 10).await.expect("tenants");
    assert_eq!((page.waiting, page.running), (0, 0), "{page:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    b.forward_due(&queue, 10).await.expect("forward");
    assert_eq!(fetch(&b, "w", 10).await.len(), 1, "back through its tenant");
}

#[tokio::test]
async fn lifo_tasks_start_before_their_level_newest_first_and_keep_it() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let put_one = |n: u32, opts: EnqueueOptions| {
        let client = client.clone();
        async move { client.enqueue(&email(n), opts).await.expect("enqueue").id }
    };
    let high = Priority::HIGH;
    put_one(0, EnqueueOptions::new()).await;
    put_one(1, EnqueueOptions::new()).await;
    put_one(2, EnqueueOptions::new().lifo()).await;
    put_one(3, EnqueueOptions::new().lifo()).await;
    put_one(4, EnqueueOptions::new().priority(high)).await;
    put_one(5, EnqueueOptions::new().priority(Priority::LOW).lifo()).await;
    // Inside a tenant too: its LIFO task goes to the front of the tenant.
    put_one(6, EnqueueOptions::new().tenant("t")).await;
    put_one(7, EnqueueOptions::new().tenant("t").lifo()).await;
    let mut got = Vec::new();
    for _ in 0..8 {
        got.extend(fetch(&b, "w", 1).await.iter().map(n_of));
    }
    // Level 2 first; at the default level the LIFO ones newest first, then the tenants'
    // rotation (its LIFO task first), then the main stream; the low LIFO task last.
    assert_eq!(got, vec![4, 3, 2, 7, 6, 0, 1, 5]);
}

#[tokio::test]
async fn a_retried_or_delayed_lifo_task_comes_back_to_the_front() {
    let b = broker().await;
    let client = Client::new(b.clone());
    client
        .enqueue(&email(0), EnqueueOptions::new().lifo().max_retry(3))
        .await
        .expect("enqueue");
    let first = fetch(&b, "w", 1).await;
    assert!(b
        .retry(&first[0].id, Duration::ZERO, "x")
        .await
        .expect("retry"));
    client
        .enqueue(
            &email(1),
            EnqueueOptions::new()
                .lifo()
                .process_in(Duration::from_millis(20)),
        )
        .await
        .expect("enqueue");
    for n in 2..5u32 {
        client
            .enqueue(&email(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    b.forward_due(&q("default"), 100).await.expect("forward");
    let got = fetch(&b, "w", 10).await;
    let order: Vec<u32> = got.iter().map(n_of).collect();
    assert_eq!(&order[2..], &[2, 3, 4], "{order:?}");
    assert_eq!(order.len(), 5);
    let stats = chronos_broker::Inspect::queue_stats(&b, &q("default"))
        .await
        .expect("stats");
    assert_eq!((stats.pending, stats.active), (0, 5), "{stats:?}");
}

#[tokio::test]
async fn lost_replies_of_hand_back_reclaim_forward_and_operator_scripts() {
    use chronos_broker::{ActionOutcome, Operate, TaskAction};
    let rig = rig().await;
    let queue = q("default");
    set(
        &rig.direct,
        Some("a"),
        TenantChange::new().concurrency(Some(1)),
    )
    .await;
    let client = Client::new(rig.direct.clone());
    let mut ids = Vec::new();
    for n in 0..4u32 {
        let opts = EnqueueOptions::new().tenant("a");
        ids.push(client.enqueue(&email(n), opts).await.expect("enqueue").id);
    }
    let page = |b: RedisBroker| async move { b.tenants(&q("default"), 10).await.expect("page") };

    // Handed back twice (the first reply lost): once back in its place, its slot free.
    let got = fetch(&rig.via, "w", 10).await;
    assert_eq!(got.iter().map(n_of).collect::<Vec<_>>(), vec![0]);
    rig.lose_reply_of("requeue");
    rig.via
        .requeue(&queue, &[got[0].id.clone()])
        .await
        .expect("requeue");
    rig.assert_lost(1);
    let p = page(rig.direct.clone()).await;
    assert_eq!((p.waiting, p.running), (4, 0), "{p:?}");

    // Reclaimed twice: one re-park.
    let lost = fetch(&rig.via, "gone", 10).await;
    assert_eq!(lost.iter().map(n_of).collect::<Vec<_>>(), vec![0]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    rig.lose_reply_of("reclaim");
    let r = rig
        .via
        .reclaim_idle(&queue, Duration::from_millis(200), 100)
        .await
        .expect("reclaim");
    rig.assert_lost(2);
    assert!(r.requeued <= 1, "{r:?}");
    let p = page(rig.direct.clone()).await;
    assert_eq!((p.waiting, p.running), (4, 0), "{p:?}");

    // A retry forwarded twice: back once.
    let got = fetch(&rig.via, "w", 10).await;
    assert!(rig
        .via
        .retry(&got[0].id, Duration::ZERO, "x")
        .await
        .expect("retry"));
    rig.lose_reply_of("forward");
    rig.via.forward_due(&queue, 10).await.expect("forward");
    rig.assert_lost(3);
    let p = page(rig.direct.clone()).await;
    assert_eq!((p.waiting, p.running), (4, 0), "{p:?}");

    // An operator's delete and change of level, each re-sent.
    rig.lose_reply_of("admin_delete");
    assert_eq!(
        rig.via
            .act(&queue, &ids[1], TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::NotFound,
        "the re-send finds it deleted"
    );
    rig.assert_lost(4);
    rig.lose_reply_of("prioritize");
    rig.via
        .prioritize(&queue, &ids[3], Priority::HIGHEST)
        .await
        .expect("prioritize");
    rig.assert_lost(5);
    let p = page(rig.direct.clone()).await;
    assert_eq!((p.waiting, p.running), (3, 0), "{p:?}");
    let order: Vec<u32> = fetch(&rig.direct, "w", 1).await.iter().map(n_of).collect();
    assert_eq!(order, vec![3]);
}

#[tokio::test]
async fn a_cancel_request_names_a_tenant_delivery_as_its_worker_does() {
    use chronos_broker::{ActionOutcome, Operate, TaskAction};
    let b = broker().await;
    let queue = q("default");
    let id = Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new().tenant("t"))
        .await
        .expect("enqueue")
        .id;
    let got = fetch(&b, "w", 1).await;
    assert_eq!(
        b.act(&queue, &id, TaskAction::Cancel)
            .await
            .expect("cancel"),
        ActionOutcome::Done
    );
    let asked = b
        .cancel_requested(&queue, &[got[0].id.msg_id.clone()])
        .await
        .expect("requested");
    assert_eq!(asked, vec![got[0].id.msg_id.clone()]);
}

#[tokio::test]
async fn tenant_tasks_past_the_aging_bound_go_ahead_of_newer_urgent_work() {
    use chronos_broker::fred::interfaces::HashesInterface;
    let b = broker().await;
    let queue = q("default");
    let key = b.keyspace().queue(&queue).settings();
    let _: i64 = b
        .client()
        .hset(key, ("aging_ms", "300"))
        .await
        .expect("hset");
    put(&b, "t", 0..2, EnqueueOptions::new()).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let client = Client::new(b.clone());
    for n in 10..15u32 {
        client
            .enqueue(&email(n), EnqueueOptions::new().priority(Priority::HIGHEST))
            .await
            .expect("enqueue");
    }
    // Both tenant tasks waited past the bound: they start ahead of the urgent ones.
    let got: Vec<u32> = fetch(&b, "w", 3).await.iter().map(n_of).collect();
    assert_eq!(got, vec![0, 1, 10]);
}

#[tokio::test]
async fn a_tenant_page_reads_the_busiest_without_counting_every_tenant() {
    use chronos_broker::fred::interfaces::{KeysInterface, SortedSetsInterface};
    // A Redis of its own, so its command counts are this test's.
    let rig = rig().await;
    let b = rig.direct.clone();
    let queue = q("default");
    for t in 0..150 {
        put(&b, &format!("t{t:03}"), t..t + 1, EnqueueOptions::new()).await;
    }
    put(&b, "big", 1000..1005, EnqueueOptions::new()).await;
    put(&b, "mid", 2000..2003, EnqueueOptions::new()).await;
    set(&b, Some("idle"), TenantChange::new().weight(Some(3))).await;
    let load = b.keyspace().queue(&queue).tenant_load();
    let page = |b: RedisBroker| async move { b.tenants(&q("default"), 3).await.expect("tenants") };

    reset_stats(&b).await;
    let first = page(b.clone()).await;
    // Two lexical counts per listed tenant and one for the LIFO fronts: before the load set
    // the script counted both sets of every one of the 152 tenants (305 calls).
    let counted = calls_of(&b, "zlexcount").await;
    assert!(counted <= 7, "{counted} lexical counts for a page of 3");
    let rows: Vec<(&str, u64, u64)> = first
        .tenants
        .iter()
        .map(|t| (t.tenant.as_str(), t.waiting, t.running))
        .collect();
    assert_eq!(rows, vec![("big", 5, 0), ("mid", 3, 0), ("t000", 1, 0)]);
    assert_eq!(first.total, 153, "152 with work and one with settings only");
    assert_eq!(first.waiting, 158);

    // Starts move counts from waiting to held; the order follows.
    let started = fetch(&b, "w1", 4).await;
    assert_eq!(started.len(), 4);
    let after = page(b.clone()).await;
    let big = after
        .tenants
        .iter()
        .find(|t| t.tenant == "big")
        .expect("big");
    assert_eq!(big.waiting + big.running, 5, "{after:?}");
    assert_eq!(after.waiting + after.running, 158);

    // A set lost (or a queue from before it) is rebuilt once, to the same page.
    let _: i64 = b.client().del(&load).await.expect("del");
    let rebuilt = page(b.clone()).await;
    assert_eq!(rebuilt, after);

    // Once every task has ended, only the set's completeness mark is left.
    complete(&b, &started).await;
    loop {
        let more = fetch(&b, "w1", 100).await;
        if more.is_empty() {
            break;
        }
        complete(&b, &more).await;
    }
    let left: i64 = b.client().zcard(&load).await.expect("zcard");
    assert_eq!(left, 1, "only the mark");
    let empty = page(b.clone()).await;
    assert_eq!(empty.total, 1, "the tenant with settings only");
    assert_eq!(empty.tenants.len(), 1);
}
