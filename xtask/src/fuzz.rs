use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// The property suites: package, cargo target selection, and the test-name filter that picks
/// the properties out of that target (`""`: every test of it). Tests under a `regressions`
/// module are plain tests of one input each, not properties, and are not counted.
const SUITES: &[(&str, &str, &str)] = &[
    ("chronos-broker", "--test=properties", ""),
    ("chronos-broker", "--lib", "properties::"),
    ("chronos-scheduler", "--test=properties", ""),
    ("chronos-scheduler", "--lib", "properties::"),
];

/// Properties whose every case is a Redis round trip (named `redis_*`): they run a fixed
/// count, and the in-memory properties make up the rest of the total.
const REDIS_PREFIX: &str = "redis_";

/// `cargo xtask fuzz [--total N] [--redis-cases N]`: every property test in release, one at a
/// time, with `PROPTEST_CASES` scaled so the cases add up to at least `--total` (default one
/// million), printing the count and time per property. Properties that talk to Redis run
/// `--redis-cases` each (default 2,000) against a throwaway server the tests start.
pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut total: u64 = 1_000_000;
    let mut redis_cases: u64 = 2_000;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = |v: Option<&String>| -> Result<u64> {
            v.with_context(|| format!("{a} needs a number"))?
                .replace('_', "")
                .parse()
                .with_context(|| format!("{a} needs a number"))
        };
        match a.as_str() {
            "--total" => total = value(it.next())?,
            "--redis-cases" => redis_cases = value(it.next())?,
            other => bail!("unknown argument {other:?}: expected --total N or --redis-cases N"),
        }
    }

    let mut build = vec!["test", "--release", "--no-run"];
    for pkg in ["chronos-broker", "chronos-scheduler"] {
        build.extend(["-p", pkg]);
    }
    crate::run_cmd("cargo", &build)?;

    // Every property, by suite.
    let mut props: Vec<(usize, String)> = Vec::new();
    for (i, (pkg, target, filter)) in SUITES.iter().enumerate() {
        let out = Command::new("cargo")
            .args(["test", "--release", "-q", "-p", pkg, target, "--", "--list"])
            .current_dir(crate::root())
            .output()
            .with_context(|| format!("listing the tests of {pkg} {target}"))?;
        if !out.status.success() {
            bail!(
                "listing the tests of {pkg} {target} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(name) = line.strip_suffix(": test") {
                if name.contains(filter) && !name.contains("regressions::") {
                    props.push((i, name.to_string()));
                }
            }
        }
    }
    let redis_props = props
        .iter()
        .filter(|(_, n)| leaf(n).starts_with(REDIS_PREFIX))
        .count() as u64;
    let pure_props = props.len() as u64 - redis_props;
    if pure_props == 0 {
        bail!("no property tests found");
    }
    let budget = total.saturating_sub(redis_props * redis_cases);
    let per_pure = budget.div_ceil(pure_props).max(1);
    println!(
        "== fuzz: {} properties ({pure_props} in memory x {per_pure} cases, {redis_props} against \
         Redis x {redis_cases} cases), release build",
        props.len()
    );

    let started = Instant::now();
    let mut done: u64 = 0;
    for (suite, name) in &props {
        let (pkg, target, _) = SUITES[*suite];
        let cases = if leaf(name).starts_with(REDIS_PREFIX) {
            redis_cases
        } else {
            per_pure
        };
        let t = Instant::now();
        let status = Command::new("cargo")
            .args(["test", "--release", "-q", "-p", pkg, target, "--"])
            .args(["--exact", name, "--test-threads=1"])
            .env("PROPTEST_CASES", cases.to_string())
            .current_dir(crate::root())
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("running {name}"))?;
        if !status.success() {
            // Run it again where its output shows: proptest prints the shrunk input.
            let _ = Command::new("cargo")
                .args(["test", "--release", "-q", "-p", pkg, target, "--"])
                .args(["--exact", name, "--test-threads=1"])
                .env("PROPTEST_CASES", cases.to_string())
                .current_dir(crate::root())
                .status();
            bail!("property {pkg}::{name} failed after {done} cases of other properties");
        }
        done += cases;
        println!(
            "{:<60} {:>9} cases {:>7.1} s",
            format!("{pkg}::{name}"),
            cases,
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "== {done} inputs in {:.0} s, no failure (no panic, every rejection its typed error)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The test's own name, without its module path.
fn leaf(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}
