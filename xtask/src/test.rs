use anyhow::Result;

/// The whole suite: unit, integration, end-to-end and doc tests of every crate. Tests start their
/// own throwaway Redis unless `CHRONOS_REDIS_URL` is set; browser tests need Debian's `chromium`
/// and `chromium-driver`. Then, unless arguments narrow the run, the short chaos scenarios
/// (`cargo xtask chaos --short`) and the short torture run (`cargo xtask torture --short`).
pub(crate) fn run(extra: &[String]) -> Result<()> {
    // The browser harness is a feature of the testkit so that crates needing only Redis skip
    // its dependencies; the suite turns it on so that its own tests run.
    let mut args = vec![
        "test",
        "--workspace",
        "--features",
        "chronos-testkit/browser",
    ];
    args.extend(extra.iter().map(String::as_str));
    crate::run_cmd("cargo", &args)?;
    // The short versions of the process-level fault scenarios (a few minutes in all; the full
    // ones are `cargo xtask chaos`). A run narrowed by arguments (`-p`, `--test`) skips them.
    if extra.is_empty() {
        crate::chaos::run(&["--short".to_string()])?;
        // One fixed seed, under three minutes: every feature against every fault, checked
        // against the model (`cargo xtask torture --short --seed S` replays another).
        crate::torture::run(&["--short".to_string()])?;
    }
    Ok(())
}
