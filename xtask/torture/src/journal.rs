//! The handlers' own record of what ran: one line at the start of every attempt and one at its
//! end, appended by each worker process to a file of its own. Each line is one `write(2)` to a
//! file opened for appending, so it is in the kernel before the handler goes on: a SIGKILL
//! loses at most the line of an end that had not happened yet, which is the truth (the attempt
//! was cut at the kill).
//!
//! Lines, fields separated by one space (no field holds a space):
//! * `S <key> <gen> <task id> <attempt> <unix us> <pid> <queue>`: an attempt started;
//! * `E <key> <gen> <task id> <attempt> <unix us> <pid> <outcome>`: it ended ([`Outcome`]);
//! * `G <key> <task id> <succeeded> <failed> <total> <unix us> <pid>`: a group callback's
//!   counts, as its context gave them.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};

/// How an attempt ended, as its handler saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Fail,
    Panic,
    Skip,
    Snooze,
    RateLimited,
    Cancel,
    /// The handler's future was dropped before it returned: a timeout, a lost lease or a
    /// shutdown cut it off.
    Dropped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Panic => "panic",
            Outcome::Skip => "skip",
            Outcome::Snooze => "snooze",
            Outcome::RateLimited => "ratelimited",
            Outcome::Cancel => "cancel",
            Outcome::Dropped => "dropped",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => Outcome::Ok,
            "fail" => Outcome::Fail,
            "panic" => Outcome::Panic,
            "skip" => Outcome::Skip,
            "snooze" => Outcome::Snooze,
            "ratelimited" => Outcome::RateLimited,
            "cancel" => Outcome::Cancel,
            "dropped" => Outcome::Dropped,
            _ => return None,
        })
    }

    /// Whether the attempt counts as failed (the task retries or dies), as opposed to
    /// succeeded, or ended without spending an attempt.
    pub(crate) fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::Panic | Outcome::Skip | Outcome::Dropped
        )
    }
}

/// Microseconds since the epoch by this machine's clock: every process of a run is on one
/// machine, so stamps from different processes compare.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A worker process's journal file.
#[derive(Debug, Clone)]
pub(crate) struct Journal {
    file: Arc<Mutex<File>>,
    pid: u32,
}

impl Journal {
    /// Opens (creates) this process's file in `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let pid = std::process::id();
        let path = dir.join(format!("w-{pid}.log"));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("open journal {}", path.display()))?;
        Ok(Self {
            file: Arc::new(Mutex::new(file)),
            pid,
        })
    }

    fn write(&self, line: String) {
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line (see the module docs). A failed write cannot be reported
        // anywhere better than the missing line the checker will flag.
        let _ = f.write_all(line.as_bytes());
    }

    /// Records the start of an attempt; the returned guard records its end, with
    /// [`Outcome::Dropped`] unless told otherwise before it is dropped.
    pub(crate) fn start(
        &self,
        key: u64,
        gen: u32,
        task: &str,
        attempt: u32,
        queue: &str,
    ) -> AttemptGuard {
        self.write(format!(
            "S {key} {gen} {task} {attempt} {} {} {queue}\n",
            now_us(),
            self.pid
        ));
        AttemptGuard {
            journal: self.clone(),
            line: format!("{key} {gen} {task} {attempt}"),
            outcome: Outcome::Dropped,
        }
    }

    /// Records a group callback's counts.
    pub(crate) fn group(&self, key: u64, task: &str, succeeded: u64, failed: u64, total: u64) {
        self.write(format!(
            "G {key} {task} {succeeded} {failed} {total} {} {}\n",
            now_us(),
            self.pid
        ));
    }
}

/// The end line of one attempt, written when the guard is dropped.
#[derive(Debug)]
pub(crate) struct AttemptGuard {
    journal: Journal,
    line: String,
    outcome: Outcome,
}

impl AttemptGuard {
    /// How the attempt ends (written when the guard drops: after the handler's last await, or
    /// while a panic unwinds).
    pub(crate) fn set(&mut self, outcome: Outcome) {
        self.outcome = outcome;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        self.journal.write(format!(
            "E {} {} {} {}\n",
            self.line,
            now_us(),
            self.journal.pid,
            self.outcome.as_str()
        ));
    }
}

/// One attempt as the journal tells it.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) key: u64,
    pub(crate) gen: u32,
    pub(crate) task: String,
    pub(crate) attempt: u32,
    pub(crate) pid: u32,
    pub(crate) queue: String,
    pub(crate) start_us: i64,
    /// None when the process died (or stopped for good) before the handler returned.
    pub(crate) end: Option<(i64, Outcome)>,
}

/// A group callback's counts as the journal tells them.
#[derive(Debug, Clone)]
pub(crate) struct GroupCounts {
    pub(crate) key: u64,
    pub(crate) task: String,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    pub(crate) total: u64,
}

/// Everything every worker wrote.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Every attempt, by start time.
    pub(crate) runs: Vec<Run>,
    pub(crate) groups: Vec<GroupCounts>,
    /// Lines that did not parse (a torn write would show here; there must be none).
    pub(crate) bad_lines: Vec<String>,
}

/// Reads every journal file in `dir` and pairs each start with its end (same process, same
/// task and attempt, the first unpaired end after it).
pub(crate) fn read(dir: &Path) -> Result<Read> {
    let mut out = Read::default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read journal dir {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("read journal {}", path.display()))?;
        // Open attempts of this file by (task, attempt): index into out.runs.
        let mut open: std::collections::HashMap<(String, u32), Vec<usize>> = Default::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let parsed = match f.first().copied() {
                Some("S") if f.len() == 8 => (|| {
                    let run = Run {
                        key: f[1].parse().ok()?,
                        gen: f[2].parse().ok()?,
                        task: f[3].to_string(),
                        attempt: f[4].parse().ok()?,
                        start_us: f[5].parse().ok()?,
                        pid: f[6].parse().ok()?,
                        queue: f[7].to_string(),
                        end: None,
                    };
                    open.entry((run.task.clone(), run.attempt))
                        .or_default()
                        .push(out.runs.len());
                    out.runs.push(run);
                    Some(())
                })(),
                Some("E") if f.len() == 8 => (|| {
                    let task = f[3].to_string();
                    let attempt: u32 = f[4].parse().ok()?;
                    let at: i64 = f[5].parse().ok()?;
                    let outcome = Outcome::parse(f[7])?;
                    let slot = open.get_mut(&(task, attempt))?;
                    if slot.is_empty() {
                        return None;
                    }
                    let i = slot.remove(0);
                    out.runs[i].end = Some((at, outcome));
                    Some(())
                })(),
                Some("G") if f.len() == 8 => (|| {
                    out.groups.push(GroupCounts {
                        key: f[1].parse().ok()?,
                        task: f[2].to_string(),
                        succeeded: f[3].parse().ok()?,
                        failed: f[4].parse().ok()?,
                        total: f[5].parse().ok()?,
                    });
                    Some(())
                })(),
                _ => None,
            };
            if parsed.is_none() {
                out.bad_lines.push(format!("{}: {line}", path.display()));
            }
        }
    }
    out.runs.sort_by_key(|r| r.start_us);
    Ok(out)
}
