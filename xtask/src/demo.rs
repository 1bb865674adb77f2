use anyhow::Result;

/// Runs the demo (the `chronos-demo` crate's binary) in release mode: it starts a throwaway Redis when
/// `CHRONOS_REDIS_URL` is unset. Not `--quiet`: the first run compiles for minutes, and cargo's
/// progress lines say so.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec!["run", "--release", "-p", "chronos-demo", "--"];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
