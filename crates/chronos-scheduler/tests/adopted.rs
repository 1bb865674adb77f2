//! Schedules that only some instances register (a rolling deploy that adds one): whoever leads
//! fires every live registered schedule, with the registering instance's task and options, and
//! exactly once per trigger across a hand-over. Against a real Redis, in one process.

mod common;

use common::broker;

use std::collections::BTreeSet;
use std::time::Duration;

use chronos_broker::{Inspect, QueueName, RedisBroker, Schedules, TaskArgs, TaskState};
use chronos_scheduler::{ScheduleOptions, Scheduler, SchedulerConfig, SchedulerHandle};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Report {
    region: String,
}
impl TaskArgs for Report {
    const KIND: &'static str = "report";
}

fn config(instance: &str) -> SchedulerConfig {
    SchedulerConfig {
        leader_ttl: Duration::from_millis(1000),
        publish_interval: Duration::from_millis(200),
        instance_id: Some(instance.into()),
        ..SchedulerConfig::default()
    }
}

async fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what} not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every task of `queue` (id, payload, max retry, headers), by trigger second of `schedule`.
async fn tasks(b: &RedisBroker, queue: &str, schedule: &str) -> Vec<(i64, Vec<u8>, u32)> {
    let q = QueueName::new(queue).expect("queue");
    let prefix = format!("{schedule}:");
    let mut out: Vec<(i64, Vec<u8>, u32)> = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list")
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| {
            let secs = e.id.strip_prefix(&prefix)?.parse().ok()?;
            Some((secs, e.payload.clone(), e.max_retry))
        })
        .collect();
    out.sort();
    out
}

async fn start_with_report(ns: &str, instance: &str) -> SchedulerHandle {
    let mut s = Scheduler::new(broker(ns).await, config(instance));
    s.register_interval(
        Duration::from_secs(1),
        &Report {
            region: "eu".into(),
        },
        ScheduleOptions::new()
            .id("new-report")
            .queue("reports")
            .max_retry(3),
    )
    .expect("register");
    s.start().await.expect("start")
}

#[tokio::test]
async fn a_schedule_only_a_follower_registers_is_fired_by_the_leader_exactly_once() {
    let ns = chronos_testkit::namespace();
    // The old version: leads, and does not know the new schedule.
    let old = Scheduler::new(broker(&ns).await, config("old"))
        .start()
        .await
        .expect("start");
    wait_for("old leads", Duration::from_secs(5), || old.is_leader()).await;
    // The new version joins as a follower and registers a schedule the leader lacks.
    let new = start_with_report(&ns, "new").await;
    tokio::time::sleep(Duration::from_millis(3_300)).await;
    assert!(old.is_leader() && !new.is_leader());
    assert!(
        old.stats().fired >= 2,
        "the leader fired the follower's schedule: {:?}",
        old.stats()
    );
    // The rolling deploy goes on: the old leader hands over to the new version.
    assert!(old.resign_leadership().await.expect("resign"));
    wait_for("new leads", Duration::from_secs(5), || new.is_leader()).await;
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert!(new.stats().fired >= 1, "{:?}", new.stats());
    old.shutdown().await;
    new.shutdown().await;

    let b = broker(&ns).await;
    let fired = tasks(&b, "reports", "new-report").await;
    let secs: Vec<i64> = fired.iter().map(|t| t.0).collect();
    let distinct: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        secs.len(),
        "a trigger fired twice: {secs:?}"
    );
    assert!(secs.len() >= 5, "{secs:?}");
    assert_eq!(
        (secs[secs.len() - 1] - secs[0] + 1) as usize,
        secs.len(),
        "a trigger was missed across the hand-over: {secs:?}"
    );
    // The leader that did not register it fired the registering instance's task and options.
    let payload = chronos_broker::encode_args(&Report {
        region: "eu".into(),
    })
    .expect("encode");
    assert!(
        fired.iter().all(|(_, p, r)| *p == payload && *r == 3),
        "task or options differ"
    );
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!(m.fired as usize, secs.len(), "{m:?}");
}

#[tokio::test]
async fn a_schedule_whose_instances_all_stopped_is_no_longer_fired() {
    let ns = chronos_testkit::namespace();
    let leader = Scheduler::new(broker(&ns).await, config("leader"))
        .start()
        .await
        .expect("start");
    wait_for("leads", Duration::from_secs(5), || leader.is_leader()).await;
    let other = start_with_report(&ns, "other").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Gone without a trace (a crash): its registry record goes stale after three publishes.
    other.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let b = broker(&ns).await;
    let before = tasks(&b, "reports", "new-report").await.len();
    assert!(before >= 1, "fired while its instance ran");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let after = tasks(&b, "reports", "new-report").await.len();
    leader.shutdown().await;
    assert_eq!(before, after, "still fired after its instance went quiet");
}
