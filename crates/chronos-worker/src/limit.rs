//! Limits on how fast and how many tasks of a queue start across the whole cluster.

use std::time::Duration;

use chronos_core::{KeyRate, PermitLimit};

use crate::WorkerError;

/// Limits of one queue, enforced cluster-wide (the counts live in Redis, so every worker
/// process of the cluster shares them). Set with [`crate::ServerConfig::limit`].
///
/// Give every server that consumes the queue the same limits: each enforces what it was given,
/// so a server with laxer (or no) limits takes more than the others leave.
///
/// * [`QueueLimit::rate`]: at most `n` task starts per `period` across every worker, spaced
///   evenly by Redis' clock (a generic cell rate algorithm: one start every `period / n`, with
///   up to [`QueueLimit::burst`] at once), so any window of one period, wherever it begins,
///   holds at most `n + burst` starts (`n + 1` with the default burst below 200 per period). A worker asks Redis for permits before it fetches,
///   fetches at most what it was granted, gives back what it could not use, and when none are
///   left sleeps until the next start is due (no busy loop). Starts are counted when tasks are
///   fetched to run, so a task that fails and is retried counts again.
/// * [`QueueLimit::concurrency`]: at most `n` tasks of the queue held (fetched to run, or
///   running) at once across every worker. Each holds a permit until its attempt ends; a
///   worker that dies without giving its permits back frees them after `recover_min_idle`,
///   when its tasks would be reclaimed.
/// * [`QueueLimit::per_key_rate`]: at most `n` starts per `period` per rate key
///   ([`chronos_core::EnqueueOptions::rate_key`]). A fetched task whose key is full is not
///   run: it goes to the queue's scheduled set until its key's next window, without spending
///   an attempt and without an error, while tasks of other keys keep running. Tasks without a
///   key are not limited by it.
///
/// A queue without a limit runs exactly as before: no Redis call is added for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLimit {
    pub(crate) rate: Option<(u32, Duration)>,
    pub(crate) burst: Option<u32>,
    pub(crate) concurrency: Option<u32>,
    pub(crate) per_key: Option<(u32, Duration)>,
}

impl QueueLimit {
    /// No limit yet; add them with the methods below.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` task starts per `period` across the cluster.
    pub fn rate(mut self, n: u32, period: Duration) -> Self {
        self.rate = Some((n, period));
        self
    }

    /// Up to `n` starts of the rate may be granted at once (default: 1 per 100 of the rate, at
    /// least 1, so a window of one period holds at most the rate plus about 1 %, or plus 1). A
    /// larger burst lets a worker fetch more tasks per call, at the price of more starts in the
    /// worst window.
    pub fn burst(mut self, n: u32) -> Self {
        self.burst = Some(n);
        self
    }

    /// At most `n` tasks held at once across the cluster.
    pub fn concurrency(mut self, n: u32) -> Self {
        self.concurrency = Some(n);
        self
    }

    /// At most `n` task starts per `period` for each rate key, across the cluster.
    pub fn per_key_rate(mut self, n: u32, period: Duration) -> Self {
        self.per_key = Some((n, period));
        self
    }

    /// True when a queue-wide limit (rate or concurrency) is set: the fetcher asks for permits.
    pub(crate) fn needs_permits(&self) -> bool {
        self.rate.is_some() || self.concurrency.is_some()
    }

    /// The broker's form of the queue-wide limits.
    pub(crate) fn permits(&self, token_ttl: Duration) -> PermitLimit {
        PermitLimit {
            rate: self.rate,
            burst: self
                .burst
                .unwrap_or_else(|| self.rate.map_or(1, |(n, _)| n / 100))
                .max(1),
            concurrency: self.concurrency,
            token_ttl,
            poll: CONCURRENCY_POLL,
        }
    }

    /// The broker's form of the per-key limit.
    pub(crate) fn key_rate(&self) -> Option<KeyRate> {
        self.per_key.map(|(rate, period)| KeyRate { rate, period })
    }

    pub(crate) fn validate(&self, queue: &str) -> Result<(), WorkerError> {
        let bad = |what: &str| {
            Err(WorkerError::InvalidConfig(format!(
                "limit of queue {queue:?}: {what}"
            )))
        };
        for (name, r) in [("rate", self.rate), ("per_key_rate", self.per_key)] {
            if let Some((n, period)) = r {
                if n == 0 {
                    return bad(&format!("{name} must allow at least 1 start"));
                }
                if period < Duration::from_millis(1) {
                    return bad(&format!("{name} period must be at least 1 ms"));
                }
            }
        }
        if self.burst == Some(0) {
            return bad("burst must be at least 1");
        }
        if self.burst.is_some() && self.rate.is_none() {
            return bad("a burst needs a rate");
        }
        if self.concurrency == Some(0) {
            return bad("concurrency must be at least 1");
        }
        if *self == Self::default() {
            return bad("no limit set");
        }
        Ok(())
    }
}

/// How long a fetcher waits before asking again when the queue's concurrency limit is full:
/// another worker's task may end at any moment, and a worker is not told when.
pub(crate) const CONCURRENCY_POLL: Duration = Duration::from_millis(50);
