use anyhow::Result;

/// What `.ci/run` does after installing Redis (and Chromium): format check, clippy with warnings denied, tests.
pub(crate) fn run() -> Result<()> {
    crate::run_cmd("cargo", &["fmt", "--all", "--", "--check"])?;
    crate::run_cmd(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--features",
            "chronos-testkit/browser",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    crate::test::run(&[])
}
