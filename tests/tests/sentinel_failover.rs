//! The whole system on a Sentinel deployment (one primary, one replica, three sentinels, quorum
//! 2), connected through fred's `redis-sentinel://` URL: replication is cut on purpose, the
//! primary killed and the replica promoted by the sentinels mid-run. See `failover/mod.rs` for
//! the books.

mod failover;

use std::sync::Arc;
use std::time::Duration;

use chronos_testkit::RedisSentinel;
use chronos_tests::failover::Sentinel;

async fn scenario(durable: bool) -> failover::Books {
    // Durable enqueues wait for one replica, and the promoted primary needs one too: the second
    // replica is pointed at it by the sentinels.
    let replicas = if durable { 2 } else { 1 };
    let fixture = RedisSentinel::with_replicas(replicas).expect("sentinel fixture");
    let url = fixture.url();
    let dep = Arc::new(Sentinel(fixture));
    let name = "sentinel";
    let books = failover::run(name, url, "default", dep, durable).await;
    assert!(books.promotion < Duration::from_secs(15), "{books:?}");
    books
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_failover_mid_run_loses_only_writes_acknowledged_during_the_cut() {
    let books = scenario(false).await;
    // The delayed tasks acknowledged in the cut cannot have run before the kill: some of them
    // are lost, which is what the durable option is for.
    assert!(books.lost > 0, "{books:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn durable_enqueues_survive_the_sentinel_failover() {
    let books = scenario(true).await;
    // No enqueue is acknowledged while the replicas are cut off: nothing acknowledged is lost.
    assert_eq!(books.lost, 0, "{books:?}");
}
