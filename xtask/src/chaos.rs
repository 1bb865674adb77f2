use anyhow::Result;

/// Runs `chronos-chaos` in release mode: `cargo xtask chaos [scenario...] [--short]`, the
/// scenarios being worker-storm, priority-storm, tenant-storm, scheduler-storm, redis-restart, network-stall, clock-skew,
/// cluster-failover and sentinel-failover (all when none is named). Release mode, because the scenarios time real processes against
/// leases and TTLs, and a debug build's slowness would be a fault nobody chose.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["run", "--release", "--quiet", "-p", "chronos-chaos", "--"];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
