//! The scheduler against a real Redis, in one process: several instances, catch-up policies,
//! validation, the registry and the overlap policy.

use std::collections::BTreeSet;
use std::time::Duration;

use chronos_broker::{Inspect, QueueName, RedisBroker, Schedules, TaskArgs, TaskState};
use chronos_scheduler::{
    list_schedules, MisfirePolicy, OverlapPolicy, ScheduleOptions, Scheduler, SchedulerConfig,
    SchedulerError,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Ping {
    n: u32,
}
impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
}

async fn broker(ns: &str) -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis");
    RedisBroker::builder(url)
        .namespace(ns)
        .connect()
        .await
        .expect("connect")
}

fn config(ttl_ms: u64) -> SchedulerConfig {
    SchedulerConfig {
        leader_ttl: Duration::from_millis(ttl_ms),
        publish_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    }
}

/// Trigger seconds of every task the schedule `id` enqueued into `queue` (task ids are
/// `<schedule>:<trigger unix seconds>`), and the queue's stream length.
async fn fired(b: &RedisBroker, queue: &str, id: &str) -> (Vec<i64>, u64) {
    let q = QueueName::new(queue).expect("queue");
    let tasks = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list");
    let prefix = format!("{id}:");
    let mut secs: Vec<i64> = tasks
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.id.strip_prefix(&prefix).and_then(|s| s.parse().ok()))
        .collect();
    secs.sort();
    (secs, b.queue_stats(&q).await.expect("stats").pending)
}

fn assert_contiguous(secs: &[i64]) {
    let set: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(
        set.len(),
        secs.len(),
        "a trigger was enqueued twice: {secs:?}"
    );
    if let (Some(first), Some(last)) = (secs.first(), secs.last()) {
        assert_eq!(
            (last - first + 1) as usize,
            secs.len(),
            "a trigger was missed: {secs:?}"
        );
    }
}

#[tokio::test]
async fn three_instances_enqueue_each_one_second_trigger_once() {
    let ns = chronos_testkit::namespace();
    let mut handles = Vec::new();
    for _ in 0..3 {
        let mut s = Scheduler::new(broker(&ns).await, config(2000));
        s.register_interval(
            Duration::from_secs(1),
            &Ping { n: 1 },
            ScheduleOptions::new().id("every-second"),
        )
        .expect("register");
        handles.push(s.start().await.expect("start"));
    }
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let leaders = handles.iter().filter(|h| h.is_leader()).count();
    assert_eq!(leaders, 1, "exactly one leader");
    for h in handles {
        h.shutdown().await;
    }
    let b = broker(&ns).await;
    let (secs, stream_len) = fired(&b, "default", "every-second").await;
    assert!(secs.len() >= 4, "{secs:?}");
    assert_contiguous(&secs);
    assert_eq!(
        stream_len as usize,
        secs.len(),
        "one stream entry per trigger"
    );
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!(m.fired as usize, secs.len());
}

async fn outage_case(policy: MisfirePolicy) -> (Vec<i64>, i64, i64, u64) {
    let ns = chronos_testkit::namespace();
    let opts = || ScheduleOptions::new().id("job").misfire(policy);
    let mut first = Scheduler::new(broker(&ns).await, config(1000));
    first
        .register_interval(Duration::from_secs(1), &Ping { n: 2 }, opts())
        .expect("register");
    let h = first.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    h.shutdown().await;
    let b = broker(&ns).await;
    let (before, _) = fired(&b, "default", "job").await;
    let last_before = *before.last().expect("fired before the outage");
    // Every instance is down for about five intervals.
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    let restart = chronos_broker::now_ms() / 1000;
    let mut second = Scheduler::new(broker(&ns).await, config(1000));
    second
        .register_interval(Duration::from_secs(1), &Ping { n: 2 }, opts())
        .expect("register");
    let h = second.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let missed = h.stats().missed;
    h.shutdown().await;
    let (all, _) = fired(&b, "default", "job").await;
    let caught: Vec<i64> = all
        .into_iter()
        .filter(|s| *s > last_before && *s <= restart)
        .collect();
    (caught, last_before, restart, missed)
}

#[tokio::test]
async fn outage_catch_up_fires_only_what_each_misfire_policy_allows() {
    let (all, (latest, _, _, _), (skip, _, _, skipped)) = tokio::join!(
        outage_case(MisfirePolicy::FireAll {
            window: Duration::from_secs(3600),
            max: 2
        }),
        outage_case(MisfirePolicy::FireLatest),
        outage_case(MisfirePolicy::Skip),
    );
    let (caught, last_before, restart, missed) = all;
    let gap = restart - last_before;
    assert!(gap >= 5, "outage of {gap} intervals");
    assert_eq!(
        caught,
        vec![restart - 1, restart],
        "FireAll max 2 fires the two latest"
    );
    assert_eq!(missed as i64, gap - 2);
    assert_eq!(latest.len(), 1, "FireLatest fires one: {latest:?}");
    assert!(skip.is_empty(), "Skip fires none: {skip:?}");
    assert!(skipped >= 5);
}

#[tokio::test]
async fn invalid_schedules_are_refused_at_registration() {
    let mut s = Scheduler::new(broker("unused").await, SchedulerConfig::default());
    let p = Ping { n: 0 };
    assert!(matches!(
        s.register_interval(Duration::from_millis(500), &p, ScheduleOptions::new()),
        Err(SchedulerError::Spec(_))
    ));
    for bad in [
        "61 * * * *",
        "*/0 * * * *",
        "* * *",
        "@reboot",
        "0 0 30 2 *",
    ] {
        assert!(
            matches!(
                s.register_cron(bad, &p, ScheduleOptions::new()),
                Err(SchedulerError::Spec(_))
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        s.register_cron("0 3 * * *", &p, ScheduleOptions::new().zone("Mars/Olympus")),
        Err(SchedulerError::Spec(_))
    ));
    assert!(s
        .register_cron("0 3 * * *", &p, ScheduleOptions::new().queue("bad queue"))
        .is_err());
    let id = s
        .register_cron("@daily", &p, ScheduleOptions::new().zone("Europe/Berlin"))
        .expect("valid");
    assert!(id.starts_with("ping:"), "{id}");
    assert!(matches!(
        s.register_cron("@daily", &p, ScheduleOptions::new().zone("Europe/Berlin")),
        Err(SchedulerError::DuplicateSchedule(_))
    ));
    // Same task, other spec: another derived id.
    s.register_cron("@hourly", &p, ScheduleOptions::new())
        .expect("distinct id");
    for ttl in [Duration::from_millis(10), Duration::from_secs(7200)] {
        let cfg = SchedulerConfig {
            leader_ttl: ttl,
            ..SchedulerConfig::default()
        };
        let started = Scheduler::new(broker("unused").await, cfg).start().await;
        assert!(
            matches!(started, Err(SchedulerError::InvalidOption(_))),
            "{ttl:?}"
        );
    }
}

#[tokio::test]
async fn registry_lists_never_fired_schedules_and_marks_gone_ones_stale() {
    let ns = chronos_testkit::namespace();
    let cfg = config(1000);
    let mut s = Scheduler::new(broker(&ns).await, cfg.clone());
    s.register_cron(
        "0 0 1 1 *",
        &Ping { n: 3 },
        ScheduleOptions::new().id("new-year").zone("Asia/Tokyo"),
    )
    .expect("register");
    s.register_interval(
        Duration::from_secs(1),
        &Ping { n: 4 },
        ScheduleOptions::new().id("often").queue("q2"),
    )
    .expect("register");
    let h = s.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let b = broker(&ns).await;
    let entries = list_schedules(&b, &cfg).await.expect("list");
    assert_eq!(entries.len(), 2);
    let ny = entries.iter().find(|e| e.id == "new-year").expect("listed");
    assert_eq!(
        (ny.zone.as_str(), ny.kind.as_str(), ny.queue.as_str()),
        ("Asia/Tokyo", "ping", "default")
    );
    assert!(ny.next_run_ms.is_some() && ny.last_fired_ms.is_none() && !ny.stale);
    let often = entries.iter().find(|e| e.id == "often").expect("listed");
    assert!(
        often.last_fired_ms.is_some()
            && often
                .last_task_id
                .as_deref()
                .is_some_and(|t| t.starts_with("often:"))
    );
    let leader = b.leader().await.expect("leader").expect("someone leads");
    assert_eq!(leader.id, h.instance_id());
    h.shutdown().await;
    assert!(
        b.leader().await.expect("leader").is_none(),
        "resigned on shutdown"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let entries = list_schedules(&b, &cfg).await.expect("list");
    assert!(entries.iter().all(|e| e.stale), "{entries:?}");
}

#[tokio::test]
async fn forbidden_overlap_skips_triggers_while_the_previous_run_is_pending() {
    let ns = chronos_testkit::namespace();
    let mut s = Scheduler::new(broker(&ns).await, config(1000));
    let opts = ScheduleOptions::new()
        .id("solo")
        .overlap(OverlapPolicy::Forbid);
    s.register_interval(Duration::from_secs(1), &Ping { n: 5 }, opts)
        .expect("register");
    let h = s.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let stats = h.stats();
    h.shutdown().await;
    let (secs, _) = fired(&broker(&ns).await, "default", "solo").await;
    assert_eq!(
        secs.len(),
        1,
        "no worker runs, so only the first trigger is enqueued: {secs:?}"
    );
    assert!(stats.suppressed >= 2, "{stats:?}");
}

#[tokio::test]
async fn never_fired_schedule_catches_up_on_a_trigger_due_while_no_leader_ran() {
    let ns = chronos_testkit::namespace();
    // Start just after a multiple of 3 s, so the first trigger of a 3 s interval is ~3 s away.
    let now = chronos_broker::now_ms();
    tokio::time::sleep(Duration::from_millis(3_000 - (now % 3_000) as u64 + 50)).await;
    let opts = || ScheduleOptions::new().id("rare");
    let mut first = Scheduler::new(broker(&ns).await, config(1000));
    first
        .register_interval(Duration::from_secs(3), &Ping { n: 6 }, opts())
        .expect("register");
    let h = first.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.is_leader());
    h.shutdown().await; // leaves before the schedule's first trigger
    let b = broker(&ns).await;
    assert!(fired(&b, "default", "rare").await.0.is_empty());
    tokio::time::sleep(Duration::from_millis(3_000)).await; // the trigger falls due, no leader
    let mut second = Scheduler::new(broker(&ns).await, config(1000));
    second
        .register_interval(Duration::from_secs(3), &Ping { n: 6 }, opts())
        .expect("register");
    let h = second.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.shutdown().await;
    let (secs, _) = fired(&b, "default", "rare").await;
    assert_eq!(
        secs.len(),
        1,
        "the trigger due during the gap was caught up: {secs:?}"
    );
    assert_eq!(secs[0] % 3, 0);
}
