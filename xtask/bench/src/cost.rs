//! Redis cost of a measured phase: server CPU (INFO cpu) and commands (INFO commandstats),
//! snapshotted before and after on a Redis that only that phase uses. Unlike rates, these barely
//! move with the load of a shared machine.
//!
//! Commands are counted as commandstats counts them: a script call is one EVALSHA (or FCALL)
//! plus one entry per command the script runs inside, so "calls" is EVALSHA + inner calls. The
//! snapshots' own INFO calls are left out.

use std::collections::HashMap;

use anyhow::{Context, Result};
use chronos::fred::clients::Client;
use chronos::fred::prelude::*;
use chronos::fred::types::InfoKind;

/// Server CPU and per-command call counters at one moment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snap {
    cpu_us: f64,
    calls: HashMap<String, u64>,
    /// Microseconds each command spent, as commandstats' `usec` counts them (a script's own
    /// entry includes the commands it runs, which also count under their names).
    usec: HashMap<String, u64>,
}

/// What one phase cost Redis, per task.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cost {
    /// Redis CPU (user + sys) microseconds per task.
    pub(crate) cpu_us: f64,
    /// Commands per task (EVALSHA and the commands inside scripts both count).
    pub(crate) calls: f64,
    /// The five commands with most calls, as (name, calls per task).
    pub(crate) top: Vec<(String, f64)>,
    /// The five commands that took Redis longest, as (name, microseconds per task).
    pub(crate) slowest: Vec<(String, f64)>,
}

pub(crate) async fn snap(client: &Client) -> Result<Snap> {
    let stats: String = client.info(Some(InfoKind::CommandStats)).await?;
    let cpu: String = client.info(Some(InfoKind::Cpu)).await?;
    parse(&stats, &cpu)
}

/// Parses `INFO commandstats` and `INFO cpu` text (also used for the peer's raw INFO text).
pub(crate) fn parse(stats: &str, cpu: &str) -> Result<Snap> {
    let secs = |name: &str| {
        cpu.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .with_context(|| format!("{name} missing from INFO cpu"))
    };
    let cpu_us = (secs("used_cpu_user:")? + secs("used_cpu_sys:")?) * 1e6;
    let mut calls = HashMap::new();
    let mut usec = HashMap::new();
    for line in stats.lines() {
        // cmdstat_evalsha:calls=12,usec=...
        let Some((name, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Some(name) = name.strip_prefix("cmdstat_") else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let field = |f: &str| -> u64 {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(f))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        calls.insert(name.to_string(), field("calls="));
        usec.insert(name.to_string(), field("usec="));
    }
    Ok(Snap {
        cpu_us,
        calls,
        usec,
    })
}

/// The cost between two snapshots, divided over `tasks`.
pub(crate) fn delta(before: &Snap, after: &Snap, tasks: f64) -> Cost {
    let mut per: Vec<(String, f64)> = after
        .calls
        .iter()
        .map(|(name, n)| {
            let was = before.calls.get(name).copied().unwrap_or(0);
            (name.clone(), n.saturating_sub(was) as f64 / tasks)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    // By calls as printed (two decimals), then by name: a script's first call may go out as EVAL
    // (NOSCRIPT), and 0.9995 EVALSHA should not sort below the 1.00 of its inner commands.
    let shown = |x: f64| (x * 100.0).round() as i64;
    per.sort_by(|a, b| shown(b.1).cmp(&shown(a.1)).then_with(|| a.0.cmp(&b.0)));
    let mut slowest: Vec<(String, f64)> = after
        .usec
        .iter()
        .map(|(name, us)| {
            let was = before.usec.get(name).copied().unwrap_or(0);
            (name.clone(), us.saturating_sub(was) as f64 / tasks)
        })
        .filter(|(_, us)| *us > 0.0)
        .collect();
    slowest.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Cost {
        cpu_us: (after.cpu_us - before.cpu_us) / tasks,
        calls: per.iter().map(|(_, n)| n).sum(),
        top: per.into_iter().take(5).collect(),
        slowest: slowest.into_iter().take(5).collect(),
    }
}

/// The run with the median CPU per task (so its command mix is a real run's, not a blend).
pub(crate) fn median(runs: &[Cost]) -> Cost {
    let mut v = runs.to_vec();
    v.sort_by(|a, b| a.cpu_us.total_cmp(&b.cpu_us));
    v.get(v.len() / 2).cloned().unwrap_or_default()
}

/// The top commands as `evalsha 1.00, xadd 1.00, ...`.
pub(crate) fn top(cost: &Cost) -> String {
    cost.top
        .iter()
        .map(|(name, n)| format!("{name} {n:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The commands that took longest as `evalsha 20.1 us, hset 3.2 us, ...`.
pub(crate) fn slowest(cost: &Cost) -> String {
    cost.slowest
        .iter()
        .map(|(name, us)| format!("{name} {us:.1} us"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Two report rows (CPU and calls per task) plus the command mix of both sides.
pub(crate) fn rows(label: &str, ours: &Cost, peer: Option<(f64, f64, String)>) {
    use crate::report::row;
    row(
        &format!("{label}: redis cpu per task (us)"),
        ours.cpu_us,
        peer.as_ref().map(|p| p.0),
        "us",
    );
    row_calls(
        &format!("{label}: redis calls per task"),
        ours.calls,
        peer.as_ref().map(|p| p.1),
    );
    println!("   chronos top: {}", top(ours));
    if let Some((_, _, t)) = &peer {
        println!("   bullmq top:  {t}");
    }
}

/// Calls per task need two decimals (one row of `report::row` shows one).
fn row_calls(label: &str, ours: f64, peer: Option<f64>) {
    match peer {
        Some(p) if p > 0.0 => println!(
            "{label:<44} {ours:>12.2} {:<8} bullmq {p:>12.2} {:<8} ratio {:>6.2}x",
            "calls",
            "calls",
            ours / p
        ),
        _ => println!(
            "{label:<44} {ours:>12.2} {:<8} bullmq {:>12} ",
            "calls", "n/a"
        ),
    }
}

/// The peer's cost fields of the first JSON line with every needle: CPU us, calls, top commands.
pub(crate) fn peer(lines: &[String], needles: &[&str]) -> Option<(f64, f64, String)> {
    use crate::peers::{field, text};
    Some((
        field(lines, needles, "redis_cpu_us_per_task")?,
        field(lines, needles, "redis_calls_per_task")?,
        text(lines, needles, "redis_top").unwrap_or_default(),
    ))
}
