//! Rate and concurrency limits, counted by the store for the whole cluster.

use std::future::Future;
use std::time::Duration;

use crate::{Admission, BrokerError, KeyRate, LeaseId, PermitLimit, Permits, QueueName};

/// Rate limits and concurrency limits, counted by the broker for the whole cluster. The worker
/// calls these only for queues that have a limit configured: a queue without limits costs
/// nothing more.
///
/// No method has a default body: a store without limits answers [`BrokerError::Unsupported`]
/// in each, and a worker that configures a limit over it then fetches nothing from that queue
/// and logs why (a limit is never silently ignored); a wrapper forwards them
/// ([`crate::forward!`]). Implemented for `&T`, `Arc<T>` and `Box<T>` when `T`
/// has it.
///
/// Every call is safe to re-send (the client re-sends commands in flight when a connection
/// drops): a grant is answered again from the holder's receipt, a give-back returns nothing
/// twice, and an admission counts each delivery once.
pub trait Throttle: Send + Sync {
    /// Asks for up to `want` starts of `queue` under `limit`, for `holder` (the consumer name:
    /// one call at a time per holder and queue). Grants the most that every limit allows now,
    /// possibly zero with a wait.
    fn acquire_permits(
        &self,
        queue: &QueueName,
        holder: &str,
        want: usize,
        limit: &PermitLimit,
    ) -> impl Future<Output = Result<Permits, BrokerError>> + Send;

    /// Gives back `unused` starts of `holder`'s last grant `grant` (it started fewer tasks than
    /// granted; a start whose time has passed is not given back), and releases concurrency
    /// `tokens` (unused ones, and those of tasks that ended). `limit` is the one the grant was
    /// made under. Returns the starts given back.
    fn return_permits(
        &self,
        queue: &QueueName,
        holder: &str,
        limit: &PermitLimit,
        grant: Option<(&str, usize)>,
        tokens: &[String],
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Keeps the concurrency `tokens` of tasks still held alive for another `ttl` (with the
    /// lease heartbeat). A token that already expired is not brought back. Returns how many
    /// were kept.
    fn keep_permits(
        &self,
        queue: &QueueName,
        tokens: &[String],
        ttl: Duration,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send;

    /// Checks fetched, not yet started deliveries, each with its rate key, against `limit` in
    /// one atomic step: a delivery whose key has room takes a start from it, one whose key is
    /// full is moved to the queue's scheduled set until its key has room again (no attempt
    /// spent, no error recorded). One answer per delivery, in order.
    ///
    /// A delivery whose key is blocked by a handler ([`End::BackedOff`](crate::End::BackedOff)
    /// with [`BackoffScope::Key`](crate::BackoffScope::Key)) is deferred the same way to the
    /// block's end plus a jitter, whatever room its key has. A `limit` with a `rate` of 0 checks
    /// those blocks only (a queue without a per-key rate whose fetch reported
    /// [`Fetched::key_blocks`](crate::Fetched::key_blocks)).
    ///
    /// A delivery whose rate key is not a valid key (one written by an older producer, or by
    /// hand, that bypassed enqueue's check) is answered [`Admission::Run`] without counting:
    /// it runs unkeyed, and never fails the deliveries checked with it.
    fn admit(
        &self,
        queue: &QueueName,
        deliveries: &[(LeaseId, String)],
        limit: &KeyRate,
    ) -> impl Future<Output = Result<Vec<Admission>, BrokerError>> + Send;
}
