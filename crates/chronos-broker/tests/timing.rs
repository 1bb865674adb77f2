//! Run times and queue waits per kind and minute, against a real Redis: what workers write is
//! read back per minute, bounded, and a damaged field costs only itself.

mod common;

use chronos_broker::fred::prelude::*;
use chronos_broker::{
    BrokerError, Inspect, Maintain, QueueName, TimingDelta, TimingHist, TIMINGS_KEPT,
};
use common::broker;

fn hist(ms: &[u64]) -> TimingHist {
    let mut h = TimingHist::default();
    for m in ms {
        h.record(*m);
    }
    h
}

#[tokio::test]
async fn timings_written_by_workers_add_up_per_kind_and_minute() {
    let b = broker().await;
    let q = QueueName::new("timed").expect("queue");
    let now = chronos_broker::now_ms();
    let minute = now - now.rem_euclid(60_000);
    let earlier = minute - 5 * 60_000;
    let delta = |at: i64, kind: &str, run: &[u64], wait: &[u64]| TimingDelta {
        minute_ms: at,
        kind: kind.into(),
        run: hist(run),
        wait: hist(wait),
    };
    // Two workers write the same minute: their counts add up.
    b.record_timings(&q, &[delta(minute, "mail", &[10, 20, 30], &[1, 1, 2])])
        .await
        .expect("write");
    b.record_timings(
        &q,
        &[
            delta(minute, "mail", &[40], &[5]),
            delta(minute, "pdf:render", &[2_000], &[100]),
            delta(earlier, "mail", &[7], &[0]),
        ],
    )
    .await
    .expect("write");
    let got = b
        .timings(&q, minute - 59 * 60_000, now)
        .await
        .expect("read");
    assert_eq!(
        got.iter().map(|m| m.minute_ms).collect::<Vec<_>>(),
        vec![earlier, minute]
    );
    let last = &got[1];
    let (run, wait) = last.kinds.get("mail").expect("mail");
    assert_eq!((run.total(), wait.total()), (4, 4));
    assert_eq!(run.quantile(1.0), hist(&[40]).quantile(1.0));
    assert!(
        last.kinds.contains_key("pdf:render"),
        "a kind may hold colons"
    );
    // The hour's hash expires.
    let key = b.keyspace().queue(&q).timing(minute.div_euclid(3_600_000));
    let ttl: i64 = b.client().pttl(&key).await.expect("pttl");
    assert!(ttl > 0 && ttl <= TIMINGS_KEPT.as_millis() as i64, "{ttl}");
    // A damaged field is skipped alone.
    let _: i64 = b
        .client()
        .hset(&key, [("0:r:3:mail", "lots"), ("garbage", "1")])
        .await
        .expect("hset");
    let again = b.timings(&q, minute, now).await.expect("read");
    assert_eq!(again.last().expect("minute").kinds["mail"].0.total(), 4);
    // At most a day per call.
    assert!(matches!(
        b.timings(&q, now - 2 * 86_400_000, now).await,
        Err(BrokerError::InvalidOption(_))
    ));
    // Nothing to write costs nothing and fails nothing.
    b.record_timings(&q, &[]).await.expect("empty");
}
