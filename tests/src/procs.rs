//! Child processes of a fault test or scenario (workers, schedulers), the signals sent to them,
//! and waiting for a scheduler leader among them. Shared by `tests/tests/scheduler_failover.rs`
//! and the chaos scenarios (`xtask/chaos`).

use std::io::BufReader;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use chronos::{LeaderInfo, RedisBroker, Schedules};

/// A child process: killed (and reaped) on drop, so a failed test leaves no process behind.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    /// Kept open so that the child never writes to a closed pipe.
    _stdout: Option<BufReader<ChildStdout>>,
    /// The worker's server id (its consumer name), or the scheduler's instance id.
    pub id: String,
    /// A scheduler's clock offset (0 for the others), for a respawn in the same slot.
    pub offset_ms: i64,
}

impl Proc {
    /// Wraps a spawned `child` known as `id`; `stdout` is its output pipe when one was read.
    pub fn new(child: Child, id: String, stdout: Option<BufReader<ChildStdout>>) -> Self {
        Self {
            child,
            _stdout: stdout,
            id,
            offset_ms: 0,
        }
    }

    /// This process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` (`-KILL`, `-STOP`, `-CONT`, `-TERM`) through kill(1), which keeps these
    /// crates free of unsafe code.
    pub fn signal(&self, sig: &str) -> Result<()> {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            // A process that already exited is no news worth a line.
            .stderr(Stdio::null())
            .status()
            .context("kill(1)")?
            .success();
        if !ok {
            bail!("kill {sig} {} failed", self.pid());
        }
        Ok(())
    }

    /// SIGKILL, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks for a graceful stop (a worker finishes its tasks, a scheduler resigns): SIGCONT in
    /// case it is stopped, then SIGTERM. Does not wait.
    pub fn terminate(&self) {
        let _ = self.signal("-CONT");
        let _ = self.signal("-TERM");
    }

    /// Waits up to `within` for it to exit, then kills it.
    pub fn wait_exit(&mut self, within: Duration) {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// [`Proc::terminate`], then [`Proc::wait_exit`].
    pub fn stop(&mut self, within: Duration) {
        self.terminate();
        self.wait_exit(within);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.signal("-CONT");
        self.kill();
    }
}

/// The leader, waiting up to `within` for one whose instance id is not `not`.
pub async fn leader(
    broker: &RedisBroker,
    not: Option<&str>,
    within: Duration,
) -> Result<LeaderInfo> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Ok(Some(l)) = broker.leader().await {
            if Some(l.id.as_str()) != not {
                return Ok(l);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("no leader other than {not:?} within {within:?}")
}
