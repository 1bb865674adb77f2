//! Priority levels measured beside BullMQ's `priority` option on the same Redis:
//!
//! * enqueue of tasks spread over levels 0..=9 (single with 50 producers, batches of 1000);
//! * drain of a prefilled backlog spread over the levels at concurrency 1, 16 and 64;
//! * the starvation bound: one level-9 task behind a flow of level-0 tasks that arrives faster
//!   than the server drains it, with the queue's aging bound set to [`AGING_MS`]. Counted in
//!   starts (handlers begun between its enqueue and its start) and in milliseconds.
//!
//! BullMQ's levels are `priority` 1..=10 (its 0 means none), so level n is its n + 1; it has no
//! aging, so its low job is reported as run or "not run" after the same cap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::HashesInterface;
use chronos::prelude::*;
use chronos::QueueName;
use serde::{Deserialize, Serialize};

use crate::cost::{self, Cost};
use crate::fixture::{connect, flush, payload, Payload, BATCH};
use crate::peers::{field, Peers};
use crate::report::{median, row};

/// Tasks per enqueue run and per drain run, as in the `enqueue` and `e2e` modes.
const N: usize = 100_000;
/// Concurrency 1 takes one task per round trip; fewer tasks keep the run short.
const N1: usize = 20_000;
const PRODUCERS: usize = 50;
const CONCURRENCY: [usize; 3] = [1, 16, 64];
const RUNS: usize = 3;
const LEVELS: u8 = 10;

/// The queue's aging bound during the starvation runs.
const AGING_MS: u64 = 2_000;
/// Each started task of the starvation runs sleeps this long at concurrency 1, so the server
/// starts at most ~200 tasks/s...
const WORK_MS: u64 = 5;
/// ...while the flow brings `FLOW_BATCH` level-0 tasks every `FLOW_MS` (500/s), on top of a
/// level-0 backlog of `BACKLOG`: the urgent work never runs out.
const FLOW_MS: u64 = 10;
const FLOW_BATCH: usize = 5;
const BACKLOG: usize = 200;
/// How long a starvation run waits for the low task: five aging bounds.
const CAP: Duration = Duration::from_secs(10);

/// The level of the `i`-th task of a spread: 0, 1, ..., 9, 0, ...
fn spread(i: usize) -> Result<Priority> {
    Ok(Priority::level((i % LEVELS as usize) as u8)?)
}

pub(crate) async fn run(peers: &Peers) -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== priority: tasks spread over levels 0..9 (bullmq priority 1..10), 100-byte payload, \
         median of {RUNS} runs, redis at {url}"
    );

    let (mut single, mut batch) = (Vec::new(), Vec::new());
    let (mut single_cost, mut batch_cost) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let client = connect(&url, &format!("prio-s{run}")).await?;
        let redis = client.broker().client();
        let s0 = cost::snap(redis).await?;
        single.push(enqueue_single(&client).await?);
        single_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
        let client = connect(&url, &format!("prio-b{run}")).await?;
        let redis = client.broker().client();
        let s0 = cost::snap(redis).await?;
        let start = Instant::now();
        fill_spread(&client, N).await?;
        batch.push(N as f64 / start.elapsed().as_secs_f64());
        batch_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
        flush(&client).await?;
    }

    let mut drains = Vec::new();
    for c in CONCURRENCY {
        let n = if c == 1 { N1 } else { N };
        let (mut runs, mut costs) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            let (rate, cost) = drain(&url, &format!("prio-d{c}-{run}"), c, n).await?;
            runs.push(rate);
            costs.push(cost);
        }
        drains.push((c, n, median(&runs), runs, cost::median(&costs)));
    }

    let mut starved = Vec::new();
    for run in 0..RUNS {
        starved.push(starvation(&url, &format!("prio-a{run}")).await?);
    }

    let conc = CONCURRENCY.map(|c| c.to_string()).join(",");
    let peer = peers.bullmq(
        &url,
        &[
            "priority",
            "--n",
            &N.to_string(),
            "--n1",
            &N1.to_string(),
            "--payload",
            "100",
            "--producers",
            &PRODUCERS.to_string(),
            "--concurrency",
            &conc,
            "--work-ms",
            &WORK_MS.to_string(),
            "--flow-ms",
            &FLOW_MS.to_string(),
            "--flow-batch",
            &FLOW_BATCH.to_string(),
            "--backlog",
            &BACKLOG.to_string(),
            "--cap",
            &CAP.as_secs().to_string(),
            "--runs",
            &RUNS.to_string(),
        ],
    );
    let peer = peer.as_deref().unwrap_or(&[]);

    let single_case = format!("\"case\":\"enqueue_single_c{PRODUCERS}\"");
    let bulk_case = format!("\"case\":\"enqueue_bulk_{BATCH}\"");
    row(
        "prio enqueue single, 50 producers (tasks/s)",
        median(&single),
        field(peer, &[&single_case], "tasks_per_s"),
        "tasks/s",
    );
    row(
        "prio enqueue batch of 1000 (tasks/s)",
        median(&batch),
        field(peer, &[&bulk_case], "tasks_per_s"),
        "tasks/s",
    );
    println!("   runs: single {single:.0?} batch {batch:.0?}");
    cost::rows(
        "prio enqueue single",
        &cost::median(&single_cost),
        cost::peer(peer, &[&single_case]),
    );
    cost::rows(
        "prio enqueue batch",
        &cost::median(&batch_cost),
        cost::peer(peer, &[&bulk_case]),
    );

    for (c, n, m, runs, cost) in &drains {
        let needle = format!("\"case\":\"drain\",\"concurrency\":{c},");
        row(
            &format!("prio drain {n} tasks, concurrency {c} (tasks/s)"),
            *m,
            field(peer, &[&needle], "tasks_per_s"),
            "tasks/s",
        );
        println!("   runs: {runs:.0?}");
        cost::rows(
            &format!("prio drain c{c}"),
            cost,
            cost::peer(peer, &[&needle]),
        );
    }

    report_starvation(&starved, peer);
    Ok(())
}

async fn enqueue_single(client: &Client) -> Result<f64> {
    let client = Arc::new(client.clone());
    let args = Arc::new(payload());
    let start = Instant::now();
    let mut handles = Vec::new();
    for p in 0..PRODUCERS {
        let (client, args) = (client.clone(), args.clone());
        handles.push(tokio::spawn(async move {
            for i in 0..N / PRODUCERS {
                let opts = EnqueueOptions::new().priority(spread(p + i)?);
                client.enqueue(&*args, opts).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N as f64 / start.elapsed().as_secs_f64())
}

/// Enqueues `n` payload tasks spread over the levels, in batches of [`BATCH`].
async fn fill_spread(client: &Client, n: usize) -> Result<()> {
    let args = payload();
    let opts: Vec<EnqueueOptions> = (0..LEVELS as usize)
        .map(|l| spread(l).map(|p| EnqueueOptions::new().priority(p)))
        .collect::<Result<_>>()?;
    for _ in 0..n / BATCH {
        let results = client
            .enqueue_batch((0..BATCH).map(|i| (&args, opts[i % opts.len()].clone())))
            .await?;
        anyhow::ensure!(
            results.iter().all(|r| r.is_ok()),
            "batch enqueue refused a task"
        );
    }
    Ok(())
}

/// Drains `n` prioritized tasks; tasks/s and the Redis cost from server start to shutdown, as
/// `e2e` measures plain tasks.
async fn drain(url: &str, ns: &str, concurrency: usize, n: usize) -> Result<(f64, Cost)> {
    let client = connect(url, ns).await?;
    let broker = client.broker().clone();
    fill_spread(&client, n).await?;
    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?;
    let config = ServerConfig::default().concurrency(concurrency);
    let s0 = cost::snap(broker.client()).await?;
    let start = Instant::now();
    let server = Server::new(broker.clone(), mux, config)?.start().await?;
    while server.stats().succeeded < n as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = start.elapsed();
    server.shutdown().await;
    let cost = cost::delta(&s0, &cost::snap(broker.client()).await?, n as f64);
    let stats = broker.queue_stats(&QueueName::new("default")?).await?;
    anyhow::ensure!(
        stats.processed == n as u64,
        "only {} of {n} acked",
        stats.processed
    );
    flush(&client).await?;
    Ok((n as f64 / elapsed.as_secs_f64(), cost))
}

/// A task of the starvation runs: the flow's (`low: false`) or the one level-9 task.
#[derive(Serialize, Deserialize)]
struct Flow {
    low: bool,
}

impl TaskArgs for Flow {
    const KIND: &'static str = "bench:flow";
}

/// One starvation run's outcome.
struct Starved {
    /// Starts between the low task's enqueue and its own start (all starts within the cap when
    /// it never ran).
    starts: u64,
    /// Its wait, or the cap.
    waited_ms: f64,
    ran: bool,
}

/// One level-9 task enqueued behind a level-0 backlog, while level-0 tasks keep arriving
/// faster than a concurrency-1 server starts them, with the queue's aging bound at
/// [`AGING_MS`].
async fn starvation(url: &str, ns: &str) -> Result<Starved> {
    let client = connect(url, ns).await?;
    let broker = client.broker().clone();
    let queue = QueueName::new("default")?;
    let settings = format!("{}settings", broker.keyspace().queue(&queue).prefix());
    let _: i64 = broker
        .client()
        .hset(settings, ("aging_ms", AGING_MS.to_string()))
        .await?;
    let urgent = EnqueueOptions::new().priority(Priority::level(0)?);
    let flow = Flow { low: false };
    for _ in 0..BACKLOG / FLOW_BATCH {
        let r = client
            .enqueue_batch((0..FLOW_BATCH).map(|_| (&flow, urgent.clone())))
            .await?;
        anyhow::ensure!(r.iter().all(|r| r.is_ok()), "enqueue refused a task");
    }

    let starts = Arc::new(AtomicU64::new(0));
    // (starts counted when the low task started, when it started)
    let low_start: Arc<Mutex<Option<(u64, Instant)>>> = Arc::new(Mutex::new(None));
    let mut mux = Mux::new();
    let (s, l) = (starts.clone(), low_start.clone());
    mux.handle(move |_ctx: Context, t: Task<Flow>| {
        let (s, l) = (s.clone(), l.clone());
        async move {
            let before = s.fetch_add(1, Ordering::SeqCst);
            if t.args.low {
                *l.lock().map_err(|_| TaskError::retry("poisoned"))? =
                    Some((before, Instant::now()));
            }
            tokio::time::sleep(Duration::from_millis(WORK_MS)).await;
            Ok(())
        }
    })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default().concurrency(1))?
        .start()
        .await?;
    // Let the server reach a steady rate on the backlog first.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let low_opts = EnqueueOptions::new().priority(Priority::level(9)?);
    let starts_at = starts.load(Ordering::SeqCst);
    let at = Instant::now();
    client.enqueue(&Flow { low: true }, low_opts).await?;
    let mut tick = tokio::time::interval(Duration::from_millis(FLOW_MS));
    let outcome = loop {
        tick.tick().await;
        let low = *low_start.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some((before, when)) = low {
            break Starved {
                starts: before.saturating_sub(starts_at),
                waited_ms: when.duration_since(at).as_secs_f64() * 1000.0,
                ran: true,
            };
        }
        if at.elapsed() >= CAP {
            break Starved {
                starts: starts.load(Ordering::SeqCst) - starts_at,
                waited_ms: CAP.as_secs_f64() * 1000.0,
                ran: false,
            };
        }
        let r = client
            .enqueue_batch((0..FLOW_BATCH).map(|_| (&flow, urgent.clone())))
            .await?;
        anyhow::ensure!(r.iter().all(|r| r.is_ok()), "enqueue refused a task");
    };
    server.shutdown().await;
    flush(&client).await?;
    Ok(outcome)
}

fn report_starvation(ours: &[Starved], peer: &[String]) {
    println!(
        "-- starvation: one level-9 task (bullmq priority 10) behind level-0 tasks arriving at \
         {}/s, concurrency 1, {WORK_MS} ms per task, aging bound {AGING_MS} ms (bullmq: none), \
         cap {} s",
        FLOW_BATCH as u64 * 1000 / FLOW_MS,
        CAP.as_secs()
    );
    let show = |ran: bool, starts: f64, ms: f64| {
        if ran {
            format!("ran after {starts:.0} starts / {ms:.0} ms")
        } else {
            format!("not run after {:.0} s / {starts:.0} starts", ms / 1000.0)
        }
    };
    for (run, s) in ours.iter().enumerate() {
        let needle = format!("\"case\":\"starvation\",\"run\":{run},");
        let theirs = match (
            field(peer, &[&needle], "ran"),
            field(peer, &[&needle], "starts"),
            field(peer, &[&needle], "waited_ms"),
        ) {
            (Some(ran), Some(starts), Some(ms)) => show(ran > 0.0, starts, ms),
            _ => "n/a".to_string(),
        };
        println!(
            "   run {run}: chronos {:<34} bullmq {theirs}",
            show(s.ran, s.starts as f64, s.waited_ms)
        );
    }
    let ran: Vec<&Starved> = ours.iter().filter(|s| s.ran).collect();
    if ran.len() == ours.len() {
        let starts: Vec<f64> = ran.iter().map(|s| s.starts as f64).collect();
        let ms: Vec<f64> = ran.iter().map(|s| s.waited_ms).collect();
        let most = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
        println!(
            "a level-9 task waits at most the {AGING_MS} ms bound + a quarter of it (the aging \
             scan's period) + one fetch: {:.0} starts / {:.0} ms \
             (median of {}; most {:.0} starts / {:.0} ms)",
            median(&starts),
            median(&ms),
            ours.len(),
            most(&starts),
            most(&ms)
        );
    } else {
        println!(
            "a level-9 task did not run within {} s in {} of {} runs: the aging bound did not hold",
            CAP.as_secs(),
            ours.len() - ran.len(),
            ours.len()
        );
    }
}
