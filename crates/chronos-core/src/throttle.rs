//! Rate limits and cluster-wide concurrency per queue, and rate limits per rate key: what a
//! worker asks of its broker before it starts tasks of a limited queue.
//!
//! The limits are the worker's configuration, passed with every call: the broker keeps only the
//! counts (in Redis, so every worker process of the cluster shares them).

use std::time::Duration;

/// The limits of one queue that [`Throttle::acquire_permits`](crate::Throttle::acquire_permits) enforces.
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
    /// How long a concurrency token lives unless kept ([`Throttle::keep_permits`](crate::Throttle::keep_permits)): a worker
    /// that dies without giving its tokens back frees them after this (use the lease's
    /// recovery idle time, so they come back when its tasks would be reclaimed).
    pub token_ttl: Duration,
    /// The wait to suggest when only the concurrency limit is full (another worker's task may
    /// end any moment, so the caller looks again after this).
    pub poll: Duration,
}

/// What [`Throttle::acquire_permits`](crate::Throttle::acquire_permits) granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permits {
    /// Starts granted now (at most the number asked for); zero when a limit is full.
    pub granted: usize,
    /// When nothing was granted: how long to wait before asking again (until the rate has room
    /// for the next start, or [`PermitLimit::poll`] when only the concurrency limit is full).
    pub wait: Duration,
    /// One concurrency token per start granted (empty without a concurrency limit): hold one
    /// per task until it ends, then give it back with [`Throttle::return_permits`](crate::Throttle::return_permits).
    pub tokens: Vec<String>,
    /// Names this grant for [`Throttle::return_permits`](crate::Throttle::return_permits).
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

/// What [`Throttle::admit`](crate::Throttle::admit) decided for one delivery.
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
