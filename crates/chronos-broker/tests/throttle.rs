//! Rate and concurrency limits of the Redis broker ([`Throttle`]), against a real Redis.

mod common;

use std::time::Duration;

use chronos_broker::{
    Admission, Client, Consume, EnqueueOptions, Inspect, KeyRate, LeaseId, Maintain, PermitLimit,
    QueueName, RedisBroker, TaskState, Throttle,
};
use common::{broker, email, redis_ms};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

fn rate(n: u32, period: Duration, burst: u32) -> PermitLimit {
    PermitLimit {
        rate: Some((n, period)),
        burst,
        concurrency: None,
        token_ttl: Duration::from_secs(30),
        poll: Duration::from_millis(50),
    }
}

fn concurrency(n: u32, ttl: Duration) -> PermitLimit {
    PermitLimit {
        rate: None,
        burst: 1,
        concurrency: Some(n),
        token_ttl: ttl,
        poll: Duration::from_millis(50),
    }
}

/// One `acquire_permits` call, bracketed by Redis' clock: the script read that clock at some
/// ms in `lo..=hi`.
#[derive(Debug, Clone, Copy)]
struct Call {
    lo: i64,
    hi: i64,
    granted: bool,
}

#[tokio::test]
async fn granted_starts_are_spaced_by_the_rate_across_holders() {
    // Every check below reads Redis' clock around each call rather than the test's: a holder
    // that the machine's load keeps off the CPU asks less often, which loses slots no limiter
    // could grant, and gets its replies late, which bunches them on the test's clock. With
    // brackets on Redis' clock a loaded machine only makes the checks looser, never wrong; on
    // an idle one the brackets are about a millisecond wide.
    let b = broker().await;
    let queue = q("rated");
    // 10 per 200 ms: one start every 20 ms, none at once beyond the first.
    let period = Duration::from_millis(200);
    let step = 20;
    let limit = rate(10, period, 1);
    // Four holders ask for 3 at a time until 40 starts were granted in all, as four workers'
    // fetchers would.
    const GRANTS: usize = 40;
    let granted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut holders = Vec::new();
    for h in 0..4 {
        let (b, queue, granted) = (b.clone(), queue.clone(), granted.clone());
        holders.push(tokio::spawn(async move {
            let mut calls = Vec::new();
            while granted.load(std::sync::atomic::Ordering::SeqCst) < GRANTS {
                let lo = redis_ms(&b).await;
                let p = b
                    .acquire_permits(&queue, &format!("w{h}"), 3, &limit)
                    .await
                    .expect("acquire");
                let hi = redis_ms(&b).await;
                assert!(p.granted <= 1, "burst 1 grants one start at a time");
                calls.push(Call {
                    lo,
                    hi,
                    granted: p.granted == 1,
                });
                if p.granted == 0 {
                    assert!(p.wait > Duration::ZERO && p.wait <= Duration::from_millis(20));
                    tokio::time::sleep(p.wait).await;
                } else {
                    granted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            calls
        }));
    }
    let mut calls = Vec::new();
    for h in holders {
        // Only a limiter that stopped granting altogether runs into this.
        let mine = tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .expect("40 starts granted within a minute")
            .expect("holder");
        calls.extend(mine);
    }
    calls.sort_by_key(|c| c.lo);
    let grants: Vec<Call> = calls.iter().copied().filter(|c| c.granted).collect();
    assert!(grants.len() >= GRANTS, "{} grants", grants.len());

    // Any 200 ms window of Redis' clock holds at most 10 + 1 (rate + burst) grants, never the
    // 20 a fixed window allows across its boundary: no 12 grants are certainly inside one.
    for g in &grants {
        let inside: Vec<&Call> = grants
            .iter()
            .filter(|u| u.lo >= g.lo && u.hi < g.lo + 200)
            .collect();
        assert!(
            inside.len() <= 11,
            "{} grants within 200 ms from {} ms: {inside:?}",
            inside.len(),
            g.lo
        );
    }

    // No slot is lost while someone asks: once a grant's next slot is due (20 ms after it at
    // the latest), a call is refused only if another grant took that slot in between.
    for g in &grants {
        let due_by = g.hi + step;
        let Some(refused) = calls
            .iter()
            .filter(|c| !c.granted && c.lo >= due_by)
            .min_by_key(|c| c.hi)
        else {
            continue;
        };
        let took_it = grants
            .iter()
            .any(|j| !std::ptr::eq(j, g) && j.lo <= refused.hi && j.hi >= g.lo);
        assert!(
            took_it,
            "refused at {refused:?} though the slot after the grant at {g:?} was due by \
             {due_by} ms and nobody took it"
        );
    }
}

#[tokio::test]
async fn a_burst_is_granted_at_once_and_then_the_rate_holds() {
    let b = broker().await;
    let queue = q("bursty");
    let limit = rate(10, Duration::from_secs(3600), 4);
    let first = b
        .acquire_permits(&queue, "w1", 10, &limit)
        .await
        .expect("acquire");
    assert_eq!(first.granted, 4);
    let next = b
        .acquire_permits(&queue, "w2", 10, &limit)
        .await
        .expect("acquire");
    assert_eq!(next.granted, 0);
    // The next start is due one interval (360 s) after the burst's first.
    assert!(next.wait > Duration::from_secs(350) && next.wait <= Duration::from_secs(360));
}

#[tokio::test]
async fn unused_starts_go_back_once_per_grant() {
    let b = broker().await;
    let queue = q("giveback");
    let limit = rate(5, Duration::from_secs(3600), 5);
    let p = b
        .acquire_permits(&queue, "w1", 5, &limit)
        .await
        .expect("acquire");
    assert_eq!(p.granted, 5);
    // A re-sent give-back (the client re-sends after a lost reply) returns nothing twice.
    let back = b
        .return_permits(&queue, "w1", &limit, Some((&p.grant, 3)), &[])
        .await
        .expect("return");
    let again = b
        .return_permits(&queue, "w1", &limit, Some((&p.grant, 3)), &[])
        .await
        .expect("return again");
    assert_eq!((back, again), (3, 0));
    let p2 = b
        .acquire_permits(&queue, "w2", 10, &limit)
        .await
        .expect("acquire");
    assert_eq!(p2.granted, 3);
}

#[tokio::test]
async fn concurrency_permits_expire_unless_kept_and_come_back_when_returned() {
    let b = broker().await;
    // Tokens live 400 ms unless kept, so the first steps must each come within 400 ms (on
    // Redis' clock) of the last keep. A step that the machine's load holds back longer proves
    // nothing (the token may have expired, as it should): that attempt is dropped and made
    // again on a fresh queue, instead of failing.
    for attempt in 0..5 {
        if kept_tokens_stay_and_others_come_back(&b, &q(&format!("conc-{attempt}"))).await {
            return;
        }
    }
    panic!("five attempts in a row were held back for 400 ms");
}

/// The steps of the test above; false when a step came too late to tell.
async fn kept_tokens_stay_and_others_come_back(b: &RedisBroker, queue: &QueueName) -> bool {
    let ttl_ms = 400;
    let ttl = Duration::from_millis(ttl_ms as u64);
    let limit = concurrency(2, ttl);
    // A token granted or kept at Redis time `now` lives until now + ttl; `kept_at` is at most
    // the `now` of the last grant or keep, so a step whose reply came before kept_at + ttl
    // certainly ran while the tokens were alive.
    let mut kept_at = redis_ms(b).await;
    let in_time = |kept_at: i64, replied: i64| replied < kept_at + ttl_ms;
    let p = b
        .acquire_permits(queue, "w1", 5, &limit)
        .await
        .expect("acquire");
    assert_eq!((p.granted, p.tokens.len()), (2, 2));
    let full = b
        .acquire_permits(queue, "w2", 1, &limit)
        .await
        .expect("acquire");
    if !in_time(kept_at, redis_ms(b).await) {
        return false;
    }
    assert_eq!(full.granted, 0);
    assert_eq!(full.wait, Duration::from_millis(50));

    // Kept alive past their TTL by the heartbeat: still held.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let before = redis_ms(b).await;
        let kept = b.keep_permits(queue, &p.tokens, ttl).await.expect("keep");
        if !in_time(kept_at, redis_ms(b).await) {
            return false;
        }
        assert_eq!(kept, 2);
        kept_at = before;
    }
    let still = b
        .acquire_permits(queue, "w2", 1, &limit)
        .await
        .expect("acquire");
    if !in_time(kept_at, redis_ms(b).await) {
        return false;
    }
    assert_eq!(still.granted, 0, "kept tokens are still held");

    // Returned (the task ended): the permit is free at once.
    b.return_permits(queue, "w1", &limit, None, &p.tokens[..1])
        .await
        .expect("return");
    let one = b
        .acquire_permits(queue, "w2", 5, &limit)
        .await
        .expect("acquire");
    if !in_time(kept_at, redis_ms(b).await) {
        return false;
    }
    assert_eq!(one.granted, 1);

    // A holder that dies (no keep, no return): its tokens expire after the TTL (a later look
    // only finds them more expired).
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let back = b
        .acquire_permits(queue, "w3", 5, &limit)
        .await
        .expect("acquire");
    assert_eq!(back.granted, 2, "expired tokens came back");
    let kept = b.keep_permits(queue, &p.tokens, ttl).await.expect("keep");
    assert_eq!(kept, 0, "an expired token is not brought back");
    true
}

#[tokio::test]
async fn the_permit_set_outlives_the_longest_token_whatever_ttl_the_last_caller_uses() {
    use chronos_broker::fred::interfaces::KeysInterface;
    let b = broker().await;
    let queue = q("mixed-ttl");
    let active = b.keyspace().queue(&queue).active();
    let long = concurrency(3, Duration::from_secs(60));
    let short = concurrency(3, Duration::from_secs(2));
    let held = b
        .acquire_permits(&queue, "long", 1, &long)
        .await
        .expect("acquire");
    assert_eq!(held.granted, 1);
    // A server with a shorter token TTL grants and refreshes after it.
    let other = b
        .acquire_permits(&queue, "short", 1, &short)
        .await
        .expect("acquire");
    assert_eq!(other.granted, 1);
    let pttl = || async {
        b.client()
            .pttl::<i64, _>(active.as_str())
            .await
            .expect("pttl")
    };
    assert!(pttl().await > 50_000, "a grant cut the key to its own TTL");
    let kept = b
        .keep_permits(&queue, &other.tokens, Duration::from_secs(2))
        .await
        .expect("keep");
    assert_eq!(kept, 1);
    assert!(
        pttl().await > 50_000,
        "a heartbeat cut the key to its own TTL"
    );
    // Once the long holder is gone, the key follows the short one's token.
    b.return_permits(&queue, "long", &long, None, &held.tokens)
        .await
        .expect("return");
    let kept = b
        .keep_permits(&queue, &other.tokens, Duration::from_secs(2))
        .await
        .expect("keep");
    assert_eq!(kept, 1);
    let left = pttl().await;
    assert!(left > 0 && left <= 2_000, "pttl {left}");
}

/// Enqueues `n` tasks with rate key `key` and fetches them (not started).
async fn fetch_keyed(
    b: &RedisBroker,
    queue: &QueueName,
    key: &str,
    n: u32,
) -> Vec<(LeaseId, String)> {
    let client = Client::new(b.clone());
    for i in 0..n {
        client
            .enqueue(
                &email(i),
                EnqueueOptions::new().queue(queue.as_str()).rate_key(key),
            )
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, queue, "w1", &[], n as usize, Duration::ZERO)
        .await
        .expect("fetch");
    b.close_reader(reader).await;
    f.leases
        .into_iter()
        .map(|l| {
            let key = l.envelope.expect("decodes").rate_key.expect("has a key");
            (l.id, key)
        })
        .collect()
}

#[tokio::test]
async fn a_full_key_defers_its_task_without_an_attempt_until_its_next_window() {
    let b = broker().await;
    let queue = q("keyed");
    let limit = KeyRate {
        rate: 1,
        period: Duration::from_millis(500),
    };
    let mut first = fetch_keyed(&b, &queue, "cust-1", 3).await;
    first.extend(fetch_keyed(&b, &queue, "cust-2", 1).await);
    let got = b.admit(&queue, &first, &limit).await.expect("admit");
    assert_eq!(got[0], Admission::Run);
    assert_eq!(got[3], Admission::Run, "another key is not held back");
    let (d1, d2) = match (got[1], got[2]) {
        (Admission::Deferred { due_ms: a }, Admission::Deferred { due_ms: b }) => (a, b),
        other => panic!("expected two deferrals, got {other:?}"),
    };
    assert_eq!(d1 % 500, 0, "due when the key's next window opens");
    assert_eq!(d2 - d1, 500, "a backlog is spread over the windows ahead");

    // A re-sent call answers the same and counts nothing twice.
    assert_eq!(b.admit(&queue, &first, &limit).await.expect("again"), got);

    let deferred = b
        .task(&queue, &first[1].0.task_id)
        .await
        .expect("task")
        .expect("exists");
    assert_eq!(deferred.state, TaskState::Scheduled);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.scheduled, 2);

    // Deferred again and again: the attempt count stays 0 and no error is recorded.
    let id = first[2].0.task_id.clone();
    for round in 0..3 {
        let back = loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            b.forward_due(&queue, 100).await.expect("forward");
            let mut reader = b.open_reader().await.expect("reader");
            let f = b
                .fetch(&mut reader, &queue, "w1", &[], 10, Duration::ZERO)
                .await
                .expect("fetch");
            b.close_reader(reader).await;
            if let Some(l) = f.leases.into_iter().find(|l| l.id.task_id == id) {
                break l;
            }
        };
        // A fresh task of the same key comes first in the same call and takes the window's
        // only start (the window is new: the task came back when it opened).
        let mut both = fetch_keyed(&b, &queue, "cust-1", 1).await;
        both.push((back.id.clone(), "cust-1".to_string()));
        let got = b.admit(&queue, &both, &limit).await.expect("admit");
        assert_eq!(got[0], Admission::Run, "round {round}: {got:?}");
        assert!(
            matches!(got[1], Admission::Deferred { .. }),
            "round {round}: {got:?}"
        );
        let rec = b.task(&queue, &id).await.expect("task").expect("exists");
        assert_eq!(rec.state, TaskState::Scheduled);
        let env = rec.envelope.expect("decodes");
        assert_eq!((env.retried, env.last_error), (0, None), "round {round}");
    }
}

#[tokio::test]
async fn a_grant_whose_reply_is_lost_is_counted_once() {
    let rig = common::rig().await;
    let queue = q("default");
    let limit = PermitLimit {
        concurrency: Some(4),
        ..rate(4, Duration::from_secs(3600), 4)
    };
    rig.lose_reply_of("permit");
    // The client re-sends the call; the receipt answers the first run's grant.
    let p = rig
        .via
        .acquire_permits(&queue, "w1", 3, &limit)
        .await
        .expect("acquire re-sent");
    rig.assert_lost(1);
    assert_eq!((p.granted, p.tokens.len()), (3, 3));
    // Counted once: one start and one token are left.
    let rest = rig
        .direct
        .acquire_permits(&queue, "w2", 4, &limit)
        .await
        .expect("acquire");
    assert_eq!(rest.granted, 1);
}

#[tokio::test]
async fn an_admission_whose_reply_is_lost_takes_one_start_per_delivery() {
    let rig = common::rig().await;
    let queue = q("default");
    let limit = KeyRate {
        rate: 2,
        period: Duration::from_secs(3600),
    };
    let first = fetch_keyed(&rig.via, &queue, "cust", 1).await;
    rig.lose_reply_of("admit");
    let got = rig
        .via
        .admit(&queue, &first, &limit)
        .await
        .expect("admit re-sent");
    rig.assert_lost(1);
    assert_eq!(got, vec![Admission::Run]);
    // The key had room for two: the re-send did not take the second.
    let more = fetch_keyed(&rig.direct, &queue, "cust", 2).await;
    let got = rig
        .direct
        .admit(&queue, &more, &limit)
        .await
        .expect("admit");
    assert_eq!(got[0], Admission::Run);
    assert!(matches!(got[1], Admission::Deferred { .. }), "{got:?}");
}

#[tokio::test]
async fn every_throttle_script_runs_on_a_cluster() {
    let b = common::cluster_broker().await;
    // Several queues, so the calls land on different nodes; each script touches one slot.
    for name in ["lim-a", "lim-b", "lim-c"] {
        let queue = q(name);
        let limit = PermitLimit {
            concurrency: Some(2),
            ..rate(10, Duration::from_secs(1), 2)
        };
        let p = b
            .acquire_permits(&queue, "w1", 5, &limit)
            .await
            .expect("acquire");
        assert_eq!(p.granted, 2);
        assert_eq!(
            b.keep_permits(&queue, &p.tokens, Duration::from_secs(5))
                .await
                .expect("keep"),
            2
        );
        b.return_permits(&queue, "w1", &limit, Some((&p.grant, 1)), &p.tokens[1..])
            .await
            .expect("return");
        let keyed = fetch_keyed(&b, &queue, "k{x}", 2).await;
        let key_rate = KeyRate {
            rate: 1,
            period: Duration::from_secs(60),
        };
        let got = b.admit(&queue, &keyed, &key_rate).await.expect("admit");
        assert_eq!(got[0], Admission::Run);
        assert!(matches!(got[1], Admission::Deferred { .. }), "{got:?}");
    }
}
