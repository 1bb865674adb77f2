use anyhow::Result;

/// Runs the facade's `demo` example in release mode: it starts a throwaway Redis when
/// `CHRONOS_REDIS_URL` is unset.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let mut args = vec![
        "run",
        "--release",
        "--quiet",
        "-p",
        "chronos-rs",
        "--example",
        "demo",
        "--",
    ];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)
}
