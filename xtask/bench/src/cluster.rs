//! `cluster` mode: the hot path on the testkit's 3-primary Redis Cluster, with queues spread
//! so that every primary owns some. Two cores cannot show throughput scaling, so the proof that
//! it would scale is per shard: each primary's Redis CPU and commands per task of the queues it
//! owns, no redirect or cross-slot error, and no command on a shard for tasks of queues it does
//! not own.
//!
//! Phases, each snapshotted (INFO cpu, commandstats, errorstats) on every primary:
//! * enqueue: batches of 1000 spread over every queue;
//! * drain: one server serving every queue;
//! * isolation: per shard, tasks of its queues only, run by a server serving only those
//!   queues; whatever the other primaries serve meanwhile is not per-task work of theirs.
//!
//! The same enqueue and drain on a standalone Redis give the single-node figure beside it.

use std::collections::HashMap;
use std::time::Duration;

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
const PER_QUEUE: usize = 20_000;
/// Tasks per queue in each shard's isolation run.
const ISOLATED_PER_QUEUE: usize = 5_000;
const BATCH: usize = 1000;
const CONCURRENCY: usize = 64;
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
        "== cluster: {PRIMARIES} primaries, {QUEUES_PER_SHARD} queues each, {PER_QUEUE} tasks per \
         queue (100-byte payload, batches of {BATCH}), one server (concurrency {CONCURRENCY}) \
         serving all {} queues",
        queues.len()
    );
    let broker = RedisBroker::builder(cluster.url())
        .namespace("bench-cl")
        .connect()
        .await?;
    let admins: Vec<&Fred> = shards.iter().map(|s| &s.admin).collect();
    probe(&shards).await?;
    let (enq, drain) = workload(&broker, &admins, &queues, PER_QUEUE).await?;

    let mut bad = Vec::new();
    let (mut enq_cpu, mut drain_cpu) = (0.0, 0.0);
    for (i, shard) in shards.iter().enumerate() {
        let tasks = PER_QUEUE * shard.queues.len();
        println!(
            "shard 127.0.0.1:{} owns {} ({tasks} tasks)",
            shard.port,
            shard.queues.join(", ")
        );
        for (name, phase) in [("enqueue", &enq), ("drain", &drain)] {
            let c = phase.cost(i, tasks);
            println!(
                "   {name:<8} redis cpu per task {:>7.2} us, calls per task {:>5.2}   top: {}",
                c.cpu_us,
                c.calls,
                cost::top(&c)
            );
            let r = phase.redirects(i);
            println!(
                "   {name:<8} errors: {}",
                r.iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            bad.extend(
                r.into_iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| format!("{k} {n} on :{} in {name}", shard.port)),
            );
        }
        enq_cpu += enq.cost(i, total).cpu_us;
        drain_cpu += drain.cost(i, total).cpu_us;
    }
    println!(
        "cluster, all shards: enqueue redis cpu per task {enq_cpu:.2} us, drain {drain_cpu:.2} us"
    );

    // Isolation: only one shard's queues hold tasks and are served; the other primaries should
    // see nothing that grows with those tasks.
    println!(
        "isolation: per shard, {ISOLATED_PER_QUEUE} tasks per queue of its queues only, a server \
         serving only those; calls the other shards served"
    );
    for (i, shard) in shards.iter().enumerate() {
        let tasks = ISOLATED_PER_QUEUE * shard.queues.len();
        let (e, d) = workload(&broker, &admins, &shard.queues, ISOLATED_PER_QUEUE).await?;
        for (name, phase) in [("enqueue", &e), ("drain", &d)] {
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
    let (e, d) = workload(&broker, &[&admin], &queues, PER_QUEUE).await?;
    for (name, phase) in [("enqueue", &e), ("drain", &d)] {
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

/// Enqueues `per_queue` tasks to each of `queues` (batches mixing every queue), then drains them
/// with one server serving exactly those queues; returns the snapshots around both phases.
async fn workload(
    broker: &RedisBroker,
    nodes: &[&Fred],
    queues: &[String],
    per_queue: usize,
) -> Result<(Phase, Phase)> {
    let client = chronos::Client::new(broker.clone());
    let total = per_queue * queues.len();
    let args = payload();
    let opts: Vec<EnqueueOptions> = queues
        .iter()
        .map(|q| EnqueueOptions::new().queue(q.clone()))
        .collect();
    let before = snap_all(nodes).await?;
    for start in (0..total).step_by(BATCH) {
        let end = (start + BATCH).min(total);
        let results = client
            .enqueue_batch((start..end).map(|i| (&args, opts[i % opts.len()].clone())))
            .await?;
        anyhow::ensure!(results.iter().all(|r| r.is_ok()), "enqueue refused a task");
    }
    let enqueue = Phase {
        before,
        after: snap_all(nodes).await?,
    };

    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?;
    let config = ServerConfig::default()
        .concurrency(CONCURRENCY)
        .queues(queues.iter().map(|q| (q.clone(), 1)));
    let before = snap_all(nodes).await?;
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
    server.shutdown().await;
    let drain = Phase {
        before,
        after: snap_all(nodes).await?,
    };
    Ok((enqueue, drain))
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
