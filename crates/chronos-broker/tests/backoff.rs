//! Handler-signalled backoff (`Consume::back_off`): a running task blocks its rate key or its
//! queue cluster-wide and goes back as scheduled with no attempt spent; other deliveries of a
//! blocked key are held back once each until the block ends; a blocked queue is not read at
//! all; a block only extends; safe under a lost reply and a stale lease.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{
    HashesInterface, KeysInterface, SortedSetsInterface, StreamsInterface,
};
use chronos_broker::{
    backoff_jitter, Admission, BackoffOutcome, BackoffScope, Client, Consume, EnqueueOptions,
    Inspect, KeyRate, Lease, LeaseId, Maintain, QueueName, RedisBroker, SettleExt, TaskState,
    Throttle,
};
use common::{broker, calls_of, email, redis_ms, reset_stats, rig, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

/// Per-key checks with no per-key rate: blocks only.
const BLOCKS_ONLY: KeyRate = KeyRate {
    rate: 0,
    period: Duration::from_secs(1),
};

async fn enqueue_keyed(b: &RedisBroker, key: &str, n: u32) {
    let client = Client::new(b.clone());
    for i in 0..n {
        client
            .enqueue(&email(i), EnqueueOptions::new().rate_key(key))
            .await
            .expect("enqueue");
    }
}

/// Starts one task of key `key` as a worker would and returns its delivery.
async fn running(b: &RedisBroker, key: Option<&str>) -> Lease {
    let opts = match key {
        Some(k) => EnqueueOptions::new().rate_key(k),
        None => EnqueueOptions::new(),
    };
    Client::new(b.clone())
        .enqueue(&email(99), opts)
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(b, &mut reader, &q("default"), "w", 1, Duration::ZERO).await;
    b.close_reader(reader).await;
    f.leases.into_iter().next().expect("one delivery")
}

fn keyed(leases: &[Lease]) -> Vec<(LeaseId, String)> {
    leases
        .iter()
        .map(|l| {
            let key = l
                .envelope
                .as_ref()
                .expect("decodes")
                .rate_key
                .clone()
                .expect("keyed");
            (l.id.clone(), key)
        })
        .collect()
}

fn blocked(o: BackoffOutcome) -> (i64, i64) {
    match o {
        BackoffOutcome::Blocked { until_ms, due_ms } => (until_ms, due_ms),
        BackoffOutcome::Stale => panic!("stale"),
    }
}

#[tokio::test]
async fn a_key_block_holds_the_keys_other_deliveries_once_each_until_its_end() {
    let b = broker().await;
    let queue = q("default");
    let first = running(&b, Some("api")).await;
    let before = redis_ms(&b).await;
    let (until, due) = blocked(
        b.back_off(
            &first.id,
            &BackoffScope::Key("api".into()),
            Duration::from_millis(400),
        )
        .await
        .expect("back off"),
    );
    assert!(until >= before + 400 && until < before + 1_000, "{until}");
    let jitter = backoff_jitter(Duration::from_millis(400)).as_millis() as i64;
    assert!(due >= until && due <= until + jitter, "{due} {until}");
    // The blocked task itself: scheduled at its due time, no attempt, no error, no snooze.
    let rec = b
        .task(&queue, &first.id.task_id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!((rec.state, rec.snoozes), (TaskState::Scheduled, 0));
    let env = rec.envelope.expect("envelope");
    assert_eq!((env.retried, env.last_error), (0, None));
    let score: Option<f64> = b
        .client()
        .zscore(b.keyspace().queue(&queue).scheduled(), &first.id.task_id)
        .await
        .expect("zscore");
    assert_eq!(score.map(|s| s as i64), Some(due));

    // Three more of the key and one of another: the fetch says keys are blocked, and the
    // check holds back exactly the key's deliveries, each due in [until, until + jitter].
    enqueue_keyed(&b, "api", 3).await;
    enqueue_keyed(&b, "other", 1).await;
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert!(f.key_blocks, "the fetch reports blocked keys");
    assert_eq!(f.blocked_until_ms, None);
    assert_eq!(f.leases.len(), 4);
    let ks = keyed(&f.leases);
    // A queue with a per-key rate that has room holds the key back all the same.
    let rate = KeyRate {
        rate: 100,
        period: Duration::from_secs(1),
    };
    for (i, a) in b
        .admit(&queue, &ks, &rate)
        .await
        .expect("admit")
        .into_iter()
        .enumerate()
    {
        if ks[i].1 == "api" {
            match a {
                Admission::Deferred { due_ms } => {
                    let width = backoff_jitter(Duration::from_millis(400)).as_millis() as i64;
                    assert!(due_ms >= until && due_ms <= until + width, "{due_ms}");
                }
                other => panic!("{other:?}"),
            }
        } else {
            assert_eq!(a, Admission::Run);
        }
    }
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(
        (stats.pending, stats.active, stats.scheduled, stats.failed),
        (0, 1, 4, 0)
    );
    // Moved once: nothing of the key is due before the block ends.
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 0);
    let again = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert!(again.leases.is_empty());
    let listed = b.queue_blocks(&queue, 10).await.expect("blocks");
    assert_eq!(listed.keys, vec![("api".to_string(), until)]);
    assert_eq!(listed.queue_until_ms, None);

    // After the end (and its jitter) all four come back, still on their first attempt.
    let wait = until + jitter - redis_ms(&b).await + 50;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    assert_eq!(b.forward_due(&queue, 100).await.expect("forward"), 4);
    let back = take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await;
    assert_eq!(back.leases.len(), 4);
    for l in &back.leases {
        assert_eq!(l.envelope.as_ref().expect("envelope").retried, 0);
    }
    let admitted = b
        .admit(&queue, &keyed(&back.leases), &BLOCKS_ONLY)
        .await
        .expect("admit");
    assert!(
        admitted.iter().all(|a| *a == Admission::Run),
        "{admitted:?}"
    );
    assert!(b
        .queue_blocks(&queue, 10)
        .await
        .expect("blocks")
        .keys
        .is_empty());
}

#[tokio::test]
async fn a_queue_block_makes_the_fetch_answer_the_block_and_read_nothing() {
    let b = broker().await;
    let queue = q("default");
    let first = running(&b, Some("api")).await;
    let (until, _) = blocked(
        b.back_off(&first.id, &BackoffScope::Queue, Duration::from_millis(300))
            .await
            .expect("back off"),
    );
    Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    // Even a blocking fetch answers at once: the block, and nothing read.
    let t0 = std::time::Instant::now();
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::from_secs(2))
        .await
        .expect("fetch");
    assert!(t0.elapsed() < Duration::from_millis(500));
    assert!(f.leases.is_empty());
    assert_eq!(f.blocked_until_ms, Some(until));
    let keys = b.keyspace().queue(&queue);
    let pending: Vec<chronos_broker::fred::types::Value> = b
        .client()
        .xpending(keys.stream(), chronos_broker::GROUP, ())
        .await
        .expect("xpending");
    assert_eq!(
        pending.first().and_then(|v| v.as_i64()),
        Some(0),
        "nothing delivered"
    );
    assert_eq!(
        b.queue_blocks(&queue, 10)
            .await
            .expect("blocks")
            .queue_until_ms,
        Some(until)
    );
    let wait = until - redis_ms(&b).await + 20;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(f.blocked_until_ms, None);
    assert_eq!(f.leases.len(), 1);
}

#[tokio::test]
async fn a_block_set_during_a_blocking_read_holds_what_it_reads() {
    let b = broker().await;
    let queue = q("default");
    let first = running(&b, None).await;
    let reader_b = b.clone();
    let read = tokio::spawn(async move {
        let mut reader = reader_b.open_reader().await.expect("reader");
        reader_b
            .fetch(
                &mut reader,
                &q("default"),
                "w2",
                &[],
                10,
                Duration::from_secs(3),
            )
            .await
            .expect("fetch")
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (until, _) = blocked(
        b.back_off(&first.id, &BackoffScope::Queue, Duration::from_secs(2))
            .await
            .expect("back off"),
    );
    Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let f = read.await.expect("join");
    assert!(f.leases.is_empty(), "held back, not handed out");
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.scheduled), (0, 0, 2));
    let width = backoff_jitter(Duration::from_secs(2)).as_millis() as i64;
    let due: Vec<(String, f64)> = b
        .client()
        .zrange(
            b.keyspace().queue(&queue).scheduled(),
            0,
            -1,
            None,
            false,
            None,
            true,
        )
        .await
        .expect("zrange");
    for (_, score) in due {
        let s = score as i64;
        assert!(s >= until && s <= until + width, "{s} {until}");
    }
}

#[tokio::test]
async fn a_block_extends_but_never_shortens_and_an_operator_can_lift_it() {
    let b = broker().await;
    let queue = q("default");
    let one = running(&b, Some("api")).await;
    let two = running(&b, Some("api")).await;
    let (long, _) = blocked(
        b.back_off(
            &one.id,
            &BackoffScope::Key("api".into()),
            Duration::from_secs(30),
        )
        .await
        .expect("back off"),
    );
    let (kept, due) = blocked(
        b.back_off(
            &two.id,
            &BackoffScope::Key("api".into()),
            Duration::from_millis(100),
        )
        .await
        .expect("back off"),
    );
    assert_eq!(kept, long, "the later end is kept");
    assert!(due >= long);
    // Queue blocks too; a zero delay is a short minimum, not "no block".
    let three = running(&b, None).await;
    let (q_until, _) = blocked(
        b.back_off(&three.id, &BackoffScope::Queue, Duration::ZERO)
            .await
            .expect("back off"),
    );
    assert!(q_until > redis_ms(&b).await);
    let blocks = b.queue_blocks(&queue, 10).await.expect("blocks");
    assert_eq!(blocks.keys, vec![("api".to_string(), long)]);
    assert!(blocks.queue_until_ms.is_some());
    // The key-block set expires with its latest end.
    let ttl: i64 = b
        .client()
        .pttl(b.keyspace().queue(&queue).key_blocks())
        .await
        .expect("pttl");
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    assert!(b.unblock(&queue, Some("api")).await.expect("unblock"));
    assert!(!b.unblock(&queue, Some("api")).await.expect("unblock"));
    assert!(b.unblock(&queue, None).await.expect("unblock"));
    let blocks = b.queue_blocks(&queue, 10).await.expect("blocks");
    assert_eq!((blocks.queue_until_ms, blocks.keys.len()), (None, 0));
    assert_eq!(
        blocks.throttled_today, 3,
        "every block counts, extended or not"
    );
}

#[tokio::test]
async fn a_stale_lease_blocks_nothing() {
    let b = broker().await;
    let queue = q("default");
    let l = running(&b, Some("api")).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    b.reclaim_idle(&queue, Duration::from_millis(10), 10)
        .await
        .expect("reclaim");
    assert_eq!(
        b.back_off(
            &l.id,
            &BackoffScope::Key("api".into()),
            Duration::from_secs(5)
        )
        .await
        .expect("back off"),
        BackoffOutcome::Stale
    );
    assert_eq!(
        b.queue_blocks(&queue, 10).await.expect("blocks"),
        chronos_broker::QueueBlocks::default()
    );
}

#[tokio::test]
async fn a_backoff_whose_reply_is_lost_answers_the_same_on_resend() {
    let rig = rig().await;
    let queue = q("default");
    let lease = rig.running(EnqueueOptions::new().rate_key("api")).await;
    rig.lose_reply_of("backoff");
    let got = rig
        .via
        .back_off(
            &lease.id,
            &BackoffScope::Key("api".into()),
            Duration::from_secs(60),
        )
        .await
        .expect("back off");
    rig.assert_lost(1);
    let (until, due) = blocked(got);
    // Another re-send answers the same again.
    assert_eq!(
        rig.direct
            .back_off(
                &lease.id,
                &BackoffScope::Key("api".into()),
                Duration::from_secs(60)
            )
            .await
            .expect("again"),
        got
    );
    let stats = rig.direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.active, stats.scheduled, stats.failed), (0, 1, 0));
    let blocks = rig.direct.queue_blocks(&queue, 10).await.expect("blocks");
    assert_eq!(blocks.keys, vec![("api".to_string(), until)]);
    assert_eq!(blocks.throttled_today, 1, "counted once");
    let key = rig.direct.keyspace().queue(&queue).task(&lease.id.task_id);
    let r: Option<String> = rig.direct.client().hget(key, "r").await.expect("hget");
    assert_eq!(r.as_deref(), Some("0"));
    assert!(due >= until);
}

#[tokio::test]
async fn a_blocking_read_holds_back_deliveries_of_a_blocked_key() {
    let b = broker().await;
    let queue = q("default");
    let first = running(&b, Some("api")).await;
    blocked(
        b.back_off(
            &first.id,
            &BackoffScope::Key("api".into()),
            Duration::from_secs(5),
        )
        .await
        .expect("back off"),
    );
    let reader_b = b.clone();
    let read = tokio::spawn(async move {
        let mut reader = reader_b.open_reader().await.expect("reader");
        reader_b
            .fetch(
                &mut reader,
                &q("default"),
                "w2",
                &[],
                10,
                Duration::from_secs(3),
            )
            .await
            .expect("fetch")
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    enqueue_keyed(&b, "api", 1).await;
    enqueue_keyed(&b, "other", 1).await;
    let mut got = read.await.expect("join").leases;
    if got.is_empty() {
        // The read woke on the first entry only: the second is read at once.
        let mut reader = b.open_reader().await.expect("reader");
        got = b
            .fetch(&mut reader, &queue, "w2", &[], 10, Duration::ZERO)
            .await
            .expect("fetch")
            .leases;
    }
    let keys: Vec<_> = keyed(&got).into_iter().map(|(_, k)| k).collect();
    assert_eq!(
        keys,
        vec!["other".to_string()],
        "the key's delivery is held"
    );
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.scheduled, 2, "the blocked task and the held one");
}

#[tokio::test]
async fn a_rate_limited_tenant_task_frees_its_tenants_slot() {
    use chronos_broker::{TenantChange, Tenants};
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
    let mut reader = b.open_reader().await.expect("reader");
    let first = take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await;
    assert_eq!(first.leases.len(), 1, "the cap lets one run");
    blocked(
        b.back_off(
            &first.leases[0].id,
            &BackoffScope::Key("a-api".into()),
            Duration::from_secs(5),
        )
        .await
        .expect("back off"),
    );
    // Its slot is free at once: the other task starts.
    let second = take(&b, &mut reader, &queue, "w", 10, Duration::ZERO).await;
    assert_eq!(second.leases.len(), 1);
    assert_ne!(second.leases[0].id.task_id, first.leases[0].id.task_id);
    let page = b.tenants(&queue, 10).await.expect("tenants");
    let a = page.tenants.iter().find(|t| t.tenant == "a").expect("a");
    assert_eq!(a.running, 1, "{a:?}");
}

#[tokio::test]
async fn a_fetch_of_a_never_blocked_queue_reads_no_block_key_and_the_flag_goes_with_the_blocks() {
    // A Redis of its own, so its command counts are this test's.
    let rig = rig().await;
    let b = rig.direct.clone();
    let queue = q("default");
    let mut reader = b.open_reader().await.expect("reader");
    Client::new(b.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    reset_stats(&b).await;
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(f.leases.len(), 1);
    assert_eq!(calls_of(&b, "exists").await, 0, "no block ever: no EXISTS");
    assert_eq!(calls_of(&b, "get").await, 1, "only the fetch receipt");

    // A block sets the flag; lifted (or ended), the next fetch drops it and pays nothing again.
    let started = b
        .start(&queue, std::slice::from_ref(&f.leases[0].id))
        .await
        .expect("start");
    assert_eq!(started.len(), 1);
    blocked(
        b.back_off(
            &f.leases[0].id,
            &BackoffScope::Queue,
            Duration::from_secs(60),
        )
        .await
        .expect("back off"),
    );
    let levels = b.keyspace().queue(&queue).levels();
    let flag: bool = b
        .client()
        .hexists(&levels, "blocked")
        .await
        .expect("hexists");
    assert!(flag);
    assert!(b.unblock(&queue, None).await.expect("unblock"));
    b.fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    let flag: bool = b
        .client()
        .hexists(&levels, "blocked")
        .await
        .expect("hexists");
    assert!(!flag, "claim.lua removed the flag");
    reset_stats(&b).await;
    b.fetch(&mut reader, &queue, "w", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(calls_of(&b, "exists").await, 0);
}
