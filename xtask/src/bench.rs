use anyhow::Result;

/// Runs `chronos-bench` in release mode. Peers (BullMQ under `xtask/peers/`) are installed with
/// `npm ci` on first use and measured in the same run, on the same Redis build.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let peers = crate::root().join("xtask/peers");
    let mut args = vec!["run", "--release", "--quiet", "-p", "chronos-bench", "--"];
    let peers = peers.display().to_string();
    args.push(&peers);
    if extra.is_empty() {
        args.push("all");
    }
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
