use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

/// Peer implementations run as child processes; each prints one JSON object per result line.
pub(crate) struct Peers {
    dir: PathBuf,
}

impl Peers {
    pub(crate) fn new(dir: &str) -> Self {
        Self {
            dir: PathBuf::from(dir),
        }
    }

    /// Runs the BullMQ bench in `mode` against `redis_url` and returns its JSON lines, or None
    /// (with the reason on stderr) when Node or npm is not available.
    pub(crate) fn bullmq(&self, redis_url: &str, args: &[&str]) -> Option<Vec<String>> {
        match self.try_bullmq(redis_url, args) {
            Ok(lines) => Some(lines),
            Err(e) => {
                eprintln!("bullmq peer skipped: {e:#}");
                None
            }
        }
    }

    fn try_bullmq(&self, redis_url: &str, args: &[&str]) -> Result<Vec<String>> {
        let dir = self.dir.join("bullmq");
        if !dir.join("node_modules/bullmq").exists() {
            let status = Command::new("npm")
                .args(["ci", "--silent", "--no-audit", "--no-fund"])
                .current_dir(&dir)
                .status()
                .context("npm not found")?;
            anyhow::ensure!(status.success(), "npm ci failed: {status}");
        }
        let out = Command::new("node")
            .arg("bench.mjs")
            .args(args)
            .env("REDIS_URL", redis_url)
            .current_dir(&dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("node not found")?;
        anyhow::ensure!(out.status.success(), "bullmq bench failed: {}", out.status);
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    }
}

/// Reads a number field from the first JSON line whose text contains every needle. The peer's
/// output is flat JSON, so a field scan is enough and keeps the bench free of a JSON dependency.
pub(crate) fn field(lines: &[String], needles: &[&str], name: &str) -> Option<f64> {
    let line = lines
        .iter()
        .find(|l| needles.iter().all(|n| l.contains(n)))?;
    let key = format!("\"{name}\":");
    let start = line.find(&key)? + key.len();
    let rest = &line[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// Reads a string field (without escapes) from the first JSON line whose text contains every
/// needle.
pub(crate) fn text(lines: &[String], needles: &[&str], name: &str) -> Option<String> {
    let line = lines
        .iter()
        .find(|l| needles.iter().all(|n| l.contains(n)))?;
    let key = format!("\"{name}\":\"");
    let start = line.find(&key)? + key.len();
    let rest = &line[start..];
    Some(rest[..rest.find('"')?].to_string())
}
