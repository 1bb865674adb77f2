//! `cluster` mode: the hot path on the testkit's 3-primary Redis Cluster, first with the queues
//! of one primary, then of two, then of all three, each shard in use carrying the same load
//! (the same queues, tasks per queue and worker slots). Two cores run all three primaries, the
//! bench and the worker, so throughput cannot grow with the shards here; what shows that it
//! would is per shard: each primary's Redis CPU and commands per task of the queues it owns
//! stay put as shards are added, no redirect or cross-slot error, and no command on a shard
//! for tasks of queues it does not own. From those costs a model says where one primary's
//! thread saturates and how many shards and worker cores a rate needs.
//!
//! Phases, each snapshotted (INFO cpu, commandstats, errorstats) on every primary:
//! * enqueue: batches of 1000 spread over every queue in use;
//! * drain: one server serving every queue in use;
//! * isolation: per shard, tasks of its queues only, run by a server serving only those
//!   queues; whatever the other primaries serve meanwhile is not per-task work of theirs.
//!
//! The same enqueue and drain of all the queues on a standalone Redis give the single-node
//! figure beside it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use chronos::fred::clients::Client as Fred;
use chronos::fred::prelude::{Builder, ClientLike, Config};
use chronos::fred::types::CustomCommand;
use chronos::prelude::*;
use chronos_testkit::{RedisCluster, RedisServer};

use crate::cost::{self, Cost, Snap};
use crate::fixture::{payload, Payload};

const PRIMARIES: usize = 3;
const QUEUES_PER_SHARD: usize = 2;
const PER_QUEUE: usize = 40_000;
/// Tasks per queue in each shard's isolation run.
const ISOLATED_PER_QUEUE: usize = 5_000;
const BATCH: usize = 1000;
/// Worker slots per shard in use, so every run puts the same load on each shard it uses.
const CONCURRENCY_PER_SHARD: usize = 32;
/// Rates the model sizes a deployment for, in tasks/s.
const TARGETS: [f64; 3] = [100_000.0, 500_000.0, 1_000_000.0];
/// The busiest a primary should run in the model: room for bursts and for latency, which grows
/// fast as a single thread nears saturation.
const BUSY_TARGET: f64 = 0.7;
/// Errors that would mean a command crossed slots or went to the wrong shard.
const REDIRECTS: [&str; 3] = ["CROSSSLOT", "MOVED", "ASK"];

/// One primary: its port, a direct connection for INFO, and the queues whose slot it serves.
struct Shard {
    port: u16,
    admin: Fred,
    queues: Vec<String>,
}

/// Counters of one node at one moment.
struct NodeSnap {
    cost: Snap,
    errors: HashMap<String, u64>,
}

/// Snapshots of every node before and after one phase.
struct Phase {
    before: Vec<NodeSnap>,
    after: Vec<NodeSnap>,
}

impl Phase {
    /// Node `i`'s cost per task over `tasks`.
    fn cost(&self, i: usize, tasks: usize) -> Cost {
        cost::delta(
            &self.before[i].cost,
            &self.after[i].cost,
            tasks.max(1) as f64,
        )
    }

    /// Node `i`'s new errors of each redirect kind.
    fn redirects(&self, i: usize) -> Vec<(&'static str, u64)> {
        REDIRECTS
            .iter()
            .map(|&kind| {
                let n = |s: &NodeSnap| s.errors.get(kind).copied().unwrap_or(0);
                (kind, n(&self.after[i]).saturating_sub(n(&self.before[i])))
            })
            .collect()
    }
}

/// Runs the mode and prints its report; fails when any primary counted a redirect or
/// cross-slot error during a phase.
pub(crate) async fn run() -> Result<()> {
    let cluster = RedisCluster::start().context("redis cluster for the bench")?;
    let shards = shards(&cluster).await?;
    let queues: Vec<String> = shards.iter().flat_map(|s| s.queues.clone()).collect();
    let total = PER_QUEUE * queues.len();
    println!(
        "== cluster: {PRIMARIES} primaries; runs with the queues of 1, 2 and 3 of them, each \
         owning {QUEUES_PER_SHARD} queues of {PER_QUEUE} tasks (100-byte payload, batches of \
         {BATCH}), drained by one server of concurrency {CONCURRENCY_PER_SHARD} per shard in use"
    );
    println!(
        "   busy = the primary's CPU over the phase's wall time; 2 cores run every primary, the \
         bench and the worker, so rates cannot grow with shards here: the per-shard costs can"
    );
    let broker = RedisBroker::builder(cluster.url())
        .namespace("bench-cl")
        .connect()
        .await?;
    let admins: Vec<&Fred> = shards.iter().map(|s| &s.admin).collect();
    probe(&shards).await?;

    let mut bad = Vec::new();
    // Per owning shard and run: Redis CPU per task at enqueue and at drain; per run: the
    // worker's CPU per task.
    let (mut enq_us, mut drain_us, mut worker_us) = (Vec::new(), Vec::new(), Vec::new());
    for k in 1..=PRIMARIES {
        let used: Vec<String> = shards[..k].iter().flat_map(|s| s.queues.clone()).collect();
        let tasks = PER_QUEUE * used.len();
        let run = workload(
            &broker,
            &admins,
            &used,
            PER_QUEUE,
            CONCURRENCY_PER_SHARD * k,
        )
        .await?;
        worker_us.push(run.worker_cpu_us / tasks as f64);
        println!(
            "-- {k} shard{}: {tasks} tasks; enqueue {:>7.0} tasks/s, drain {:>7.0} tasks/s, worker \
             cpu per task {:.1} us",
            if k == 1 { "" } else { "s" },
            tasks as f64 / run.enqueue_secs,
            tasks as f64 / run.drain_secs,
            run.worker_cpu_us / tasks as f64,
        );
        for (i, shard) in shards.iter().enumerate() {
            let owns = i < k;
            let own_tasks = PER_QUEUE * shard.queues.len();
            for (name, phase, secs) in [
                ("enqueue", &run.enqueue, run.enqueue_secs),
                ("drain", &run.drain, run.drain_secs),
            ] {
                let busy = 100.0 * phase.cost(i, 1).cpu_us / (secs * 1e6);
                if owns {
                    let c = phase.cost(i, own_tasks);
                    println!(
                        "   :{} {name:<8} redis cpu per task {:>6.2} us, calls per task {:>5.2}, \
                         busy {busy:>3.0} %   top: {}",
                        shard.port,
                        c.cpu_us,
                        c.calls,
                        cost::top(&c)
                    );
                    if name == "enqueue" {
                        enq_us.push(c.cpu_us);
                    } else {
                        drain_us.push(c.cpu_us);
                    }
                } else {
                    println!(
                        "   :{} {name:<8} owns none of these queues: {:.0} calls, busy {busy:>3.0} %",
                        shard.port,
                        // An empty sum is -0.0, which would print as "-0".
                        phase.cost(i, 1).calls + 0.0
                    );
                }
                bad.extend(
                    phase
                        .redirects(i)
                        .into_iter()
                        .filter(|(_, n)| *n > 0)
                        .map(|(kind, n)| format!("{kind} {n} on :{} in {name}", shard.port)),
                );
            }
        }
    }
    model(&enq_us, &drain_us, &worker_us);

    // Isolation: only one shard's queues hold tasks and are served; the other primaries should
    // see nothing that grows with those tasks.
    println!(
        "isolation: per shard, {ISOLATED_PER_QUEUE} tasks per queue of its queues only, a server \
         serving only those; calls the other shards served"
    );
    for (i, shard) in shards.iter().enumerate() {
        let tasks = ISOLATED_PER_QUEUE * shard.queues.len();
        let run = workload(
            &broker,
            &admins,
            &shard.queues,
            ISOLATED_PER_QUEUE,
            CONCURRENCY_PER_SHARD,
        )
        .await?;
        for (name, phase) in [("enqueue", &run.enqueue), ("drain", &run.drain)] {
            let own = phase.cost(i, tasks);
            let mut others = 0.0;
            let mut mix = Vec::new();
            for j in (0..shards.len()).filter(|&j| j != i) {
                let c = phase.cost(j, 1);
                others += c.calls;
                if c.calls > 0.0 {
                    mix.push(format!(":{} {}", shards[j].port, cost::top(&c)));
                }
                bad.extend(
                    phase
                        .redirects(j)
                        .into_iter()
                        .filter(|(_, n)| *n > 0)
                        .map(|(k, n)| format!("{k} {n} on :{} (isolation)", shards[j].port)),
                );
            }
            println!(
                "   :{} {name:<8} own calls per task {:>5.2}; other shards: {others:.0} calls \
                 ({:.4} per task){}",
                shard.port,
                own.calls,
                others / tasks as f64,
                if mix.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", mix.join("; "))
                }
            );
        }
    }

    // The same work on one standalone Redis, for comparison.
    let single = RedisServer::start().context("redis for the single-node comparison")?;
    let broker = RedisBroker::builder(single.url())
        .namespace("bench-cl")
        .connect()
        .await?;
    let admin = broker.client().clone();
    let run = workload(
        &broker,
        &[&admin],
        &queues,
        PER_QUEUE,
        CONCURRENCY_PER_SHARD * PRIMARIES,
    )
    .await?;
    for (name, phase) in [("enqueue", &run.enqueue), ("drain", &run.drain)] {
        let c = phase.cost(0, total);
        println!(
            "single node, same {total} tasks: {name:<8} redis cpu per task {:>7.2} us, calls per \
             task {:>5.2}   top: {}",
            c.cpu_us,
            c.calls,
            cost::top(&c)
        );
    }

    if !bad.is_empty() {
        bail!(
            "commands crossed slots or shards on the hot path: {}",
            bad.join("; ")
        );
    }
    Ok(())
}

/// The primaries with their queues: names `cq0`, `cq1`, ... assigned to the primary serving
/// their hash tag's slot, until each has [`QUEUES_PER_SHARD`].
async fn shards(cluster: &RedisCluster) -> Result<Vec<Shard>> {
    let ports = cluster.ports();
    anyhow::ensure!(
        ports.len() == PRIMARIES,
        "expected {PRIMARIES} primaries, got {ports:?}"
    );
    let mut owned: HashMap<u16, Vec<String>> = HashMap::new();
    for i in 0.. {
        if ports
            .iter()
            .all(|p| owned.get(p).map_or(0, Vec::len) == QUEUES_PER_SHARD)
        {
            break;
        }
        anyhow::ensure!(
            i < 1000,
            "no spread of queue names over the primaries found"
        );
        let name = format!("cq{i}");
        // Every key of a queue carries the tag `{<queue>}` (the broker's key layout).
        let port = cluster.primary_for(&format!("{{{name}}}"))?;
        let mine = owned.entry(port).or_default();
        if mine.len() < QUEUES_PER_SHARD {
            mine.push(name);
        }
    }
    let mut shards = Vec::new();
    for &port in ports {
        let config = Config::from_url(&format!("redis://127.0.0.1:{port}"))?;
        let admin = Builder::from_config(config).build()?;
        admin.init().await?;
        shards.push(Shard {
            port,
            admin,
            queues: owned.remove(&port).unwrap_or_default(),
        });
    }
    Ok(shards)
}

/// One enqueue-then-drain run: the snapshots around both phases, their wall times, and this
/// process's CPU while it drained (the worker's: the bench only waits meanwhile).
struct Run {
    enqueue: Phase,
    drain: Phase,
    enqueue_secs: f64,
    drain_secs: f64,
    worker_cpu_us: f64,
}

/// The scale-out model from the measured costs: where one primary's thread saturates, and the
/// shards and worker cores a rate needs. Every task costs its primary once at enqueue and once
/// at drain, so a steady rate (enqueued as fast as drained) costs the sum per task.
fn model(enq_us: &[f64], drain_us: &[f64], worker_us: &[f64]) {
    use crate::report::median;
    let (e, d, w) = (median(enq_us), median(drain_us), median(worker_us));
    let per_task = e + d;
    let saturates = 1e6 / per_task;
    println!(
        "model (medians over the runs' shards): redis cpu per task {e:.2} us enqueue + {d:.2} us \
         drain = {per_task:.2} us; worker cpu per task {w:.1} us"
    );
    println!(
        "   one primary's thread saturates at {saturates:>9.0} tasks/s enqueued and drained \
         ({:.0} enqueue only, {:.0} drain only)",
        1e6 / e,
        1e6 / d
    );
    for rate in TARGETS {
        println!(
            "   {rate:>9.0} tasks/s: {:>3} shards at {:.0} % busy ({} at saturation), {:>5.1} \
             worker cores",
            (rate / (saturates * BUSY_TARGET)).ceil(),
            BUSY_TARGET * 100.0,
            (rate / saturates).ceil(),
            rate * w / 1e6
        );
    }
    println!(
        "   (costs measured at this run's load: a busier shard batches more per fetch and costs \
         less per task, so these counts err high)"
    );
}

/// Enqueues `per_queue` tasks to each of `queues` (batches mixing every queue), then drains them
/// with one server serving exactly those queues.
async fn workload(
    broker: &RedisBroker,
    nodes: &[&Fred],
    queues: &[String],
    per_queue: usize,
    concurrency: usize,
) -> Result<Run> {
    let client = chronos::Client::new(broker.clone());
    let total = per_queue * queues.len();
    let args = payload();
    let opts: Vec<EnqueueOptions> = queues
        .iter()
        .map(|q| EnqueueOptions::new().queue(q.clone()))
        .collect();
    let before = snap_all(nodes).await?;
    let t0 = Instant::now();
    for start in (0..total).step_by(BATCH) {
        let end = (start + BATCH).min(total);
        let results = client
            .enqueue_batch((start..end).map(|i| (&args, opts[i % opts.len()].clone())))
            .await?;
        anyhow::ensure!(results.iter().all(|r| r.is_ok()), "enqueue refused a task");
    }
    let enqueue_secs = t0.elapsed().as_secs_f64();
    let enqueue = Phase {
        before,
        after: snap_all(nodes).await?,
    };

    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?;
    let config = ServerConfig::default()
        .concurrency(concurrency)
        .queues(queues.iter().map(|q| (q.clone(), 1)));
    let before = snap_all(nodes).await?;
    let (t0, cpu0) = (Instant::now(), crate::cpu::process_us()?);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while server.stats().succeeded < total as u64 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "drain stalled: {:?} of {total}",
            server.stats()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (drain_secs, worker_cpu_us) =
        (t0.elapsed().as_secs_f64(), crate::cpu::process_us()? - cpu0);
    server.shutdown().await;
    let drain = Phase {
        before,
        after: snap_all(nodes).await?,
    };
    Ok(Run {
        enqueue,
        drain,
        enqueue_secs,
        drain_secs,
        worker_cpu_us,
    })
}

/// Sends one key of the second shard's slots to the first shard and checks that its errorstats
/// count the MOVED: a zero below then means no redirect, not a counter that does not exist.
async fn probe(shards: &[Shard]) -> Result<()> {
    let (first, second) = (&shards[0], &shards[1]);
    let key = format!("{{{}}}", second.queues[0]);
    let before = snap_all(&[&first.admin]).await?;
    let reply: Result<i64, _> = first
        .admin
        .custom(
            CustomCommand::new_static("EXISTS", None::<u16>, false),
            vec![key],
        )
        .await;
    anyhow::ensure!(
        reply.is_err(),
        "a key of another shard was served: {reply:?}"
    );
    let after = snap_all(&[&first.admin]).await?;
    let phase = Phase { before, after };
    let moved = phase
        .redirects(0)
        .iter()
        .find(|(k, _)| *k == "MOVED")
        .map(|p| p.1);
    anyhow::ensure!(
        moved == Some(1),
        "INFO errorstats did not count a provoked MOVED ({moved:?}); redirect counts would mean nothing"
    );
    Ok(())
}

async fn snap_all(nodes: &[&Fred]) -> Result<Vec<NodeSnap>> {
    let mut out = Vec::new();
    for node in nodes {
        let info: String = node
            .custom(
                CustomCommand::new_static("INFO", None::<u16>, false),
                vec!["cpu", "commandstats", "errorstats"],
            )
            .await?;
        out.push(NodeSnap {
            cost: cost::parse(&info, &info)?,
            errors: errors(&info),
        });
    }
    Ok(out)
}

/// `errorstat_MOVED:count=3` lines as (prefix, count).
fn errors(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|l| l.trim().strip_prefix("errorstat_"))
        .filter_map(|l| {
            let (kind, rest) = l.split_once(':')?;
            let n = rest
                .strip_prefix("count=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((kind.to_string(), n))
        })
        .collect()
}
