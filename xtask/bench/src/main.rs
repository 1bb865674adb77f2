//! Benchmarks of chronos-rs, with peers measured in the same run. Run through
//! `cargo xtask bench [enqueue|e2e|priority|tenants|outcomes|scheduler|inspect|idle|cluster|ingest|all]`; never from a
//! timed test.
//!
//! * `enqueue`: enqueue rates (single, batch), Redis bytes per pending task, per retained
//!   completed task and per archived (dead-lettered) task.
//! * `e2e`: drain rates at several concurrencies, enqueue-to-start latency.
//! * `priority`: enqueue and drain of tasks spread over priority levels 0..9 beside BullMQ's
//!   `priority` option (rates, Redis CPU and calls per task), and the starvation bound: how many
//!   starts and milliseconds one level-9 task waits behind an endless flow of level-0 tasks with
//!   the queue's aging bound at 2 s (BullMQ, which has no aging: whether its low job ran at all).
//! * `tenants`: enqueue and drain of tasks spread over 100 tenants, beside plain tasks and
//!   BullMQ's plain jobs (it has no groups): rates, Redis CPU and calls per task; and the
//!   fairness bound: starts of a 100k backlog (of one tenant, of 100) before a new tenant's
//!   single task starts.
//! * `outcomes`: the Redis cost of a task snoozed once and of deduplicated enqueues (debounce,
//!   replace, rejected duplicate) beside the plain task and the plain enqueue.
//! * `scheduler`: one leader with 10 000 and 100 000 one-second schedules and no worker, over
//!   a 5 s window after start-up (at 10k after 20 s of firing, once every fire history is
//!   full): trigger lateness p50/p99/max (Redis' time when the fire call wrote the task minus
//!   the trigger time), the leader process's own CPU per trigger, Redis CPU, commands and time
//!   by command per trigger, and the model that follows (how many triggers per second one
//!   primary takes within 250 ms and at saturation); then leader failover times of real
//!   processes. `BENCH_SCALE=<n>` runs one of the scales only, `BENCH_SKIP_FAILOVER=1` leaves
//!   out the failovers, `RUST_LOG=warn` shows the scheduler's warnings (for profiling).
//! * `inspect`: inspector pages and bulk archive on a queue of a million tasks, console pages.
//! * `idle`: Redis calls per second of one idle worker server on 1, 10 and 100 queues.
//! * `cluster`: enqueue and drain on a 3-primary Redis Cluster with the queues of 1, 2 and 3
//!   primaries (the same load per shard in use): throughput, and per shard Redis CPU and calls
//!   per task and how busy its thread was; then a model from those costs (the rate where one
//!   primary saturates, the shards and worker cores 100k, 500k and 1M tasks/s need); redirect
//!   and cross-slot errors (the mode fails if any), calls a shard serves for other shards'
//!   queues (should be none), and the same work on one standalone Redis.
//! * `ingest`: enqueues through the HTTP ingest beside the `Client` it wraps, in the same run:
//!   single tasks over 50 keep-alive connections and batches of 100 (tasks/s, and the ratio).
//!
//! `enqueue`, `e2e` and `priority` also print the Redis cost per task, for us and BullMQ: server
//! CPU (INFO cpu, user + sys) and commands (INFO commandstats, where a script counts as its
//! EVALSHA plus every command it runs), snapshotted around each phase alone. Rates on shared
//! machines swing by 20-40 %; these figures barely move.
//!
//! `CHRONOS_BENCH_CONCURRENCY=1,16` runs only those drain rows of `e2e` (and no latency run),
//! for a quick look at one row while working on it.
//!
//! Each figure is the median of several runs against a fresh throwaway Redis (or
//! `CHRONOS_REDIS_URL`), and each peer figure comes from the same Redis build on the same machine.

mod cluster;
mod cost;
mod cpu;
mod e2e;
mod enqueue;
mod fixture;
mod idle;
mod ingest;
mod inspect;
mod memory;
mod outcomes;
mod peers;
mod priority;
mod report;
mod scheduler;
mod tenants;

use anyhow::{bail, Result};

#[tokio::main]
async fn main() -> Result<()> {
    // Off unless asked: the figures are the output, and a warning is a lead when one looks off.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, url, ns] = args.as_slice() {
        if mode == "__scheduler" {
            return scheduler::child(url, ns).await;
        }
    }
    let Some((peers_dir, modes)) = args.split_first() else {
        bail!(
            "usage: chronos-bench <peers dir> \
             [enqueue|e2e|priority|tenants|outcomes|scheduler|inspect|idle|cluster|ingest|all]"
        );
    };
    let peers = peers::Peers::new(peers_dir);
    let all = modes.iter().any(|m| m == "all");
    let mut ran = false;
    if all || modes.iter().any(|m| m == "enqueue") {
        enqueue::run(&peers).await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "e2e") {
        e2e::run(&peers).await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "priority") {
        priority::run(&peers).await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "tenants") {
        tenants::run(&peers).await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "scheduler") {
        scheduler::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "outcomes") {
        outcomes::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "inspect") {
        inspect::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "idle") {
        idle::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "cluster") {
        cluster::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "ingest") {
        ingest::run().await?;
        ran = true;
    }
    if !ran {
        bail!(
            "unknown bench mode {modes:?}: expected enqueue, e2e, priority, tenants, outcomes, \
             scheduler, inspect, idle, cluster, ingest or all"
        );
    }
    Ok(())
}
