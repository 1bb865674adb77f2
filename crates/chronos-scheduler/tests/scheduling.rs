//! The scheduler against a real Redis, in one process: several instances, catch-up policies,
//! validation, the registry and the overlap policy.

mod common;

use common::broker;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{
    EnqueueOptions, Inspect, QueueName, RedisBroker, Schedules, TaskArgs, TaskState,
};
use chronos_scheduler::{
    list_schedules, Clock, MisfirePolicy, NewSchedule, OverlapPolicy, ScheduleOptions, Scheduler,
    SchedulerConfig, SchedulerError,
};
use serde::{Deserialize, Serialize};

/// A wall clock a test moves: the system's plus an offset, or frozen at one instant.
#[derive(Debug, Default)]
struct TestClock {
    offset_ms: AtomicI64,
    frozen_at: Option<i64>,
}

impl TestClock {
    fn frozen(at_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            offset_ms: AtomicI64::new(0),
            frozen_at: Some(at_ms),
        })
    }
    fn jump(&self, by_ms: i64) {
        self.offset_ms.fetch_add(by_ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> i64 {
        self.frozen_at.unwrap_or_else(chronos_broker::now_ms)
            + self.offset_ms.load(Ordering::SeqCst)
    }
}

#[derive(Serialize, Deserialize)]
struct Ping {
    n: u32,
}
impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
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

/// One instance fires for a while and stops; a second one starts "five intervals later" by its
/// clock, which is frozen there: its catch-up time is exactly `restart` (whole seconds plus
/// 100 ms), whatever the machine's timing, and it fires nothing after its catch-up. (Its next
/// trigger's timer is 900 ms of real time away: room for a loaded machine to stop it first.)
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
    // Every instance is down for five and a half intervals, as the second one's clock says.
    let restart = last_before + 6;
    let cfg = SchedulerConfig {
        clock: TestClock::frozen(restart * 1000 + 100),
        ..config(1000)
    };
    let mut second = Scheduler::new(broker(&ns).await, cfg);
    second
        .register_interval(Duration::from_secs(1), &Ping { n: 2 }, opts())
        .expect("register");
    let h = second.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.is_leader());
    let missed = h.stats().missed;
    h.shutdown().await;
    let (all, _) = fired(&b, "default", "job").await;
    let caught: Vec<i64> = all.into_iter().filter(|s| *s > last_before).collect();
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
    assert_eq!(gap, 6, "outage of {gap} intervals");
    assert_eq!(
        caught,
        vec![restart - 1, restart],
        "FireAll max 2 fires the two latest"
    );
    assert_eq!(missed as i64, gap - 2);
    assert_eq!(latest, vec![restart], "FireLatest fires the latest only");
    assert!(skip.is_empty(), "Skip fires none: {skip:?}");
    assert_eq!(skipped, 6);
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

/// `durable` asks for a `WAIT` for replicas, which the fire path does not send: a schedule
/// asking for it is refused, in code and at run time, rather than silently fired without it.
#[tokio::test]
async fn durable_enqueue_options_are_refused_at_registration() {
    let mut s = Scheduler::new(broker("unused").await, SchedulerConfig::default());
    let p = Ping { n: 0 };
    let durable = || {
        ScheduleOptions::new()
            .id("durable")
            .enqueue(EnqueueOptions::new().durable(1, Duration::from_millis(100)))
    };
    assert!(matches!(
        s.register_interval(Duration::from_secs(1), &p, durable()),
        Err(SchedulerError::DurableSchedule(id)) if id == "durable"
    ));
    assert!(matches!(
        s.register_cron("0 3 * * *", &p, durable()),
        Err(SchedulerError::DurableSchedule(_))
    ));
    assert!(matches!(
        NewSchedule::interval("durable", Duration::from_secs(1), &p, durable()),
        Err(SchedulerError::DurableSchedule(_))
    ));
    assert!(matches!(
        NewSchedule::cron("durable", "0 3 * * *", &p, durable()),
        Err(SchedulerError::DurableSchedule(_))
    ));
    // Through the kind's defaults too.
    #[derive(Serialize, Deserialize)]
    struct Audit;
    impl TaskArgs for Audit {
        const KIND: &'static str = "audit";
        fn default_options() -> EnqueueOptions {
            EnqueueOptions::new().durable(2, Duration::from_millis(50))
        }
    }
    assert!(matches!(
        s.register_interval(Duration::from_secs(1), &Audit, ScheduleOptions::new()),
        Err(SchedulerError::DurableSchedule(_))
    ));
    s.register_interval(Duration::from_secs(1), &p, ScheduleOptions::new())
        .expect("without durable");
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

/// Trigger seconds of every task of any schedule of kind `ping` in `queue` (whatever the id).
async fn all_ping_triggers(b: &RedisBroker, queue: &str) -> Vec<i64> {
    let q = QueueName::new(queue).expect("queue");
    let tasks = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list");
    let mut secs: Vec<i64> = tasks
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.headers.get("chronos-trigger-ms"))
        .filter_map(|t| t.parse::<i64>().ok())
        .map(|ms| ms / 1000)
        .collect();
    secs.sort();
    secs
}

/// A rolling deploy changes the payload: the old and the new instance take turns leading. The
/// default id does not depend on the payload, so they share one fire state and the old
/// instance, leading again, re-fires nothing the new one fired.
#[tokio::test]
async fn a_payload_change_keeps_the_default_id_so_an_old_leader_refires_nothing() {
    let ns = chronos_testkit::namespace();
    let start = |n: u32| {
        let ns = ns.clone();
        async move {
            let mut s = Scheduler::new(broker(&ns).await, config(1000));
            let id = s
                .register_interval(Duration::from_secs(1), &Ping { n }, ScheduleOptions::new())
                .expect("register");
            (id, s.start().await.expect("start"))
        }
    };
    let (old_id, old) = start(1).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(old.is_leader());
    // The new version starts, the old one hands over to it.
    let (new_id, new) = start(2).await;
    assert!(old.resign_leadership().await.expect("resign"));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(new.is_leader());
    // The new one goes away (a rollback, a crash): the old one leads again and catches up.
    new.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    assert!(old.is_leader());
    old.shutdown().await;
    let secs = all_ping_triggers(&broker(&ns).await, "default").await;
    assert_contiguous(&secs);
    assert_eq!(old_id, new_id, "the payload is not part of the default id");
}

/// A schedule id never fires a trigger from before it was first registered in the cluster,
/// even when a last-fired mark of an earlier life (here: written by an older version, with no
/// registration mark) is found under it.
#[tokio::test]
async fn catch_up_never_reaches_before_the_first_registration() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let q = QueueName::new("default").expect("queue");
    let stale_last = chronos_broker::now_ms() - 10 * 60_000;
    let _: i64 = chronos_broker::fred::interfaces::HashesInterface::hset(
        b.client(),
        format!("{}sched:last", b.keyspace().queue(&q).prefix()),
        ("old-life", stale_last),
    )
    .await
    .expect("seed");
    let mut s = Scheduler::new(broker(&ns).await, config(1000));
    let opts = ScheduleOptions::new()
        .id("old-life")
        .misfire(MisfirePolicy::FireAll {
            window: Duration::from_secs(3600),
            max: 10,
        });
    s.register_interval(Duration::from_secs(60), &Ping { n: 9 }, opts)
        .expect("register");
    let started_s = chronos_broker::now_ms() / 1000;
    let h = s.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(h.is_leader());
    h.shutdown().await;
    let (secs, _) = fired(&b, "default", "old-life").await;
    // A run that starts on a minute boundary may fire that minute's trigger (it is due now);
    // an earlier life's backlog lies a minute or more before the start.
    let earlier: Vec<_> = secs.iter().filter(|s| **s < started_s - 1).collect();
    assert!(earlier.is_empty(), "caught up on an earlier life: {secs:?}");
}

/// The leader's clock jumps two minutes forward (an NTP step, a host suspend): the backlog of
/// one-second triggers goes through the misfire policy instead of firing up to 100 per tick.
#[tokio::test]
async fn a_wall_clock_jump_applies_the_misfire_policy_to_the_backlog() {
    let ns = chronos_testkit::namespace();
    let clock = Arc::new(TestClock::default());
    let cfg = SchedulerConfig {
        clock: clock.clone(),
        ..config(1000)
    };
    let mut s = Scheduler::new(broker(&ns).await, cfg);
    let opts = ScheduleOptions::new()
        .id("jumpy")
        .misfire(MisfirePolicy::FireAll {
            window: Duration::from_secs(3600),
            max: 3,
        });
    s.register_interval(Duration::from_secs(1), &Ping { n: 7 }, opts)
        .expect("register");
    let h = s.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = h.stats();
    clock.jump(120_000);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let after = h.stats();
    h.shutdown().await;
    let fired_in_jump = after.fired - before.fired;
    assert!(
        fired_in_jump <= 3 + 2,
        "fired {fired_in_jump} triggers across a two-minute jump: {after:?}"
    );
    assert!(after.missed >= 115, "{after:?}");
    let (secs, _) = fired(&broker(&ns).await, "default", "jumpy").await;
    assert_eq!(secs.len() as u64, after.fired);
    assert_eq!(
        chronos_broker::RedisBroker::scheduler_metrics(&broker(&ns).await)
            .await
            .expect("metrics")
            .missed,
        after.missed,
        "the skipped backlog is counted cluster-wide too"
    );
}

/// resign_leadership returns once the lock is released (so another instance can take it at
/// once), and says whether this instance led.
#[tokio::test]
async fn resign_leadership_returns_once_the_lock_is_released() {
    let ns = chronos_testkit::namespace();
    let b = broker(&ns).await;
    let mut s = Scheduler::new(broker(&ns).await, config(5000));
    s.register_interval(
        Duration::from_secs(3600),
        &Ping { n: 8 },
        ScheduleOptions::new().id("rare"),
    )
    .expect("register");
    let h = s.start().await.expect("start");
    for _ in 0..50 {
        if h.is_leader() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.is_leader());
    assert!(h.resign_leadership().await.expect("resign"));
    assert!(!h.is_leader());
    assert!(
        b.leader().await.expect("leader").is_none(),
        "released when the call returns"
    );
    assert!(!h.resign_leadership().await.expect("resign as follower"));
    h.shutdown().await;
}

/// The schedule's enqueue options (unique, discard, deadline, headers) reach every fired task.
#[tokio::test]
async fn fired_tasks_carry_the_schedules_enqueue_options() {
    let ns = chronos_testkit::namespace();
    let mut s = Scheduler::new(broker(&ns).await, config(1000));
    let opts = ScheduleOptions::new()
        .id("opts")
        .enqueue(
            chronos_broker::EnqueueOptions::new()
                .queue("q-opts")
                .max_retry(2)
                .discard_on_dead_letter()
                .header("team", "ops"),
        )
        .unique(Duration::from_secs(60))
        .deadline_after(Duration::from_secs(30));
    s.register_interval(Duration::from_secs(1), &Ping { n: 10 }, opts)
        .expect("register");
    let h = s.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    let stats = h.stats();
    h.shutdown().await;
    let b = broker(&ns).await;
    let (secs, _) = fired(&b, "q-opts", "opts").await;
    // The first run holds the unique lock (no worker runs it), so later triggers are skipped.
    assert_eq!(secs.len(), 1, "{secs:?}");
    assert!(stats.suppressed >= 1, "{stats:?}");
    let q = QueueName::new("q-opts").expect("queue");
    let rec = b
        .task(&q, &format!("opts:{}", secs[0]))
        .await
        .expect("task")
        .expect("stored");
    let env = rec.envelope.expect("decodes");
    assert_eq!(env.max_retry, 2);
    assert_eq!(env.dead_letter, chronos_broker::DeadLetter::Discard);
    assert_eq!(env.headers.get("team").map(String::as_str), Some("ops"));
    assert_eq!(
        env.headers.get("chronos-schedule").map(String::as_str),
        Some("opts")
    );
    assert_eq!(env.deadline_ms, Some(secs[0] * 1000 + 30_000));
    assert!(env.unique_key.is_some());
}

/// Bytes Redis received, from INFO stats.
async fn net_input_bytes(b: &RedisBroker) -> u64 {
    use chronos_broker::fred::prelude::*;
    let info: String = b
        .client()
        .info(Some(chronos_broker::fred::types::InfoKind::Stats))
        .await
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_net_input_bytes")
}

/// At 10k schedules, re-publishing the registry costs a liveness mark, not a rewrite of every
/// entry. Runs on its own Redis, so other tests' traffic does not count.
#[tokio::test]
async fn registry_publishes_cost_a_liveness_mark_not_a_rewrite() {
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let b = RedisBroker::builder(redis.url())
        .namespace("bytes")
        .connect()
        .await
        .expect("connect");
    let cfg = SchedulerConfig {
        publish_interval: Duration::from_millis(100),
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(b.clone(), cfg);
    for i in 0..10_000 {
        // Yearly crons: nothing fires during the test, so only the registry writes.
        s.register_cron(
            "0 0 1 1 *",
            &Ping { n: i },
            ScheduleOptions::new().id(format!("s{i}")),
        )
        .expect("register");
    }
    let start0 = net_input_bytes(&b).await;
    let h = s.start().await.expect("start");
    let first = net_input_bytes(&b).await - start0;
    // The term's start (catch-up reads the fire state of every id) is a one-off that a loaded
    // machine may delay past any fixed wait: measure after winning, and keep the quietest of a
    // few one-second windows. Rewriting entries would cost every window.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !h.stats().is_leader {
        assert!(tokio::time::Instant::now() < deadline, "never led");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut steady = u64::MAX;
    for _ in 0..4 {
        let t0 = net_input_bytes(&b).await;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        steady = steady.min(net_input_bytes(&b).await - t0);
        if steady < 10_000 {
            break;
        }
    }
    h.shutdown().await;
    println!("registry bytes at 10k schedules: first publish {first}, then {steady} per second of 10 publishes");
    assert!(
        first > 500_000,
        "the first publish writes every entry: {first}"
    );
    assert!(
        steady < 10_000,
        "ten publishes sent {steady} bytes: entries were rewritten"
    );
}

/// The leader prunes the fire state of ids no instance registers any more, without anyone
/// reading the registry.
#[tokio::test]
async fn the_leader_prunes_fire_state_of_schedules_nobody_registers() {
    let ns = chronos_testkit::namespace();
    let cfg = SchedulerConfig {
        remove_after: Duration::from_secs(1),
        ..config(1000)
    };
    let mut gone = Scheduler::new(broker(&ns).await, cfg.clone());
    gone.register_interval(
        Duration::from_secs(1),
        &Ping { n: 11 },
        ScheduleOptions::new().id("retired"),
    )
    .expect("register");
    let h = gone.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    h.shutdown().await;
    let b = broker(&ns).await;
    let q = QueueName::new("default").expect("queue");
    let st = b
        .fire_state(&q, &["retired".to_string()])
        .await
        .expect("state");
    assert!(st[0].last_fired_ms.is_some(), "{st:?}");
    let mut stays = Scheduler::new(broker(&ns).await, cfg);
    stays
        .register_interval(
            Duration::from_secs(3600),
            &Ping { n: 12 },
            ScheduleOptions::new().id("current"),
        )
        .expect("register");
    let h = stays.start().await.expect("start");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    h.shutdown().await;
    let st = b
        .fire_state(&q, &["retired".to_string(), "current".to_string()])
        .await
        .expect("state");
    assert_eq!(st[0], chronos_broker::FireState::default(), "pruned");
    assert!(st[1].registered_ms.is_some(), "still registered: {st:?}");
}
