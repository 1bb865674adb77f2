use anyhow::Result;

/// Runs `chronos-torture` in release mode: `cargo xtask torture [--short] [--seed S | --seeds
/// A,B,C | --count N] [--minutes M] [--plan]`. A seeded workload mixing every feature, operators
/// and faults, checked task by task against a model; every violation is printed with the seed
/// that replays it. Release mode for the same reason as chaos: the run times real processes
/// against leases and TTLs.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["run", "--release", "--quiet", "-p", "chronos-torture", "--"];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
