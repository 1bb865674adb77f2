//! `cargo xtask screenshots`: the console's pictures (README, console guide), taken from the real
//! console over a real demo run (not from a test's seeded data). Runs the demo (release) with its
//! console on a free port, lets it work for a while, then has headless Chromium (Debian's
//! `chromium`) shoot the overview, queue pages (dead letters; tenants; events) and the schedules
//! into `crates/chronos/docs/images/`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// How long the demo runs before the pictures: long enough for a chart with some minutes in it.
const WARM_UP: Duration = Duration::from_secs(150);

pub(crate) fn run(extra: &[String]) -> Result<()> {
    let warm = match extra.first() {
        Some(s) => Duration::from_secs(s.parse().context("warm-up seconds")?),
        None => WARM_UP,
    };
    crate::run_cmd("cargo", &["build", "--release", "-p", "chronos-demo"])?;
    let root = crate::root();
    let mut demo = Command::new(root.join("target/release/chronos-demo"))
        .args(["--console", "127.0.0.1:0", "--seconds"])
        .arg((warm.as_secs() + 60).to_string())
        .env_remove("CHRONOS_REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start the demo")?;
    let stdout = demo.stdout.take().context("demo stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let Some(line) = lines.next() else {
            bail!("the demo ended without printing its console address");
        };
        let line = line?;
        if let Some(at) = line.find("console: http://") {
            let url = line[at + "console: ".len()..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches('/')
                .to_string();
            break url;
        }
    };
    // Keep draining the demo's output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    eprintln!(
        "demo console at {base}; letting it run {} s",
        warm.as_secs()
    );
    std::thread::sleep(warm.saturating_sub(Duration::from_secs(10)));
    // The console's rates come from the totals it has seen: let it see them twice before the
    // picture, ten seconds apart.
    poll(&base)?;
    std::thread::sleep(Duration::from_secs(10));
    let out = root.join("crates/chronos/docs/images");
    std::fs::create_dir_all(&out)?;
    let shots = [
        ("dash-overview.png", format!("{base}/"), "1400,1000"),
        (
            "dash-queue.png",
            format!("{base}/queues/low?state=archived"),
            "1400,1000",
        ),
        // The demo's partner syncs are tenant tasks (one tenant per customer).
        (
            "dash-queue-tenants.png",
            format!("{base}/queues/partner"),
            "1400,1400",
        ),
        (
            "dash-schedules.png",
            format!("{base}/schedules"),
            "1400,560",
        ),
        // The demo turns the critical queue's event stream on.
        (
            "dash-queue-events.png",
            format!("{base}/queues/critical/events"),
            "1400,1000",
        ),
        // A runtime schedule the demo adds, with its fires and the operator's forms.
        (
            "dash-schedule.png",
            format!("{base}/schedules/team-digest"),
            "1400,900",
        ),
        (
            "dash-queue-timing.png",
            format!("{base}/queues/default/timing"),
            "1400,1000",
        ),
        (
            "dash-dead-by-error.png",
            format!("{base}/queues/low/dead"),
            "1400,560",
        ),
        ("dash-servers.png", format!("{base}/servers"), "1400,900"),
    ];
    let started = Instant::now();
    for (file, url, size) in shots {
        let path = out.join(file);
        shoot(&url, &path, size)?;
        eprintln!("wrote {}", path.display());
    }
    // SIGTERM, not SIGKILL: the demo then stops gracefully and takes its throwaway Redis with it.
    let _ = Command::new("kill")
        .args(["-TERM", &demo.id().to_string()])
        .status();
    let _ = demo.wait();
    eprintln!("screenshots took {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// One GET of the console's live counts.
fn poll(base: &str) -> Result<()> {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(
        s,
        "GET /api/overview HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    if !out.starts_with("HTTP/1.1 200") {
        bail!("the console did not answer its live counts");
    }
    Ok(())
}

/// One page as a PNG, through Chromium's own `--screenshot` (no driver needed for a still).
fn shoot(url: &str, path: &std::path::Path, size: &str) -> Result<()> {
    let profile = std::env::temp_dir().join(format!("chronos-shot-{}", std::process::id()));
    let status = Command::new("chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            // Lets the page's script poll and draw the chart before the picture.
            "--virtual-time-budget=4000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={size}"))
        .arg(format!("--screenshot={}", path.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("run chromium (Debian: apt-get install -y chromium)")?;
    let _ = std::fs::remove_dir_all(&profile);
    if !status.success() || !path.exists() {
        bail!("chromium could not shoot {url}");
    }
    Ok(())
}
