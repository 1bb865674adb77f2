//! The whole system on a 3-primary Redis Cluster with a replica each: replication from the
//! primary that serves both the queue and the scheduler's keys is cut on purpose, the primary
//! killed and its replica promoted by the cluster mid-run. See `failover/mod.rs` for the books.

mod failover;

use std::sync::Arc;
use std::time::Duration;

use chronos_testkit::RedisCluster;
use chronos_tests::failover::Cluster;

/// The hash tag of the scheduler's keys (leader lock, last fired, registry).
const SCHEDULER_TAG: &str = "scheduler";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_failover_mid_run_loses_only_writes_acknowledged_during_the_cut() {
    let fixture = RedisCluster::with_replicas().expect("cluster with replicas");
    // A queue on the same primary as the scheduler's keys, so the one kill hits the queue, the
    // leader lock and the trigger bookkeeping together.
    let target = fixture.primary_for(SCHEDULER_TAG).expect("scheduler slot");
    let queue = (0..100)
        .map(|i| format!("q{i}"))
        .find(|q| fixture.primary_for(q).ok() == Some(target))
        .expect("a queue name on the scheduler's primary");
    assert_eq!(fixture.replicas_of(target).expect("replicas").len(), 1);
    let url = fixture.url();
    let dep = Arc::new(Cluster {
        fixture,
        queue: queue.clone(),
        also: Vec::new(),
    });
    let books = failover::run("cluster", url, &queue, dep, false).await;
    assert!(books.promotion < Duration::from_secs(15), "{books:?}");
}
