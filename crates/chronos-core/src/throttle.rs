//! Rate limits and cluster-wide concurrency per queue, and rate limits per rate key: what a
//! worker asks of its broker before it starts tasks of a limited queue.
//!
//! The limits are the worker's configuration, passed with every call: the broker keeps only the
//! counts (in Redis, so every worker process of the cluster shares them).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{BrokerError, LeaseId, QueueName};

/// The limits of one queue that [`Throttle::acquire_permits`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermitLimit {
    /// At most this many starts per period, cluster-wide (None: no rate limit): starts are
    /// spaced `period / n` apart by the broker's clock (a generic cell rate algorithm), so any
    /// window of one period holds at most `n + burst` grants.
    pub rate: Option<(u32, Duration)>,
    /// Starts of the rate that may be granted at once (at least 1): larger bursts cost fewer
    /// calls per start and allow more grants in the worst window.
    pub burst: u32,
    /// At most this many tasks held at once, cluster-wide (None: no limit). Each granted start
    /// holds a token until it is given back or expires.
    pub concurrency: Option<u32>,
    /// How long a concurrency token lives unless kept ([`Throttle::keep_permits`]): a worker
    /// that dies without giving its tokens back frees them after this (use the lease's
    /// recovery idle time, so they come back when its tasks would be reclaimed).
    pub token_ttl: Duration,
    /// The wait to suggest when only the concurrency limit is full (another worker's task may
    /// end any moment, so the caller looks again after this).
    pub poll: Duration,
}

/// What [`Throttle::acquire_permits`] granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permits {
    /// Starts granted now (at most the number asked for); zero when a limit is full.
    pub granted: usize,
    /// When nothing was granted: how long to wait before asking again (until the rate has room
    /// for the next start, or [`PermitLimit::poll`] when only the concurrency limit is full).
    pub wait: Duration,
    /// One concurrency token per start granted (empty without a concurrency limit): hold one
    /// per task until it ends, then give it back with [`Throttle::return_permits`].
    pub tokens: Vec<String>,
    /// Names this grant for [`Throttle::return_permits`].
    pub grant: String,
}

/// A per-key rate limit: at most `rate` starts per `period` for each rate key, cluster-wide,
/// in fixed windows aligned to the period by the broker's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRate {
    /// Starts per period per key.
    pub rate: u32,
    /// The period.
    pub period: Duration,
}

/// What [`Throttle::admit`] decided for one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Its key had room and the start is counted: run it.
    Run,
    /// Its key is full: the delivery left the stream for the queue's scheduled set, due at
    /// this time (unix ms, broker clock), with its attempt count unchanged. Do not run it.
    Deferred {
        /// When it is due again.
        due_ms: i64,
    },
    /// The delivery is no longer current (task deleted or settled): do not run it.
    Gone,
}

/// Rate limits and concurrency limits, counted by the broker for the whole cluster. The worker
/// calls these only for queues that have a limit configured: a queue without limits costs
/// nothing more.
///
/// Every method has a default that fails with [`BrokerError::Unsupported`], so a wrapper around
/// a broker (metrics, fault injection) that does not limit writes `impl Throttle for W {}`; a
/// worker that configures a limit over it then fetches nothing from that queue and logs why
/// (a limit is never silently ignored). Implemented for `&T`, `Arc<T>` and `Box<T>` when `T`
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
    ) -> impl Future<Output = Result<Permits, BrokerError>> + Send {
        let _ = (queue, holder, want, limit);
        async { Err(BrokerError::Unsupported("rate limits")) }
    }

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
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        let _ = (queue, holder, limit, grant, tokens);
        async { Err(BrokerError::Unsupported("rate limits")) }
    }

    /// Keeps the concurrency `tokens` of tasks still held alive for another `ttl` (with the
    /// lease heartbeat). A token that already expired is not brought back. Returns how many
    /// were kept.
    fn keep_permits(
        &self,
        queue: &QueueName,
        tokens: &[String],
        ttl: Duration,
    ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
        let _ = (queue, tokens, ttl);
        async { Err(BrokerError::Unsupported("rate limits")) }
    }

    /// Checks fetched, not yet started deliveries, each with its rate key, against `limit` in
    /// one atomic step: a delivery whose key has room takes a start from it, one whose key is
    /// full is moved to the queue's scheduled set until its key has room again (no attempt
    /// spent, no error recorded). One answer per delivery, in order.
    ///
    /// A delivery whose rate key is not a valid key (one written by an older producer, or by
    /// hand, that bypassed enqueue's check) is answered [`Admission::Run`] without counting:
    /// it runs unkeyed, and never fails the deliveries checked with it.
    fn admit(
        &self,
        queue: &QueueName,
        deliveries: &[(LeaseId, String)],
        limit: &KeyRate,
    ) -> impl Future<Output = Result<Vec<Admission>, BrokerError>> + Send {
        let _ = (queue, deliveries, limit);
        async { Err(BrokerError::Unsupported("rate limits")) }
    }
}

macro_rules! forward_throttle {
    ($($ptr:ty),*) => {$(
        impl<T: Throttle + ?Sized> Throttle for $ptr {
            fn acquire_permits(
                &self,
                queue: &QueueName,
                holder: &str,
                want: usize,
                limit: &PermitLimit,
            ) -> impl Future<Output = Result<Permits, BrokerError>> + Send {
                (**self).acquire_permits(queue, holder, want, limit)
            }

            fn return_permits(
                &self,
                queue: &QueueName,
                holder: &str,
                limit: &PermitLimit,
                grant: Option<(&str, usize)>,
                tokens: &[String],
            ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
                (**self).return_permits(queue, holder, limit, grant, tokens)
            }

            fn keep_permits(
                &self,
                queue: &QueueName,
                tokens: &[String],
                ttl: Duration,
            ) -> impl Future<Output = Result<u64, BrokerError>> + Send {
                (**self).keep_permits(queue, tokens, ttl)
            }

            fn admit(
                &self,
                queue: &QueueName,
                deliveries: &[(LeaseId, String)],
                limit: &KeyRate,
            ) -> impl Future<Output = Result<Vec<Admission>, BrokerError>> + Send {
                (**self).admit(queue, deliveries, limit)
            }
        }
    )*};
}

forward_throttle!(&T, Arc<T>, Box<T>);
