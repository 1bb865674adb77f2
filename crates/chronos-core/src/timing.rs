//! How long tasks ran and waited, per kind and per minute, in bounded log-scale buckets: what
//! the workers add up and write ([`crate::Maintain::record_timings`]) and what the console
//! charts as p50, p95 and p99 ([`crate::Inspect::timings`]).

use std::collections::BTreeMap;
use std::time::Duration;

/// Buckets per histogram. Bucket `b` holds durations in `(1.25^(b-1), 1.25^b]` ms (bucket 0:
/// up to 1 ms; the last one everything from about 7 days up), so a quantile read from it is at
/// most 25% above the true value.
pub const TIMING_BUCKETS: usize = 96;

/// How long a minute's timings are kept in Redis.
pub const TIMINGS_KEPT: Duration = Duration::from_secs(25 * 3600);

/// Most minutes one [`crate::Inspect::timings`] call reads (a day).
pub const MAX_TIMING_MINUTES: i64 = 1_440;

const RATIO: f64 = 1.25;

/// The bucket of a duration in milliseconds.
pub fn timing_bucket(ms: u64) -> usize {
    if ms <= 1 {
        return 0;
    }
    let b = ((ms as f64).ln() / RATIO.ln()).ceil();
    (b as usize).min(TIMING_BUCKETS - 1)
}

/// The largest duration (ms) bucket `b` holds.
pub fn bucket_upper_ms(b: usize) -> f64 {
    RATIO.powi(i32::try_from(b).unwrap_or(i32::MAX))
}

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimingMeasure {
    /// From the handler's start to its end.
    Run,
    /// From when the task became ready (enqueued, came due, or was retried) to its start.
    Wait,
}

impl TimingMeasure {
    /// The letter that names it in Redis.
    pub fn letter(self) -> char {
        match self {
            TimingMeasure::Run => 'r',
            TimingMeasure::Wait => 'w',
        }
    }

    /// The measure a letter names.
    pub fn from_letter(c: char) -> Option<Self> {
        match c {
            'r' => Some(TimingMeasure::Run),
            'w' => Some(TimingMeasure::Wait),
            _ => None,
        }
    }
}

/// Counts per bucket ([`timing_bucket`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimingHist {
    counts: Vec<u64>,
}

impl TimingHist {
    /// Counts one duration.
    pub fn record(&mut self, ms: u64) {
        self.add(timing_bucket(ms), 1);
    }

    /// Adds `n` to bucket `b` (a bucket past the last counts in the last).
    pub fn add(&mut self, b: usize, n: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; TIMING_BUCKETS];
        }
        let b = b.min(TIMING_BUCKETS - 1);
        self.counts[b] = self.counts[b].saturating_add(n);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &TimingHist) {
        for (b, n) in other.buckets() {
            self.add(b, n);
        }
    }

    /// The non-empty buckets with their counts, lowest first.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| (b, *n))
    }

    /// Durations counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, n| a.saturating_add(*n))
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The `q` quantile (0..=1) in ms: the upper bound of the bucket where it falls (at most 25%
    /// above the true value). None when nothing was counted.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (b, n) in self.buckets() {
            seen = seen.saturating_add(n);
            if seen >= rank {
                return Some(bucket_upper_ms(b));
            }
        }
        self.buckets().last().map(|(b, _)| bucket_upper_ms(b))
    }
}

/// What one worker adds for one kind of a queue in one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimingDelta {
    /// The minute (unix ms of its start, a multiple of 60,000).
    pub minute_ms: i64,
    /// The task kind.
    pub kind: String,
    /// Run times.
    pub run: TimingHist,
    /// Queue waits.
    pub wait: TimingHist,
}

/// One minute of a queue's timings, per kind (run, wait).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimingMinute {
    /// The minute (unix ms of its start).
    pub minute_ms: i64,
    /// Per kind: run times and queue waits.
    pub kinds: BTreeMap<String, (TimingHist, TimingHist)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_bounded_and_quantiles_within_a_quarter() {
        assert_eq!(timing_bucket(0), 0);
        assert_eq!(timing_bucket(1), 0);
        assert_eq!(timing_bucket(u64::MAX), TIMING_BUCKETS - 1);
        for ms in [2u64, 7, 100, 999, 12_345, 3_600_000] {
            let up = bucket_upper_ms(timing_bucket(ms));
            assert!(
                up >= ms as f64 && up <= ms as f64 * 1.25 + 1e-9,
                "{ms}: {up}"
            );
        }
        let mut h = TimingHist::default();
        assert_eq!(h.quantile(0.5), None);
        for ms in 1..=100u64 {
            h.record(ms);
        }
        let p50 = h.quantile(0.5).expect("p50");
        let p99 = h.quantile(0.99).expect("p99");
        assert!((50.0..=62.5).contains(&p50), "{p50}");
        assert!((99.0..=123.75).contains(&p99), "{p99}");
        let mut m = TimingHist::default();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.total(), 200);
        assert_eq!(m.quantile(0.5), h.quantile(0.5));
    }
}
