//! `cargo xtask <task>`: project automation for chronos-rs, one module per task.
//!
//! * `test`: the whole test suite (what CI runs after fmt and clippy).
//! * `demo`: the whole system against a throwaway Redis (or `CHRONOS_REDIS_URL`).
//! * `bench [enqueue|e2e|priority|tenants|outcomes|scheduler|inspect|idle|cluster|ingest]`: release-mode benchmarks, with peers measured in the same run.
//! * `chaos [worker-storm|priority-storm|tenant-storm|scheduler-storm|redis-restart|network-stall|clock-skew|cluster-failover|sentinel-failover] [--short]`:
//!   real processes against real Redis with faults injected on a schedule; the books checked.
//! * `torture [--short] [--seed S | --seeds A,B,C | --count N] [--minutes M]`: a workload mixing
//!   every feature, operators and faults drawn from a seed, every task checked against a model;
//!   each violation printed with the seed that replays it.
//! * `screenshots [warm-up seconds]`: the console's pictures (README, console guide), from a demo run.
//! * `redis up|down`: a local Redis on port 6390 for manual runs.
//! * `ci`: fmt check, clippy, then `test`.
//! * `fuzz [--total N] [--redis-cases N]`: every property test in release, a million inputs in all.
//! * `soak --minutes N`: producer, worker and scheduler at a steady rate; Redis memory, key count
//!   and RSS sampled each minute must stay flat.
//! * `layout`: no package over 25 % of the non-test lines, no import loops between files, no
//!   library file over 800 lines and no function over 120.

mod bench;
mod chaos;
mod ci;
mod demo;
mod fuzz;
mod layout;
mod redis;
mod screenshots;
mod soak;
mod test;
mod torture;

use std::process::Command;

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args
        .split_first()
        .map(|(t, r)| (t.as_str(), r))
        .unwrap_or(("help", &[]));
    match task {
        "test" => test::run(rest),
        "demo" => demo::run(rest),
        "bench" => bench::run(rest),
        "chaos" => chaos::run(rest),
        "torture" => torture::run(rest),
        "redis" => redis::run(rest),
        "screenshots" => screenshots::run(rest),
        "ci" => ci::run(),
        "fuzz" => fuzz::run(rest),
        "soak" => soak::run(rest),
        "layout" => layout::run(rest),
        _ => {
            eprintln!(
                "usage: cargo xtask <test|demo|bench [enqueue|e2e|priority|tenants|outcomes|scheduler|inspect|idle|cluster|ingest]|chaos [scenario] [--short]|torture [--short] [--seed S] [--minutes M]|screenshots|redis up|down|ci|fuzz [--total N]|soak --minutes N|layout>"
            );
            if task == "help" {
                Ok(())
            } else {
                bail!("unknown task {task:?}")
            }
        }
    }
}

/// Runs a command from the workspace root, failing when it exits non-zero.
pub(crate) fn run_cmd(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    if !status.success() {
        bail!("{program} {} failed with {status}", args.join(" "));
    }
    Ok(())
}

/// The workspace root (xtask lives one level below it).
pub(crate) fn root() -> std::path::PathBuf {
    let here = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(|p| p.to_path_buf()).unwrap_or(here)
}
