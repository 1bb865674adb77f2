//! Tenants (fair sharing inside one queue) measured beside BullMQ on the same Redis:
//!
//! * enqueue of tasks spread over [`TENANTS`] tenants (single with 50 producers, batches of
//!   1000), and the same for plain tasks (no tenant), so that a change to the plain path shows;
//! * drain of a prefilled backlog spread over the tenants at concurrency 1, 16 and 64, and the
//!   same for plain tasks;
//! * the fairness bound: one task of a newly arrived tenant behind a backlog of [`N`] tasks
//!   (of one tenant, then of [`TENANTS`] tenants), counted in starts between its enqueue and its
//!   own start. A new tenant takes the current turn of the rotation, so it waits at most one
//!   start per tenant with work, plus the deliveries already fetched and not started when it
//!   arrived (at most the server's concurrency).
//!
//! BullMQ's open-source version has no groups (per-group fairness and concurrency are in its
//! paid edition), so its figures are its plain jobs: the same rows for both of ours, and its
//! newcomer waits in FIFO order behind the whole backlog. The output says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::QueueName;
use chronos_broker::Tenants;
use serde::{Deserialize, Serialize};

use crate::cost::{self, Cost};
use crate::fixture::{connect, flush, payload, Payload, BATCH};
use crate::peers::{field, Peers};
use crate::report::{median, row};

/// Tasks per enqueue run and per drain run, as in the `enqueue` and `e2e` modes.
const N: usize = 100_000;
/// Concurrency 1 takes one task per round trip; fewer tasks keep the run short.
const N1: usize = 20_000;
const TENANTS: usize = 100;
const PRODUCERS: usize = 50;
const CONCURRENCY: [usize; 3] = [1, 16, 64];
const RUNS: usize = 3;
/// The server's concurrency in the fairness runs.
const FAIR_CONCURRENCY: usize = 16;
/// How long a fairness run waits for the newcomer.
const CAP: Duration = Duration::from_secs(20);
/// BullMQ's newcomer waits behind the whole backlog: its cap is longer.
const PEER_CAP: Duration = Duration::from_secs(120);

/// The tenant of the `i`-th task of a spread over `k` tenants (None: a plain task).
fn tenant_of(i: usize, k: Option<usize>) -> EnqueueOptions {
    match k {
        Some(k) => EnqueueOptions::new().tenant(format!("t{}", i % k)),
        None => EnqueueOptions::new(),
    }
}

pub(crate) async fn run(peers: &Peers) -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== tenants: tasks spread over {TENANTS} tenants, beside plain tasks; 100-byte payload, \
         median of {RUNS} runs, redis at {url}; bullmq has no groups: its figures are plain jobs"
    );

    // (label, tenants) for the tenant tasks and the plain ones.
    let kinds = [("tenant", Some(TENANTS)), ("plain", None)];
    let mut enqueues = Vec::new();
    for (label, k) in kinds {
        let (mut single, mut batch) = (Vec::new(), Vec::new());
        let (mut single_cost, mut batch_cost) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            let client = connect(&url, &format!("tn-{label}-s{run}")).await?;
            let redis = client.broker().client();
            let s0 = cost::snap(redis).await?;
            single.push(enqueue_single(&client, k).await?);
            single_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
            flush(&client).await?;
            let client = connect(&url, &format!("tn-{label}-b{run}")).await?;
            let redis = client.broker().client();
            let s0 = cost::snap(redis).await?;
            let start = Instant::now();
            fill(&client, N, k).await?;
            batch.push(N as f64 / start.elapsed().as_secs_f64());
            batch_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
            flush(&client).await?;
        }
        enqueues.push((label, single, batch, single_cost, batch_cost));
    }

    let mut drains = Vec::new();
    for (label, k) in kinds {
        for c in CONCURRENCY {
            let n = if c == 1 { N1 } else { N };
            let (mut runs, mut costs) = (Vec::new(), Vec::new());
            for run in 0..RUNS {
                let (rate, cost) = drain(&url, &format!("tn-{label}-d{c}-{run}"), c, n, k).await?;
                runs.push(rate);
                costs.push(cost);
            }
            drains.push((label, c, n, median(&runs), runs, cost::median(&costs)));
        }
    }

    let mut fair = Vec::new();
    for k in [1, TENANTS] {
        let mut runs = Vec::new();
        for run in 0..RUNS {
            runs.push(newcomer(&url, &format!("tn-f{k}-{run}"), k).await?);
        }
        fair.push((k, runs));
    }

    let conc = CONCURRENCY.map(|c| c.to_string()).join(",");
    let peer = peers.bullmq(
        &url,
        &[
            "tenants",
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
            "--fair-concurrency",
            &FAIR_CONCURRENCY.to_string(),
            "--cap",
            &PEER_CAP.as_secs().to_string(),
        ],
    );
    let peer = peer.as_deref().unwrap_or(&[]);

    let single_case = format!("\"case\":\"enqueue_single_c{PRODUCERS}\"");
    let bulk_case = format!("\"case\":\"enqueue_bulk_{BATCH}\"");
    for (label, single, batch, single_cost, batch_cost) in &enqueues {
        row(
            &format!("{label} enqueue single, 50 producers (tasks/s)"),
            median(single),
            field(peer, &[&single_case], "tasks_per_s"),
            "tasks/s",
        );
        row(
            &format!("{label} enqueue batch of 1000 (tasks/s)"),
            median(batch),
            field(peer, &[&bulk_case], "tasks_per_s"),
            "tasks/s",
        );
        println!("   runs: single {single:.0?} batch {batch:.0?}");
        cost::rows(
            &format!("{label} enqueue single"),
            &cost::median(single_cost),
            cost::peer(peer, &[&single_case]),
        );
        cost::rows(
            &format!("{label} enqueue batch"),
            &cost::median(batch_cost),
            cost::peer(peer, &[&bulk_case]),
        );
    }
    for (label, c, n, m, runs, cost) in &drains {
        let needle = format!("\"case\":\"drain\",\"concurrency\":{c},");
        row(
            &format!("{label} drain {n} tasks, concurrency {c} (tasks/s)"),
            *m,
            field(peer, &[&needle], "tasks_per_s"),
            "tasks/s",
        );
        println!("   runs: {runs:.0?}");
        cost::rows(
            &format!("{label} drain c{c}"),
            cost,
            cost::peer(peer, &[&needle]),
        );
    }
    report_fairness(&fair, peer);
    Ok(())
}

async fn enqueue_single(client: &Client, k: Option<usize>) -> Result<f64> {
    let client = Arc::new(client.clone());
    let args = Arc::new(payload());
    let start = Instant::now();
    let mut handles = Vec::new();
    for p in 0..PRODUCERS {
        let (client, args) = (client.clone(), args.clone());
        handles.push(tokio::spawn(async move {
            for i in 0..N / PRODUCERS {
                client
                    .enqueue(&*args, tenant_of(p * (N / PRODUCERS) + i, k))
                    .await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N as f64 / start.elapsed().as_secs_f64())
}

/// Enqueues `n` payload tasks spread over `k` tenants (None: plain), in batches of [`BATCH`].
async fn fill(client: &Client, n: usize, k: Option<usize>) -> Result<()> {
    let args = payload();
    for b in 0..n / BATCH {
        let results = client
            .enqueue_batch((0..BATCH).map(|i| (&args, tenant_of(b * BATCH + i, k))))
            .await?;
        anyhow::ensure!(
            results.iter().all(|r| r.is_ok()),
            "batch enqueue refused a task"
        );
    }
    Ok(())
}

/// Drains `n` tasks spread over `k` tenants (None: plain); tasks/s and the Redis cost from
/// server start to shutdown, as `e2e` measures plain tasks.
async fn drain(
    url: &str,
    ns: &str,
    concurrency: usize,
    n: usize,
    k: Option<usize>,
) -> Result<(f64, Cost)> {
    let client = connect(url, ns).await?;
    let broker = client.broker().clone();
    fill(&client, n, k).await?;
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
    let queue = QueueName::new("default")?;
    let stats = broker.queue_stats(&queue).await?;
    anyhow::ensure!(
        stats.processed == n as u64,
        "only {} of {n} acked",
        stats.processed
    );
    let page = broker.tenants(&queue, 1).await?;
    anyhow::ensure!(
        page.waiting + page.running == 0,
        "tenants still hold {} waiting, {} running",
        page.waiting,
        page.running
    );
    flush(&client).await?;
    Ok((n as f64 / elapsed.as_secs_f64(), cost))
}

/// A task of the fairness runs: the backlog's, or the newcomer's single task.
#[derive(Serialize, Deserialize)]
struct Fair {
    newcomer: bool,
}

impl TaskArgs for Fair {
    const KIND: &'static str = "bench:fair";
}

/// One fairness run's outcome.
struct Newcomer {
    /// Starts between the newcomer's enqueue and its own start (all starts within the cap when
    /// it never ran).
    starts: u64,
    waited_ms: f64,
    ran: bool,
    /// Tenants with tasks waiting when it arrived.
    active: u64,
}

/// A backlog of [`N`] tasks spread over `k` tenants, drained by a server of concurrency
/// [`FAIR_CONCURRENCY`] with no-op handlers; once it runs at a steady rate, one task of a new
/// tenant arrives.
async fn newcomer(url: &str, ns: &str, k: usize) -> Result<Newcomer> {
    let client = connect(url, ns).await?;
    let broker = client.broker().clone();
    let queue = QueueName::new("default")?;
    let backlog = Fair { newcomer: false };
    for b in 0..N / BATCH {
        let r = client
            .enqueue_batch((0..BATCH).map(|i| (&backlog, tenant_of(b * BATCH + i, Some(k)))))
            .await?;
        anyhow::ensure!(r.iter().all(|r| r.is_ok()), "enqueue refused a task");
    }
    let starts = Arc::new(AtomicU64::new(0));
    // (starts counted when the newcomer started, when it started)
    let seen: Arc<Mutex<Option<(u64, Instant)>>> = Arc::new(Mutex::new(None));
    let mut mux = Mux::new();
    let (s, l) = (starts.clone(), seen.clone());
    mux.handle(move |_ctx: Context, t: Task<Fair>| {
        let (s, l) = (s.clone(), l.clone());
        async move {
            let before = s.fetch_add(1, Ordering::SeqCst);
            if t.args.newcomer {
                *l.lock().map_err(|_| TaskError::retry("poisoned"))? =
                    Some((before, Instant::now()));
            }
            Ok(())
        }
    })?;
    let config = ServerConfig::default().concurrency(FAIR_CONCURRENCY);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;
    // A steady rate on the backlog first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let active = broker
        .tenants(&queue, 1_000)
        .await?
        .tenants
        .iter()
        .filter(|t| t.waiting > 0)
        .count() as u64;
    let starts_at = starts.load(Ordering::SeqCst);
    let at = Instant::now();
    client
        .enqueue(
            &Fair { newcomer: true },
            EnqueueOptions::new().tenant("newcomer"),
        )
        .await?;
    let outcome = loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let got = *seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some((before, when)) = got {
            break Newcomer {
                starts: before.saturating_sub(starts_at),
                waited_ms: when.duration_since(at).as_secs_f64() * 1000.0,
                ran: true,
                active,
            };
        }
        if at.elapsed() >= CAP {
            break Newcomer {
                starts: starts.load(Ordering::SeqCst) - starts_at,
                waited_ms: CAP.as_secs_f64() * 1000.0,
                ran: false,
                active,
            };
        }
    };
    server.shutdown().await;
    flush(&client).await?;
    Ok(outcome)
}

fn report_fairness(ours: &[(usize, Vec<Newcomer>)], peer: &[String]) {
    println!(
        "-- fairness: one task of a new tenant behind a backlog of {N} tasks, concurrency \
         {FAIR_CONCURRENCY}, no-op handlers; bound: tenants with work + {FAIR_CONCURRENCY} \
         fetched before it arrived (bullmq: no groups, FIFO behind the backlog, cap {} s)",
        PEER_CAP.as_secs()
    );
    let theirs = match (
        field(peer, &["\"case\":\"newcomer\""], "ran"),
        field(peer, &["\"case\":\"newcomer\""], "starts"),
        field(peer, &["\"case\":\"newcomer\""], "waited_ms"),
    ) {
        (Some(ran), Some(starts), Some(ms)) if ran > 0.0 => {
            format!("ran after {starts:.0} starts / {ms:.0} ms")
        }
        (Some(_), Some(starts), Some(ms)) => {
            format!("not run after {:.0} s / {starts:.0} starts", ms / 1000.0)
        }
        _ => "n/a".to_string(),
    };
    for (k, runs) in ours {
        let who = if *k == 1 {
            "1 tenant".to_string()
        } else {
            format!("{k} tenants")
        };
        for (run, s) in runs.iter().enumerate() {
            let bound = s.active + 1 + FAIR_CONCURRENCY as u64;
            let ours = if s.ran {
                format!(
                    "ran after {} starts / {:.1} ms ({} tenants with work, bound {bound}: {})",
                    s.starts,
                    s.waited_ms,
                    s.active + 1,
                    if s.starts <= bound { "within" } else { "PAST" }
                )
            } else {
                format!(
                    "NOT RUN after {:.0} s / {} starts",
                    s.waited_ms / 1000.0,
                    s.starts
                )
            };
            println!("   backlog of {who}, run {run}: chronos {ours}");
        }
        let starts: Vec<f64> = runs.iter().map(|s| s.starts as f64).collect();
        let ms: Vec<f64> = runs.iter().map(|s| s.waited_ms).collect();
        println!(
            "newcomer behind {N} tasks of {who}: chronos {:.0} starts / {:.1} ms (median of {}), \
             bullmq {theirs}",
            median(&starts),
            median(&ms),
            runs.len()
        );
    }
}
