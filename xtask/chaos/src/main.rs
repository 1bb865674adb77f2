//! Process-level fault scenarios of chronos-rs: real worker and scheduler processes against a
//! real `redis-server` on loopback, faults injected on a schedule, then the books checked (every
//! task completed, duplicates bounded by what was in flight at each fault, nothing left behind,
//! every trigger second enqueued exactly once). Run through `cargo xtask chaos [scenario...]
//! [--short]`; prints one table row per scenario and exits non-zero when a promise is broken.
//!
//! The last two scenarios run on replicated deployments (a Redis Cluster with replicas, a
//! Sentinel group) and fail the primary over: there an enqueue acknowledged while replication
//! was cut may be lost, and the books count it apart rather than as a broken promise. Their
//! servers stay up until this process exits.
//!
//! The worker and scheduler processes are this binary re-invoked in a hidden mode (`__worker`,
//! `__scheduler`), so a run needs nothing but this binary, `redis-server` and (for the failover
//! scenarios) `redis-cli` on PATH.

mod books;
mod clock_skew;
mod cluster_failover;
mod failover;
mod network_stall;
mod procs;
mod redis_restart;
mod report;
mod scheduler_storm;
mod sentinel_failover;
mod tenant_storm;
mod worker_storm;

use anyhow::{bail, Result};

/// The scenarios, in the order they run.
const SCENARIOS: [&str; 9] = [
    "worker-storm",
    "priority-storm",
    "tenant-storm",
    "scheduler-storm",
    "redis-restart",
    "network-stall",
    "clock-skew",
    "cluster-failover",
    "sentinel-failover",
];

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__worker") => return procs::worker_main(&args[1..]).await,
        Some("__scheduler") => return procs::scheduler_main(&args[1..]).await,
        _ => {}
    }
    let short = args.iter().any(|a| a == "--short");
    let mut chosen: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    for c in &chosen {
        if !SCENARIOS.contains(c) {
            bail!("unknown scenario {c:?}: expected one of {SCENARIOS:?}");
        }
    }
    if chosen.is_empty() {
        chosen = SCENARIOS.to_vec();
    }
    let mut rows = Vec::new();
    for name in SCENARIOS.iter().filter(|s| chosen.contains(s)) {
        eprintln!("== chaos {name}{}", if short { " (short)" } else { "" });
        let started = std::time::Instant::now();
        let scenario = async {
            match *name {
                "worker-storm" => worker_storm::run(short, false).await,
                "priority-storm" => worker_storm::run(short, true).await,
                "tenant-storm" => tenant_storm::run(short).await,
                "scheduler-storm" => scheduler_storm::run(short).await,
                "redis-restart" => redis_restart::run(short).await,
                "network-stall" => network_stall::run(short).await,
                "cluster-failover" => cluster_failover::run(short).await,
                "sentinel-failover" => sentinel_failover::run(short).await,
                _ => clock_skew::run(short).await,
            }
        };
        let result = tokio::select! {
            r = scenario => Some(r),
            _ = interrupted() => None,
        };
        // By now an interrupted scenario has been dropped, and with it its processes and its
        // Redis (which sits in a process group of its own, out of reach of the terminal's
        // Ctrl-C).
        let Some(result) = result else {
            eprintln!("chaos: interrupted");
            std::process::exit(130);
        };
        let mut done = match result {
            Ok(r) => r,
            // A scenario that could not run at all is a broken promise too, with its reason.
            Err(e) => vec![report::Row::failed(name, format!("{e:#}"))],
        };
        for r in &done {
            let verdict = if r.broken.is_empty() { "ok" } else { "BROKEN" };
            eprintln!("== {}: {verdict} ({:.0?})", r.scenario, started.elapsed());
        }
        rows.append(&mut done);
    }
    report::print(&rows);
    if rows.iter().any(|r| !r.broken.is_empty()) {
        eprintln!("chaos: a promise was broken (see the table)");
        std::process::exit(1);
    }
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
