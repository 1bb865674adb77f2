use anyhow::{bail, Result};

const PORT: &str = "6390";

/// `redis up` starts a local Redis on port 6390 (nothing persisted) for manual runs; use it with
/// `CHRONOS_REDIS_URL=redis://127.0.0.1:6390`. `redis down` stops it.
pub(crate) fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("up") => {
            crate::run_cmd(
                "redis-server",
                &[
                    "--port",
                    PORT,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "yes",
                ],
            )?;
            eprintln!("export CHRONOS_REDIS_URL=redis://127.0.0.1:{PORT}");
            Ok(())
        }
        Some("down") => crate::run_cmd("redis-cli", &["-p", PORT, "shutdown", "nosave"]),
        _ => bail!("usage: cargo xtask redis up|down"),
    }
}
