use anyhow::Result;

/// What `.ci/run` does after installing Redis: format check, clippy with warnings denied, tests.
pub(crate) fn run() -> Result<()> {
    crate::run_cmd("cargo", &["fmt", "--all", "--", "--check"])?;
    crate::run_cmd(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    crate::test::run(&[])
}
