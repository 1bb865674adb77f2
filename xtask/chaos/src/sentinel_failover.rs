//! Sentinel failover: the whole system (see `failover.rs`) on one primary with replicas and
//! three sentinels (quorum 2), reached through a `redis-sentinel://` URL; replication is cut,
//! the primary SIGKILLed and a replica promoted by the sentinels. The full run starts two
//! replicas and fails over twice: after the first promotion the sentinels point the replica left
//! at the new primary, which is then cut and killed in turn.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use chronos_testkit::RedisSentinel;
use chronos_tests::failover::Sentinel;

use crate::failover::{self, Plan};
use crate::report::Row;

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let (replicas, plan) = if short {
        (
            1,
            Plan {
                name: "sentinel-failover",
                failovers: 1,
                warm: Duration::from_secs(4),
                after: Duration::from_secs(4),
                pause: Duration::from_millis(5),
            },
        )
    } else {
        (
            2,
            Plan {
                name: "sentinel-failover",
                failovers: 2,
                warm: Duration::from_secs(20),
                after: Duration::from_secs(15),
                pause: Duration::from_millis(1),
            },
        )
    };
    let fixture = RedisSentinel::with_replicas(replicas).context("sentinel fixture")?;
    let url = fixture.url();
    Ok(vec![
        failover::run(url, Arc::new(Sentinel(fixture)), plan).await?,
    ])
}
