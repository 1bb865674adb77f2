//! Redis deployments whose primary is cut off from its replicas and killed mid-run: the part of
//! the failover harness that the failover tests (`tests/tests/*_failover.rs`) and the chaos
//! failover scenarios (`xtask/chaos`) share. Each drives its own load; both judge an enqueue
//! acknowledged between the cut and the kill (plus [`LATE_REPLY`]) as one a failover may lose.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use chronos_testkit::{RedisCluster, RedisSentinel, ReplicationCut};

/// How long replication stays cut before the primary is killed: the window in which an
/// acknowledged write can be lost.
pub const CUT: Duration = Duration::from_millis(300);

/// A reply the dead primary sent just before the kill may be read a moment after it; no
/// promoted replica answers this early (a failure is declared after a second at the soonest),
/// so an acknowledgement this close after the kill still counts as inside the cut.
pub const LATE_REPLY: Duration = Duration::from_millis(100);

/// A deployment whose primary can be cut off from its replicas and killed.
pub trait Deployment: Send + Sync + 'static {
    /// Freezes the replicas of the primary that serves the work queue and drops their links;
    /// returns the cut, the primary's port and what else it serves (for a report's note, asked
    /// before the cut while every node still answers).
    fn cut(&self) -> Result<(ReplicationCut, u16, String)>;
    /// Blocks until a replica of `old` has been promoted and clients can find it.
    fn wait_promoted(&self, old: u16, within: Duration) -> Result<()>;
    /// Blocks until the primary serving the work queue has a replica in sync again (for a
    /// second failover); an error when none comes within `within`.
    fn wait_replicated(&self, within: Duration) -> Result<()>;
}

/// A Redis Cluster with a replica per primary; the primary cut and killed is the one that serves
/// `queue`.
#[derive(Debug)]
pub struct Cluster {
    /// The cluster.
    pub fixture: RedisCluster,
    /// The work queue.
    pub queue: String,
    /// Other keys worth naming when they share the queue's primary: (what, key).
    pub also: Vec<(String, String)>,
}

impl Cluster {
    /// What the primary on `port` serves besides the work queue.
    fn also_on(&self, port: u16) -> String {
        let on: Vec<&str> = self
            .also
            .iter()
            .filter(|(_, k)| self.fixture.primary_for(k).ok() == Some(port))
            .map(|(what, _)| what.as_str())
            .collect();
        format!("work queue, {}", on.join(", "))
    }
}

impl Deployment for Cluster {
    fn cut(&self) -> Result<(ReplicationCut, u16, String)> {
        let primary = self.fixture.primary_for(&self.queue)?;
        let replicas = self.fixture.replicas_of(primary)?;
        let also = self.also_on(primary);
        Ok((ReplicationCut::start(primary, &replicas)?, primary, also))
    }

    fn wait_promoted(&self, old: u16, within: Duration) -> Result<()> {
        self.fixture.wait_promoted(&self.queue, old, within)?;
        Ok(())
    }

    fn wait_replicated(&self, within: Duration) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < within {
            let primary = self.fixture.primary_for(&self.queue)?;
            if self.fixture.replicas_of(primary)?.into_iter().any(link_up) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the work queue's primary has no replica in sync")
    }
}

/// One primary with replicas and three sentinels (quorum 2).
#[derive(Debug)]
pub struct Sentinel(pub RedisSentinel);

impl Deployment for Sentinel {
    fn cut(&self) -> Result<(ReplicationCut, u16, String)> {
        let primary = self.0.primary()?;
        let also = "every key (one primary)".to_string();
        Ok((self.0.cut_replication()?, primary, also))
    }

    fn wait_promoted(&self, old: u16, within: Duration) -> Result<()> {
        self.0.wait_promoted(old, within)?;
        Ok(())
    }

    fn wait_replicated(&self, within: Duration) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < within {
            if self.0.replicas()?.into_iter().any(link_up) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the new primary has no replica in sync")
    }
}

/// `redis-cli -p <port> info replication` says the link to its primary is up.
pub fn link_up(port: u16) -> bool {
    std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", "replication"])
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("master_link_status:up"))
}
