//! Limits on how fast and how many tasks of a queue start across the whole cluster.

use std::time::Duration;

use chronos_core::{KeyRate, PermitLimit, QueueSettings, Setting};

use crate::WorkerError;

/// Limits of one queue, enforced cluster-wide (the counts live in Redis, so every worker
/// process of the cluster shares them). Set with [`crate::ServerConfig::limit`].
///
/// The configuration is the default; the queue's settings stored in Redis are the cluster's
/// truth ([`chronos_core::QueueSettings`], changed with `chronos queue limits set`, the console's
/// queue page, or [`chronos_core::Settings::change_queue_settings`]). Each stored field
/// overrides the configured one, and a stored `none` lifts a configured limit. A running server
/// reads the stored settings every second and applies a change within about two seconds,
/// without a restart; a stored field removed brings the configured value back. One caveat: a
/// queue that had neither a configured nor a stored limit when its server started keeps the
/// plain, unlimited fetch path (which costs no extra Redis call) until that server restarts;
/// give it a configured limit, or store its settings before starting, to change it live.
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

    /// The limits in force: `config` (this server's, if any) overridden field by field by what
    /// is `stored` in Redis. None when nothing limits the queue. A stored burst without any rate
    /// has nothing to shape and is dropped.
    pub(crate) fn with_stored(config: Option<QueueLimit>, stored: &QueueSettings) -> Option<Self> {
        fn pick<T>(stored: Option<Setting<T>>, config: Option<T>) -> Option<T> {
            match stored {
                None => config,
                Some(Setting::Off) => None,
                Some(Setting::On(v)) => Some(v),
            }
        }
        let c = config.unwrap_or_default();
        let rate = pick(stored.rate.map(rate_pair), c.rate);
        let limit = Self {
            rate,
            burst: stored.burst.or(c.burst).filter(|_| rate.is_some()),
            concurrency: pick(stored.concurrency, c.concurrency),
            per_key: pick(stored.per_key_rate.map(rate_pair), c.per_key),
        };
        (limit != Self::default()).then_some(limit)
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

fn rate_pair(s: Setting<chronos_core::Rate>) -> Setting<(u32, Duration)> {
    match s {
        Setting::Off => Setting::Off,
        Setting::On(r) => Setting::On((r.n, r.period)),
    }
}

/// How long a fetcher waits before asking again when the queue's concurrency limit is full:
/// another worker's task may end at any moment, and a worker is not told when.
pub(crate) const CONCURRENCY_POLL: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;
    use chronos_core::Rate;

    #[test]
    fn stored_fields_override_the_config_one_by_one() {
        let config = QueueLimit::new()
            .rate(10, Duration::from_secs(1))
            .burst(2)
            .concurrency(4);
        let none = QueueSettings::default();
        assert_eq!(QueueLimit::with_stored(Some(config), &none), Some(config));
        assert_eq!(QueueLimit::with_stored(None, &none), None);

        let stored = QueueSettings {
            concurrency: Some(Setting::On(1)),
            rate: Some(Setting::Off),
            ..Default::default()
        };
        let l = QueueLimit::with_stored(Some(config), &stored).expect("limited");
        assert_eq!((l.rate, l.burst, l.concurrency), (None, None, Some(1)));

        let lifted = QueueSettings {
            concurrency: Some(Setting::Off),
            rate: Some(Setting::Off),
            ..Default::default()
        };
        assert_eq!(QueueLimit::with_stored(Some(config), &lifted), None);

        let added = QueueSettings {
            per_key_rate: Some(Setting::On(Rate::new(5, Duration::from_secs(1)))),
            ..Default::default()
        };
        let l = QueueLimit::with_stored(None, &added).expect("limited");
        assert_eq!(l.per_key, Some((5, Duration::from_secs(1))));
    }
}
