//! The whole system on a Sentinel deployment (one primary, one replica, three sentinels, quorum
//! 2), connected through fred's `redis-sentinel://` URL: replication is cut on purpose, the
//! primary killed and the replica promoted by the sentinels mid-run. See `failover/mod.rs` for
//! the books.

mod failover;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_testkit::{RedisSentinel, ReplicationCut};

struct Sentinel {
    fixture: RedisSentinel,
    old: Mutex<Option<u16>>,
}

impl failover::Deployment for Sentinel {
    fn cut(&self) -> anyhow::Result<ReplicationCut> {
        *self.old.lock().expect("old") = Some(self.fixture.primary()?);
        Ok(self.fixture.cut_replication()?)
    }

    fn wait_promoted(&self, within: Duration) -> anyhow::Result<()> {
        let old = self.old.lock().expect("old").expect("cut first");
        self.fixture.wait_promoted(old, within)?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_failover_mid_run_loses_only_writes_acknowledged_during_the_cut() {
    let fixture = RedisSentinel::start().expect("sentinel fixture");
    let url = fixture.url();
    let dep = Arc::new(Sentinel {
        fixture,
        old: Mutex::new(None),
    });
    let books = failover::run("sentinel", url, "default", dep).await;
    assert!(books.promotion < Duration::from_secs(15), "{books:?}");
}
