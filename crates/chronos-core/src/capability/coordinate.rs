//! Short named locks across the cluster.

use std::future::Future;
use std::time::Duration;

use crate::BrokerError;

/// Cluster coordination: locks and announcements.
pub trait Coordinate: Send + Sync {
    /// Takes `key` for `token` for `ttl` if nobody holds it. True when taken.
    fn try_lock(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Extends the lock if `token` still holds it. False when it does not.
    fn renew_lock(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;

    /// Releases the lock if `token` holds it and publishes `token` on `channel` (when given).
    fn release_lock(
        &self,
        key: &str,
        token: &str,
        channel: Option<&str>,
    ) -> impl Future<Output = Result<bool, BrokerError>> + Send;
}
