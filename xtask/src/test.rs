use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The whole suite: unit, integration, end-to-end and doc tests of every crate. Tests start their
/// own throwaway Redis unless `CHRONOS_REDIS_URL` is set; browser tests need Debian's `chromium`
/// and `chromium-driver`. The Python producer's tests run in a virtual environment this task
/// makes under the target directory (`python3 -m venv`, then `pip install redis`), handed to
/// the tests as `CHRONOS_PYTHON`; the TypeScript producer's tests run `npm ci` themselves. Then,
/// unless arguments narrow the run, the short chaos scenarios (`cargo xtask chaos --short`) and
/// the short torture run (`cargo xtask torture --short`).
pub(crate) fn run(extra: &[String]) -> Result<()> {
    let narrowed = !extra.is_empty();
    // A Python given by the caller wins; otherwise one of our own, so that a fresh clone needs
    // no global redis-py (and we never install into the system's Python).
    let python = match std::env::var_os("CHRONOS_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None => match python_venv() {
            Ok(p) => Some(p),
            // A narrowed run may not need Python at all: say why the Python tests will fail,
            // and go on.
            Err(e) if narrowed => {
                eprintln!("warning: no Python for the producer tests: {e:#}");
                None
            }
            Err(e) => return Err(e),
        },
    };
    // The browser harness is a feature of the testkit so that crates needing only Redis skip
    // its dependencies; the suite turns it on so that its own tests run.
    let mut args = vec![
        "test",
        "--workspace",
        "--features",
        "chronos-testkit/browser",
    ];
    args.extend(extra.iter().map(String::as_str));
    eprintln!("$ cargo {}", args.join(" "));
    let mut cargo = Command::new("cargo");
    cargo.args(&args).current_dir(crate::root());
    if let Some(python) = &python {
        cargo.env("CHRONOS_PYTHON", python);
    }
    let status = cargo.status().context("could not start cargo")?;
    if !status.success() {
        bail!("cargo {} failed with {status}", args.join(" "));
    }
    // The short versions of the process-level fault scenarios (a few minutes in all; the full
    // ones are `cargo xtask chaos`). A run narrowed by arguments (`-p`, `--test`) skips them.
    if !narrowed {
        crate::chaos::run(&["--short".to_string()])?;
        // One fixed seed, under three minutes: every feature against every fault, checked
        // against the model (`cargo xtask torture --short --seed S` replays another).
        crate::torture::run(&["--short".to_string()])?;
    }
    Ok(())
}

/// The target directory cargo builds into (`CARGO_TARGET_DIR`, else `target/`).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                crate::root().join(d)
            }
        }
        None => crate::root().join("target"),
    }
}

/// A Python with redis-py: `<target>/py-venv`, made on first use and reused while it can still
/// import redis. Its interpreter's path.
fn python_venv() -> Result<PathBuf> {
    let venv = target_dir().join("py-venv");
    let python = venv.join("bin").join("python3");
    if imports_redis(&python) {
        return Ok(python);
    }
    eprintln!(
        "making a Python virtual environment for the producer tests in {}",
        venv.display()
    );
    // A half-made one (an interrupted run, a moved interpreter) is made again from scratch.
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove {}", venv.display()))?;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("cannot start python3 (README lists it: python3 with venv support)")?;
    if !made.success() {
        bail!(
            "python3 -m venv {} failed with {made}: python3 needs venv support \
             (Debian/Ubuntu: apt-get install -y python3-venv)",
            venv.display()
        );
    }
    // The producer's one dependency, as its pyproject.toml says.
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "redis>=4",
        ])
        .status()
        .context("cannot start the virtual environment's python3")?;
    if !pip.success() || !imports_redis(&python) {
        bail!("pip install redis into {} failed ({pip})", venv.display());
    }
    Ok(python)
}

fn imports_redis(python: &Path) -> bool {
    python.exists()
        && Command::new(python)
            .args(["-c", "import redis"])
            .output()
            .is_ok_and(|o| o.status.success())
}
