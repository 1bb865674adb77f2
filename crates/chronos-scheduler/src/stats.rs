//! What one scheduler instance counts: atomics the loops bump, read back as a snapshot.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters of one scheduler instance since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Whether this instance leads now.
    pub is_leader: bool,
    /// Its epoch while leading (0 when following).
    pub epoch: u64,
    /// Times it became leader.
    pub elections_won: u64,
    /// Triggers it enqueued.
    pub fired: u64,
    /// Triggers its misfire policies skipped (catch-up after a gap, or a backlog after a clock
    /// jump or suspend), plus triggers skipped because their deadline had passed.
    pub missed: u64,
    /// Triggers it found already fired, or skipped by the overlap policy or a held unique lock.
    pub suppressed: u64,
    /// Fire calls it made (one round trip each, for any number of triggers of one queue).
    pub fire_calls: u64,
}

/// The live counters behind [`SchedulerStats`], shared by the loops that count.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Whether this instance leads now.
    pub(crate) is_leader: AtomicBool,
    /// Its epoch while leading (0 when following).
    pub(crate) epoch: AtomicU64,
    /// Times it became leader.
    pub(crate) elections_won: AtomicU64,
    /// Triggers it enqueued.
    pub(crate) fired: AtomicU64,
    /// Triggers skipped as missed.
    pub(crate) missed: AtomicU64,
    /// Triggers suppressed (duplicate, overlap, unique lock).
    pub(crate) suppressed: AtomicU64,
    /// Fire calls made.
    pub(crate) fire_calls: AtomicU64,
}

impl Counters {
    /// The counters as they are now. Leadership is read with `SeqCst`, as it is written, so a
    /// caller that saw a term end never reads it as still leading.
    pub(crate) fn snapshot(&self) -> SchedulerStats {
        SchedulerStats {
            is_leader: self.is_leader.load(Ordering::SeqCst),
            epoch: self.epoch.load(Ordering::SeqCst),
            elections_won: self.elections_won.load(Ordering::Relaxed),
            fired: self.fired.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
            suppressed: self.suppressed.load(Ordering::Relaxed),
            fire_calls: self.fire_calls.load(Ordering::Relaxed),
        }
    }
}
