//! What the scheduler's test files share.

use chronos_broker::RedisBroker;

/// A broker on the shared test Redis, in namespace `ns`, so tests running at once do not see
/// each other's keys.
pub(crate) async fn broker(ns: &str) -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis");
    RedisBroker::builder(url)
        .namespace(ns)
        .connect()
        .await
        .expect("connect")
}
