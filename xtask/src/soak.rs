use anyhow::Result;

/// Runs `chronos-soak` in release mode: `cargo xtask soak --minutes N [--rate TASKS_PER_S]`.
/// It prints one line a minute and a verdict, and fails when Redis memory, the key count or the
/// process RSS grew after the warm-up.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["run", "--release", "--quiet", "-p", "chronos-soak", "--"];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
