use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::ClientLike;
use chronos::prelude::*;
use chronos::Inspect;
use serde::{Deserialize, Serialize};

use crate::cost::{self, Cost};
use crate::fixture::{payload, Payload};
use crate::peers::{field, Peers};
use crate::report::{median, percentile, row};

const N: usize = 100_000;
/// Concurrency 1 drains one task per round trip; fewer tasks keep the run short (BullMQ's run
/// uses the same cap).
const N1: usize = 20_000;
const CONCURRENCY: [usize; 4] = [1, 16, 64, 256];
const RUNS: usize = 3;

/// A task carrying its enqueue time, for latency.
#[derive(Serialize, Deserialize)]
struct Stamped {
    enqueued_us: u64,
    body: String,
}

impl TaskArgs for Stamped {
    const KIND: &'static str = "bench:stamped";
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A latency load: tasks per second, for so many seconds.
type Load = (u64, u64);

/// Enqueue-to-start latency is measured at these rates (tasks/s) for these many seconds: a light
/// load, a busy one, and one near what a worker of concurrency 50 drains.
const LATENCY_RATES: [Load; 3] = [(50, 10), (5_000, 5), (20_000, 5)];

/// Drain throughput at several concurrencies and enqueue-to-start latency at three loads.
pub(crate) async fn run(peers: &Peers) -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!("== e2e: drain {N} no-op tasks (100-byte payload; {N1} at concurrency 1), median of {RUNS} runs, redis at {url}");
    let (levels, rates) = chosen()?;
    let mut ours = Vec::new();
    for &c in &levels {
        let n = if c == 1 { N1 } else { N };
        let (mut runs, mut costs, mut cpus) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..RUNS {
            let (rate, cost, cpu) = drain(&url, &format!("e2e-{c}-{run}"), c, n).await?;
            runs.push(rate);
            costs.push(cost);
            cpus.push(cpu);
        }
        ours.push((
            c,
            n,
            median(&runs),
            runs,
            cost::median(&costs),
            median(&cpus),
        ));
    }
    let mut lat = Vec::new();
    for &(rate, secs) in &rates {
        lat.push((rate, latency(&url, rate, secs).await?));
    }

    let conc = levels
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let peer_e2e = peers.bullmq(
        &url,
        &[
            "e2e",
            "--n",
            &N.to_string(),
            "--n1",
            &N1.to_string(),
            "--payload",
            "100",
            "--concurrency",
            &conc,
        ],
    );
    let mut peer_lat = Vec::new();
    for &(rate, secs) in &rates {
        let lines = peers.bullmq(
            &url,
            &[
                "latency",
                "--rate",
                &rate.to_string(),
                "--seconds",
                &secs.to_string(),
                "--payload",
                "100",
            ],
        );
        peer_lat.extend(lines.unwrap_or_default());
    }
    let pe = peer_e2e.as_deref().unwrap_or(&[]);
    let pl = peer_lat.as_slice();
    for (c, n, m, runs, cost, cpu) in &ours {
        let label = format!("drain {n} tasks, concurrency {c} (tasks/s)");
        row(
            &label,
            *m,
            field(pe, &[&format!("\"concurrency\":{c},")], "tasks_per_s"),
            "tasks/s",
        );
        println!("   runs: {runs:.0?}");
        let needle = format!("\"concurrency\":{c},");
        cost::rows(&format!("drain c{c}"), cost, cost::peer(pe, &[&needle]));
        row(
            &format!("drain c{c}: worker cpu per task (us)"),
            *cpu,
            field(pe, &[&needle], "worker_cpu_us_per_task"),
            "us",
        );
    }
    for (rate, (p50, p99)) in lat {
        let needle = format!("\"rate\":{rate},");
        for (q, ours) in [("p50", p50), ("p99", p99)] {
            row(
                &format!("enqueue-to-start latency {q} at {rate}/s (ms)"),
                ours,
                field(pl, &["latency", &needle], &format!("{q}_ms")),
                "ms",
            );
        }
    }
    Ok(())
}

/// The concurrencies and latency loads to run: all of them, or only the concurrencies listed in
/// `CHRONOS_BENCH_CONCURRENCY` (comma-separated, e.g. `1,16`) and then no latency run, for a
/// quick look at one row while working on it.
fn chosen() -> Result<(Vec<usize>, Vec<Load>)> {
    match std::env::var("CHRONOS_BENCH_CONCURRENCY") {
        Ok(list) => {
            let levels = list
                .split(',')
                .map(|c| c.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .context("CHRONOS_BENCH_CONCURRENCY: comma-separated numbers")?;
            Ok((levels, Vec::new()))
        }
        Err(_) => Ok((CONCURRENCY.to_vec(), LATENCY_RATES.to_vec())),
    }
}

/// Drains `n` tasks; returns tasks/s, the Redis cost of the drain (server start to shutdown,
/// so idle polling and heartbeats count too, as they do for the peer's worker), and this
/// process's CPU per task (user + system, µs) while the worker drains: the bench enqueues before
/// and only waits meanwhile, so that is the worker's own.
async fn drain(url: &str, ns: &str, concurrency: usize, n: usize) -> Result<(f64, Cost, f64)> {
    let broker = RedisBroker::builder(url).namespace(ns).connect().await?;
    let client = Client::new(broker.clone());
    let args = payload();
    for _ in 0..n / 1000 {
        let r = client
            .enqueue_batch((0..1000).map(|_| (&args, EnqueueOptions::new())))
            .await?;
        anyhow::ensure!(r.iter().all(|r| r.is_ok()), "enqueue refused a task");
    }
    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?;
    let config = ServerConfig::default().concurrency(concurrency);
    let s0 = cost::snap(broker.client()).await?;
    let start = Instant::now();
    let cpu0 = crate::cpu::process_us()?;
    let server = Server::new(broker.clone(), mux, config)?.start().await?;
    while server.stats().succeeded < n as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = start.elapsed();
    let cpu = (crate::cpu::process_us()? - cpu0) / n as f64;
    server.shutdown().await;
    let cost = cost::delta(&s0, &cost::snap(broker.client()).await?, n as f64);
    let stats = broker
        .queue_stats(&chronos::QueueName::new("default")?)
        .await?;
    anyhow::ensure!(
        stats.processed == n as u64,
        "only {} of {n} acked",
        stats.processed
    );
    let _: () = broker.client().flushall(false).await?;
    Ok((n as f64 / elapsed.as_secs_f64(), cost, cpu))
}

/// `rate` tasks/s for `secs` seconds into a server with concurrency 50; each handler records
/// start minus enqueue time (same process, same clock). Tasks go out one enqueue call each (as
/// the peer adds its jobs), in slices every 10 ms, each stamped when its call is made.
async fn latency(url: &str, rate: u64, secs: u64) -> Result<(f64, f64)> {
    let broker = RedisBroker::builder(url)
        .namespace("latency")
        .connect()
        .await?;
    let samples = Arc::new(Mutex::new(Vec::new()));
    let s = samples.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, t: Task<Stamped>| {
        let s = s.clone();
        async move {
            let ms = now_us().saturating_sub(t.args.enqueued_us) as f64 / 1000.0;
            s.lock().map_err(|_| TaskError::retry("poisoned"))?.push(ms);
            Ok(())
        }
    })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default().concurrency(50))?
        .start()
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let client = Client::new(broker.clone());
    let total = usize::try_from(rate * secs)?;
    let slices = usize::try_from(secs * 100)?;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = 0usize;
    for i in 1..=slices {
        tick.tick().await;
        // Where the rate says the sending should be by the end of this slice.
        let due = total * i / slices;
        let calls = (sent..due).map(|_| {
            let client = &client;
            async move {
                let t = Stamped {
                    enqueued_us: now_us(),
                    body: "x".repeat(80),
                };
                client.enqueue(&t, EnqueueOptions::new()).await
            }
        });
        for r in futures::future::join_all(calls).await {
            r?;
        }
        sent = due;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while samples
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .len()
        < total
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.shutdown().await;
    let _: () = broker.client().flushall(false).await?;
    let mut v = samples
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    anyhow::ensure!(v.len() == total, "{} of {total} latency samples", v.len());
    v.sort_by(|a, b| a.total_cmp(b));
    Ok((percentile(&v, 50.0), percentile(&v, 99.0)))
}
