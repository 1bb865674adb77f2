//! Cluster failover: the whole system (see `failover.rs`) on a 3-primary Redis Cluster with a
//! replica each; the primary serving the work queue is cut from its replica and SIGKILLed, and
//! the cluster promotes the replica. Once: the fixture's killed primary does not come back, so
//! its slots have no replica left for a second failover; the full run carries more load instead.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use chronos_testkit::RedisCluster;
use chronos_tests::failover::Cluster;

use crate::failover::{self, Plan};
use crate::procs::{runs_key, TICK_QUEUE, WORK_QUEUE};
use crate::report::Row;

/// The hash tag of the scheduler's keys (leader lock, last fired, registry).
const SCHEDULER_TAG: &str = "scheduler";

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
        failover::run(url, Arc::new(cluster(fixture)), plan).await?,
    ])
}

/// The deployment: the work queue's primary is the one cut and killed; the note names what
/// else it serves.
fn cluster(fixture: RedisCluster) -> Cluster {
    let also = [
        ("tick queue", TICK_QUEUE.to_string()),
        ("scheduler keys", SCHEDULER_TAG.to_string()),
        ("runs hash", runs_key("chaos")),
    ];
    Cluster {
        fixture,
        queue: WORK_QUEUE.to_string(),
        also: also.into_iter().map(|(w, k)| (w.to_string(), k)).collect(),
    }
}
