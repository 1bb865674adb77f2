//! Cluster failover: the whole system (see `failover.rs`) on a 3-primary Redis Cluster with a
//! replica each; the primary serving the work queue is cut from its replica and SIGKILLed, and
//! the cluster promotes the replica. Once: the fixture's killed primary does not come back, so
//! its slots have no replica left for a second failover; the full run carries more load instead.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use chronos_testkit::{RedisCluster, ReplicationCut};

use crate::failover::{self, link_up, Deployment, Plan};
use crate::procs::{runs_key, TICK_QUEUE, WORK_QUEUE};
use crate::report::Row;

/// The hash tag of the scheduler's keys (leader lock, last fired, registry).
const SCHEDULER_TAG: &str = "scheduler";

struct Cluster(RedisCluster);

impl Deployment for Cluster {
    fn cut(&self) -> Result<(ReplicationCut, u16, String)> {
        let primary = self.0.primary_for(WORK_QUEUE)?;
        let replicas = self.0.replicas_of(primary)?;
        let also = self.also_on(primary);
        Ok((ReplicationCut::start(primary, &replicas)?, primary, also))
    }

    fn wait_promoted(&self, old: u16, within: Duration) -> Result<()> {
        self.0.wait_promoted(WORK_QUEUE, old, within)?;
        Ok(())
    }

    fn wait_replicated(&self, within: Duration) -> Result<()> {
        let start = std::time::Instant::now();
        while start.elapsed() < within {
            let primary = self.0.primary_for(WORK_QUEUE)?;
            if self.0.replicas_of(primary)?.into_iter().any(link_up) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        anyhow::bail!("the work queue's primary has no replica in sync")
    }
}

impl Cluster {
    /// What the primary on `port` serves besides the work queue.
    fn also_on(&self, port: u16) -> String {
        let runs = runs_key("chaos");
        let keys = [
            ("tick queue", TICK_QUEUE),
            ("scheduler keys", SCHEDULER_TAG),
            ("runs hash", runs.as_str()),
        ];
        let on: Vec<&str> = keys
            .iter()
            .filter(|(_, k)| self.0.primary_for(k).ok() == Some(port))
            .map(|(what, _)| *what)
            .collect();
        format!("work queue, {}", on.join(", "))
    }
}

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let fixture = RedisCluster::with_replicas().context("cluster with replicas")?;
    let url = fixture.url();
    let plan = if short {
        Plan {
            name: "cluster-failover",
            failovers: 1,
            warm: Duration::from_secs(4),
            after: Duration::from_secs(4),
            pause: Duration::from_millis(5),
        }
    } else {
        Plan {
            name: "cluster-failover",
            failovers: 1,
            warm: Duration::from_secs(30),
            after: Duration::from_secs(20),
            pause: Duration::from_millis(1),
        }
    };
    Ok(vec![
        failover::run(url, Arc::new(Cluster(fixture)), plan).await?,
    ])
}
