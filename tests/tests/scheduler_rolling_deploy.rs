//! A rolling deploy that adds a schedule, with real processes: the old version leads and does
//! not know the new schedule, the new version follows and registers it. The leader fires it
//! anyway (from the definition the follower published), and after the old leader is SIGKILLed
//! the new one goes on: every 1 s trigger of the new schedule is enqueued once, none missed.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chronos::{Inspect, QueueName, RedisBroker, Schedules, TaskState};

const TTL_MS: u64 = 2000;

/// The processes of one test, killed on drop.
struct Fleet {
    url: String,
    ns: String,
    children: Vec<Child>,
}

impl Fleet {
    fn new() -> Self {
        Self {
            url: chronos_testkit::shared_url().expect("redis"),
            ns: chronos_testkit::namespace(),
            children: Vec::new(),
        }
    }

    /// Starts a scheduler process registering `ids`; returns its pid.
    fn spawn(&mut self, ids: &str) -> u32 {
        let child = Command::new(env!("CARGO_BIN_EXE_chronos-test-scheduler"))
            .env("CHRONOS_REDIS_URL", &self.url)
            .env("CHRONOS_NS", &self.ns)
            .env("CHRONOS_TTL_MS", TTL_MS.to_string())
            .env("CHRONOS_SCHEDULE_IDS", ids)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn scheduler");
        let pid = child.id();
        self.children.push(child);
        pid
    }

    async fn broker(&self) -> RedisBroker {
        RedisBroker::builder(self.url.clone())
            .namespace(self.ns.clone())
            .connect()
            .await
            .expect("connect")
    }

    fn kill(&mut self, pid: u32) {
        for c in self.children.iter_mut().filter(|c| c.id() == pid) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn stop_all(&mut self) {
        for c in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
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

/// The leader's pid, waiting up to `within` for it to be `pid`.
async fn wait_leader(b: &RedisBroker, pid: u32, within: Duration) {
    let start = Instant::now();
    let want = format!("pid-{pid}");
    while start.elapsed() < within {
        if let Ok(Some(l)) = b.leader().await {
            if l.id == want {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{want} did not lead within {within:?}");
}

/// Trigger seconds of schedule `id` in queue `ticks`.
async fn triggers(b: &RedisBroker, id: &str) -> Vec<i64> {
    let q = QueueName::new("ticks").expect("queue");
    let prefix = format!("{id}:");
    let mut secs: Vec<i64> = b
        .list_tasks(&q, TaskState::Pending, 0, 100_000)
        .await
        .expect("list")
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.id.strip_prefix(&prefix).and_then(|s| s.parse().ok()))
        .collect();
    secs.sort();
    secs
}

#[tokio::test]
async fn a_schedule_only_the_new_version_registers_fires_before_and_after_the_leader_is_killed() {
    let mut fleet = Fleet::new();
    let b = fleet.broker().await;
    let old = fleet.spawn("tick");
    wait_leader(&b, old, Duration::from_secs(10)).await;
    let new = fleet.spawn("tick,added");
    let registered = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    // The leader reads the registry once per publish interval (5 s by default).
    tokio::time::sleep(Duration::from_millis(7_000)).await;
    wait_leader(&b, old, Duration::from_millis(100)).await;
    let before_kill = triggers(&b, "added").await;
    assert!(
        before_kill.len() >= 4,
        "the old leader fired the schedule only the new version registers: {before_kill:?}"
    );
    fleet.kill(old);
    wait_leader(&b, new, Duration::from_millis(TTL_MS + 2_000)).await;
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    fleet.stop_all();

    let secs = triggers(&b, "added").await;
    let distinct: BTreeSet<i64> = secs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        secs.len(),
        "a trigger fired twice: {secs:?}"
    );
    assert!(
        secs.len() > before_kill.len() + 2,
        "the new leader went on: {secs:?}"
    );
    assert_eq!(
        (secs[secs.len() - 1] - secs[0] + 1) as usize,
        secs.len(),
        "a trigger was missed: {secs:?}"
    );
    // Caught up from its first registration: nothing between the new version's start and the
    // leader's first read of its definition was lost.
    assert!(
        secs[0] <= registered + 2,
        "first trigger {} long after registration {registered}",
        secs[0]
    );
}
