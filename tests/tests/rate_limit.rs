//! Cluster-wide queue limits across four worker processes: a rate of N starts per second holds
//! within 5 % over a 10 s window and in every second of it, and a concurrency limit holds
//! across the processes. Each run records its start by Redis' clock (see the
//! `chronos-test-limited-worker` binary).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chronos::fred::interfaces::{KeysInterface, ListInterface};
use chronos::prelude::*;
use chronos::QueueName;
use chronos_tests::Work;

/// Worker processes, killed (and reaped) when dropped, so a failing test leaves none behind.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `n` worker processes with `limits` (env vars) and waits until each says it is ready.
fn spawn_workers(n: usize, url: &str, ns: &str, limits: &[(&str, &str)]) -> Workers {
    let mut workers = Workers(Vec::new());
    for _ in 0..n {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronos-test-limited-worker"));
        cmd.env("CHRONOS_REDIS_URL", url)
            .env("CHRONOS_NS", ns)
            .stdout(Stdio::piped());
        for (k, v) in limits {
            cmd.env(k, v);
        }
        workers.0.push(cmd.spawn().expect("spawn worker"));
    }
    for c in &mut workers.0 {
        let out = c.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("read");
        assert!(line.starts_with("ready"), "worker said {line:?}");
    }
    workers
}

async fn connect(url: &str, ns: &str) -> RedisBroker {
    RedisBroker::builder(url)
        .namespace(ns)
        .connect()
        .await
        .expect("connect")
}

async fn fill(broker: &RedisBroker, n: usize, sleep_ms: u64) {
    let client = Client::new(broker.clone());
    let work = Work { sleep_ms };
    let opts = EnqueueOptions::new().queue("limited");
    for _ in 0..n / 500 {
        let batch = (0..500).map(|_| (&work, opts.clone()));
        let r = client.enqueue_batch(batch).await.expect("enqueue");
        assert!(r.iter().all(|r| r.is_ok()));
    }
}

/// (Redis ms, worker pid) of every recorded start.
async fn starts(broker: &RedisBroker, ns: &str) -> Vec<(i64, u32)> {
    let raw: Vec<String> = broker
        .client()
        .lrange(format!("{ns}:starts"), 0, -1)
        .await
        .expect("starts");
    raw.iter()
        .filter_map(|s| {
            let (ms, pid) = s.split_once(':')?;
            Some((ms.parse().ok()?, pid.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_holds_within_five_percent_across_four_processes() {
    // 100 per second: one start every 10 ms, so 5 % (5 starts) leaves 40 ms of scheduling
    // jitter in the recorded start times beyond the one start the rate may run ahead.
    const N: usize = 100;
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    // More than 13 s of work at N per second.
    fill(&broker, 1500, 0).await;
    let workers = spawn_workers(4, &url, &ns, &[("LIMIT_RATE", "100/1000")]);
    let redis = broker.client().clone();
    let key = format!("{ns}:starts");
    // Wait (bounded) until the starts span 13 s of Redis time: 2 s to settle, 10 s measured,
    // and the second after, so the last measured second is complete.
    chronos_testkit::eventually(Duration::from_secs(40), "13 s of starts", || async {
        let first: Option<String> = redis.lindex(&key, 0).await.ok().flatten();
        let last: Option<String> = redis.lindex(&key, -1).await.ok().flatten();
        let ms = |s: Option<String>| -> Option<i64> { s?.split_once(':')?.0.parse().ok() };
        matches!((ms(first), ms(last)), (Some(a), Some(b)) if b - a >= 13_000)
    })
    .await;
    drop(workers);
    let starts = starts(&broker, &ns).await;
    let first = starts.iter().map(|(ms, _)| *ms).min().expect("starts");
    // Ten whole seconds of Redis' clock, from the first whole second 2 s after the first start.
    let from = (first + 2_000).div_euclid(1000) * 1000 + 1000;
    let to = from + 10_000;
    let mut per_second: BTreeMap<i64, usize> = BTreeMap::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut window: Vec<i64> = Vec::new();
    for (ms, pid) in &starts {
        if (from..to).contains(ms) {
            *per_second.entry(ms.div_euclid(1000)).or_default() += 1;
            pids.insert(*pid);
            window.push(*ms);
        }
    }
    window.sort_unstable();
    // The busiest second-long window anywhere (not only aligned to whole seconds).
    let mut sliding = 0;
    let mut j = 0;
    for i in 0..window.len() {
        while window[i] - window[j] >= 1000 {
            j += 1;
        }
        sliding = sliding.max(i + 1 - j);
    }
    let total = window.len();
    eprintln!("starts in 10 s: {total}, per second: {per_second:?}, busiest sliding second: {sliding}, processes: {}", pids.len());
    let expected = 10 * N;
    // The promise is the upper bound (5 %); the lower one only shows the limit does not starve
    // the queue, and is loose because a loaded machine may not keep four processes at 100/s.
    assert!(
        total * 20 <= expected * 21 && total * 5 >= expected * 4,
        "{total} starts in 10 s, expected at most {expected} + 5 % and at least 80 % of it"
    );
    assert_eq!(
        per_second.len(),
        10,
        "every second saw starts: {per_second:?}"
    );
    for (s, n) in &per_second {
        assert!(
            n * 20 <= N * 21,
            "second {s} had {n} starts, limit {N}: {per_second:?}"
        );
    }
    assert_eq!(pids.len(), 4, "all four processes shared the work");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_holds_across_four_processes() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    fill(&broker, 500, 20).await;
    let workers = spawn_workers(4, &url, &ns, &[("LIMIT_CONCURRENCY", "5")]);
    let redis = broker.client().clone();
    let queue = QueueName::new("limited").expect("queue");
    chronos_testkit::eventually(Duration::from_secs(60), "500 tasks done", || async {
        let s = broker.queue_stats(&queue).await.expect("stats");
        s.pending + s.active == 0
    })
    .await;
    drop(workers);
    let max: Option<i64> = redis.get(format!("{ns}:active:max")).await.expect("max");
    let pids: std::collections::BTreeSet<u32> = starts(&broker, &ns)
        .await
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        max,
        Some(5),
        "at most 5 ran at once across the processes, and 5 did"
    );
    assert_eq!(pids.len(), 4, "all four processes ran tasks");
}

/// Redis' clock in unix ms.
async fn redis_ms(broker: &RedisBroker) -> i64 {
    use chronos::fred::interfaces::LuaInterface;
    let script = "local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";
    broker
        .client()
        .eval(script, Vec::<String>::new(), Vec::<String>::new())
        .await
        .expect("time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_permits_of_a_killed_worker_come_back_after_their_ttl() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    let client = Client::new(broker.clone());
    let opts = EnqueueOptions::new().queue("limited");
    // Two long tasks take both permits; two quick ones wait behind them.
    for sleep_ms in [60_000, 60_000] {
        client
            .enqueue(&Work { sleep_ms }, opts.clone())
            .await
            .expect("enqueue");
    }
    let limits = [("LIMIT_CONCURRENCY", "2")];
    let mut first = spawn_workers(1, &url, &ns, &limits);
    let redis = broker.client().clone();
    let active = format!("{ns}:active");
    chronos_testkit::eventually(Duration::from_secs(10), "both long tasks run", || async {
        redis.get::<Option<i64>, _>(&active).await.ok().flatten() == Some(2)
    })
    .await;
    for sleep_ms in [0, 0] {
        client
            .enqueue(&Work { sleep_ms }, opts.clone())
            .await
            .expect("enqueue");
    }
    // SIGKILL: the permits are neither given back nor kept alive any more.
    let c = &mut first.0[0];
    c.kill().expect("kill");
    c.wait().expect("reap");
    let killed_at = redis_ms(&broker).await;
    let second = spawn_workers(1, &url, &ns, &limits);
    let pid = second.0[0].id();
    chronos_testkit::eventually(
        Duration::from_secs(20),
        "the second worker ran tasks",
        || async {
            starts(&broker, &ns)
                .await
                .iter()
                .filter(|(_, p)| *p == pid)
                .count()
                >= 2
        },
    )
    .await;
    drop(second);
    let first_start = starts(&broker, &ns)
        .await
        .into_iter()
        .filter(|(_, p)| *p == pid)
        .map(|(ms, _)| ms)
        .min()
        .expect("a start");
    // The tokens live `recover_min_idle` (3 s in the worker binary) after their last refresh
    // (heartbeat every 500 ms): nothing of the queue could start before they expired.
    let waited = first_start - killed_at;
    assert!(
        (2_400..15_000).contains(&waited),
        "the second worker started {waited} ms after the kill"
    );
}
