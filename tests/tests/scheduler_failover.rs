//! Scheduler leaders in separate processes, killed (SIGKILL), stopped gracefully (SIGTERM) and
//! paused past their TTL (SIGSTOP): every 1 s trigger is enqueued, and none twice.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chronos::{Inspect, QueueName, RedisBroker, Schedules, TaskState};
use chronos_tests::procs::Proc;

const TTL_MS: u64 = 2000;

/// Scheduler processes (`chronos-test-scheduler`, instance id `pid-<pid>`), killed on drop.
struct Fleet {
    url: String,
    ns: String,
    procs: Vec<Proc>,
}

impl Fleet {
    fn start(n: usize) -> Self {
        let url = chronos_testkit::shared_url().expect("redis");
        let ns = chronos_testkit::namespace();
        let mut fleet = Self {
            url,
            ns,
            procs: Vec::new(),
        };
        for _ in 0..n {
            fleet.spawn();
        }
        fleet
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_chronos-test-scheduler"))
            .env("CHRONOS_REDIS_URL", &self.url)
            .env("CHRONOS_NS", &self.ns)
            .env("CHRONOS_TTL_MS", TTL_MS.to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn scheduler");
        let id = format!("pid-{}", child.id());
        self.procs.push(Proc::new(child, id, None));
    }

    async fn broker(&self) -> RedisBroker {
        RedisBroker::builder(self.url.clone())
            .namespace(self.ns.clone())
            .connect()
            .await
            .expect("connect")
    }

    fn signal(&self, pid: u32, sig: &str) {
        let p = self
            .procs
            .iter()
            .find(|p| p.pid() == pid)
            .expect("one of ours");
        p.signal(sig).unwrap_or_else(|e| panic!("{e}"));
    }

    /// SIGTERM to all at once (they resign together), then waits for each to exit.
    fn stop_all(&mut self) {
        for p in &self.procs {
            p.terminate();
        }
        for p in &mut self.procs {
            p.wait_exit(Duration::from_secs(30));
        }
    }
}

/// The leader's pid and epoch, waiting up to `within` for one that is not `not`.
async fn leader(b: &RedisBroker, not: Option<u32>, within: Duration) -> (u32, u64, Instant) {
    let not = not.map(|pid| format!("pid-{pid}"));
    let l = chronos_tests::procs::leader(b, not.as_deref(), within)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pid =
        l.id.strip_prefix("pid-")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("leader {} is no test scheduler", l.id));
    (pid, l.epoch, Instant::now())
}

/// Trigger seconds of every enqueued tick, asserting none is doubled or missing.
async fn assert_every_trigger_once(b: &RedisBroker) -> Vec<i64> {
    let q = QueueName::new("ticks").expect("queue");
    let tasks = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list");
    let mut secs: Vec<i64> = tasks
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.id.strip_prefix("tick:").and_then(|s| s.parse().ok()))
        .collect();
    secs.sort();
    let distinct: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        secs.len(),
        "a trigger was enqueued twice: {secs:?}"
    );
    let stream = b.queue_stats(&q).await.expect("stats").pending;
    assert_eq!(stream as usize, secs.len(), "one stream entry per trigger");
    let (first, last) = (secs[0], secs[secs.len() - 1]);
    assert_eq!(
        (last - first + 1) as usize,
        secs.len(),
        "a trigger was missed: {secs:?}"
    );
    // The fire script counts in the same atomic step as it enqueues: across kills, hand-overs
    // and a deposed leader's refused fires, the cluster-wide count matches the tasks exactly.
    let m = b.scheduler_metrics().await.expect("metrics");
    assert_eq!(m.fired as usize, secs.len(), "{m:?}");
    secs
}

#[tokio::test]
async fn killed_leader_is_replaced_within_ttl_and_no_trigger_is_missed_or_doubled() {
    let mut fleet = Fleet::start(3);
    let b = fleet.broker().await;
    let (old, old_epoch, _) = leader(&b, None, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    fleet.signal(old, "-KILL");
    let killed = Instant::now();
    let (new, new_epoch, at) = leader(&b, Some(old), Duration::from_secs(10)).await;
    let takeover = at - killed;
    assert!(
        takeover <= Duration::from_millis(TTL_MS + 1000),
        "takeover took {takeover:?}"
    );
    assert!(new_epoch > old_epoch);
    assert_ne!(new, old);
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    fleet.stop_all();
    let secs = assert_every_trigger_once(&b).await;
    assert!(secs.len() >= 7, "{secs:?}");
}

#[tokio::test]
async fn graceful_resign_hands_over_in_under_a_second() {
    let mut fleet = Fleet::start(2);
    let b = fleet.broker().await;
    let (old, _, _) = leader(&b, None, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    fleet.signal(old, "-TERM");
    let asked = Instant::now();
    let (_, _, at) = leader(&b, Some(old), Duration::from_secs(5)).await;
    let handover = at - asked;
    assert!(
        handover < Duration::from_secs(1),
        "hand-over took {handover:?}"
    );
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    fleet.stop_all();
    assert_every_trigger_once(&b).await;
}

#[tokio::test]
async fn leader_paused_past_its_ttl_does_not_double_fire_when_it_resumes() {
    let mut fleet = Fleet::start(2);
    let b = fleet.broker().await;
    let (old, _, _) = leader(&b, None, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Frozen mid-term (a long GC pause, a stalled VM): a follower takes over meanwhile.
    fleet.signal(old, "-STOP");
    let (new, _, _) = leader(&b, Some(old), Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // It wakes up believing it still leads, with due triggers in hand.
    fleet.signal(old, "-CONT");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let (current, _, _) = leader(&b, None, Duration::from_secs(1)).await;
    assert_eq!(
        current, new,
        "the resumed process did not take the lead back"
    );
    fleet.stop_all();
    assert_every_trigger_once(&b).await;
}
