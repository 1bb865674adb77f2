//! Benchmarks of chronos-rs, with peers measured in the same run. Run through
//! `cargo xtask bench [enqueue|e2e|scheduler|inspect|all]`; never from a timed test.
//!
//! Each figure is the median of several runs against a fresh throwaway Redis (or
//! `CHRONOS_REDIS_URL`), and each peer figure comes from the same Redis build on the same machine.

mod e2e;
mod enqueue;
mod inspect;
mod peers;
mod report;
mod scheduler;

use anyhow::{bail, Result};

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, url, ns] = args.as_slice() {
        if mode == "__scheduler" {
            return scheduler::child(url, ns).await;
        }
    }
    let Some((peers_dir, modes)) = args.split_first() else {
        bail!("usage: chronos-bench <peers dir> [enqueue|e2e|scheduler|inspect|all]");
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
    if all || modes.iter().any(|m| m == "scheduler") {
        scheduler::run().await?;
        ran = true;
    }
    if all || modes.iter().any(|m| m == "inspect") {
        inspect::run().await?;
        ran = true;
    }
    if !ran {
        bail!("unknown bench mode {modes:?}: expected enqueue, e2e, scheduler, inspect or all");
    }
    Ok(())
}
