//! Runtime schedules on a running cluster of three scheduler processes: a schedule added
//! through the API while they run fires every 1 s trigger exactly once, across a SIGKILL of
//! the leader; once removed, it fires nothing after the leader saw the removal; the registry
//! shows where each schedule comes from.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chronos::{
    list_schedules, Change, Inspect, NewSchedule, QueueName, RedisBroker, RuntimeSchedules,
    ScheduleOptions, ScheduleSource, SchedulerConfig, Schedules, TaskState,
};
use chronos_tests::Tick;

const TTL_MS: u64 = 2000;
/// How long after a change the leader may still act on the old set: one poll (500 ms) plus
/// the reads.
const BOUND_MS: i64 = 1000;

struct Fleet {
    children: Vec<Child>,
}

impl Fleet {
    fn start(url: &str, ns: &str, n: usize) -> Self {
        let children = (0..n)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_chronos-test-scheduler"))
                    .env("CHRONOS_REDIS_URL", url)
                    .env("CHRONOS_NS", ns)
                    .env("CHRONOS_TTL_MS", TTL_MS.to_string())
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("spawn scheduler")
            })
            .collect();
        Self { children }
    }

    fn kill(&mut self, pid: u32) {
        let child = self
            .children
            .iter_mut()
            .find(|c| c.id() == pid)
            .expect("a child of this fleet");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The leader's pid, waiting up to `within` for one that is not `not`.
async fn leader(b: &RedisBroker, not: Option<u32>, within: Duration) -> u32 {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Ok(Some(l)) = b.leader().await {
            if let Some(pid) = l.id.strip_prefix("pid-").and_then(|p| p.parse().ok()) {
                if Some(pid) != not {
                    return pid;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no new leader within {within:?}");
}

/// Trigger seconds of the schedule's tasks in `queue`, sorted.
async fn fired(b: &RedisBroker, queue: &str, id: &str) -> Vec<i64> {
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
    secs
}

async fn wait_fired(b: &RedisBroker, within: Duration, done: impl Fn(&[i64]) -> bool) -> Vec<i64> {
    let deadline = Instant::now() + within;
    loop {
        let secs = fired(b, "beats", "beat").await;
        if done(&secs) {
            return secs;
        }
        assert!(
            Instant::now() < deadline,
            "not reached in {within:?}: {secs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn until(at_ms: i64) {
    let left = at_ms - now_ms();
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

#[tokio::test]
async fn a_schedule_added_and_removed_on_a_running_three_instance_cluster() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let mut fleet = Fleet::start(&url, &ns, 3);
    let b = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    let first_leader = leader(&b, None, Duration::from_secs(10)).await;

    // Added through the API while the three processes run.
    let rt = RuntimeSchedules::new(b.clone());
    let beat = NewSchedule::interval(
        "beat",
        Duration::from_secs(1),
        &Tick {
            note: "runtime".into(),
        },
        ScheduleOptions::new().queue("beats"),
    )
    .expect("valid");
    let added_at = now_ms();
    assert_eq!(rt.add(beat).await.expect("add"), Change::Done);
    wait_fired(&b, Duration::from_secs(5), |s| s.len() >= 2).await;

    // The registry shows both sources: `tick` from the processes' code, `beat` from the API.
    let listed = list_schedules(&b, &SchedulerConfig::default())
        .await
        .expect("list");
    let source = |id: &str| listed.iter().find(|e| e.id == id).map(|e| e.source);
    assert_eq!(source("tick"), Some(ScheduleSource::Code));
    assert_eq!(source("beat"), Some(ScheduleSource::Runtime));

    // The leader is killed mid-term; a follower takes over and catches up on what fell due.
    fleet.kill(first_leader);
    let killed_at = now_ms();
    let second = leader(&b, Some(first_leader), Duration::from_millis(TTL_MS + 3000)).await;
    assert_ne!(second, first_leader);
    let secs = wait_fired(&b, Duration::from_secs(6), |s| {
        s.iter()
            .filter(|&&t| t * 1000 > killed_at + TTL_MS as i64)
            .count()
            >= 2
    })
    .await;

    // Every trigger since the add, exactly once, no gap across the kill.
    let distinct: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        secs.len(),
        "a trigger fired twice: {secs:?}"
    );
    assert_eq!(secs[0], added_at.div_euclid(1000) + 1, "{secs:?}");
    let last = secs[secs.len() - 1];
    assert_eq!((last - secs[0] + 1) as usize, secs.len(), "a gap: {secs:?}");

    // Removed: nothing fires once the leader saw it.
    assert_eq!(rt.remove("beat").await.expect("remove"), Change::Done);
    let removed_at = now_ms();
    until(removed_at + BOUND_MS).await;
    let before = fired(&b, "beats", "beat").await;
    assert!(
        before.iter().all(|&t| t * 1000 <= removed_at + BOUND_MS),
        "fired after the bound: {before:?} (removed at {removed_at})"
    );
    until(removed_at + BOUND_MS + 3000).await;
    let after = fired(&b, "beats", "beat").await;
    assert_eq!(before, after, "a removed schedule fired");
    let listed = list_schedules(&b, &SchedulerConfig::default())
        .await
        .expect("list");
    assert!(listed.iter().all(|e| e.id != "beat"), "still listed");
    assert!(listed.iter().any(|e| e.id == "tick"));

    // The cluster-wide counter counts both schedules' tasks (`tick` keeps firing meanwhile).
    let ticks_before = fired(&b, "ticks", "tick").await.len();
    let m = b.scheduler_metrics().await.expect("metrics");
    let ticks_after = fired(&b, "ticks", "tick").await.len();
    let fired_total = m.fired as usize;
    assert!(
        fired_total >= ticks_before + after.len() && fired_total <= ticks_after + after.len(),
        "{m:?}, ticks {ticks_before}..{ticks_after}, beats {}",
        after.len()
    );
}
