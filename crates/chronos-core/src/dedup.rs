//! Deduplication of enqueues: a lock per key that decides what a second enqueue of "the same"
//! task does while the first one lives.

use std::time::Duration;

use crate::BrokerError;

/// How long a deduplication lock lives when the caller gives no TTL: long enough for any task
/// that is started within the hour; the release point usually frees it much earlier.
pub const DEFAULT_DEDUP_TTL: Duration = Duration::from_secs(3600);

/// Longest caller-chosen deduplication key, in bytes.
pub const MAX_DEDUP_KEY_LEN: usize = 256;

/// What a second enqueue does while a first one holds the lock of the same key
/// ([`Dedup::mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DedupMode {
    /// Write nothing; the enqueue answers [`EnqueueOutcome::Duplicate`] with the holder's id.
    /// The lock lives until its release point ([`Release::OnFinish`] unless said otherwise) or
    /// its TTL.
    Reject,
    /// The first enqueue wins for the whole `window`, even after its task finished: the lock
    /// lives exactly `window` and nothing releases it earlier ([`Release::AtExpiry`]).
    Throttle {
        /// How long the first enqueue blocks the others.
        window: Duration,
    },
    /// Trailing edge: the task runs `delay` after the last enqueue of its key, with the last
    /// payload. A later enqueue while the task waits replaces its payload and pushes its run
    /// time to `now + delay`, but never past the first enqueue + `max_wait`, so a key enqueued
    /// without pause still runs at least every `max_wait` ([`EnqueueOutcome::Extended`]).
    Debounce {
        /// The quiet time after the last enqueue.
        delay: Duration,
        /// The longest a task waits after the first enqueue of its run.
        max_wait: Duration,
    },
    /// The latest payload wins while the task has not started: a later enqueue replaces the
    /// waiting task's payload and keeps its place and run time ([`EnqueueOutcome::Replaced`]).
    Replace,
}

/// When a deduplication lock is let go before its TTL runs out ([`Dedup::release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// When the task starts its first attempt: from then on the key is free for a new task.
    /// The default of [`DedupMode::Replace`] and [`DedupMode::Debounce`].
    OnStart,
    /// When the task ends: succeeded, dead-lettered, or deleted by an operator; retries keep
    /// it. The default of [`DedupMode::Reject`].
    OnFinish,
    /// Only when the TTL runs out (or an operator releases it). Always the case for
    /// [`DedupMode::Throttle`].
    AtExpiry,
}

/// What an enqueue did ([`crate::TaskInfo::outcome`]). The [`crate::TaskInfo`] always names the
/// task that will run for this enqueue: the new one, or the one already holding the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EnqueueOutcome {
    /// A new task was written (or, for an explicit id, the same task already was).
    #[default]
    Created,
    /// Nothing was written: the task named holds the key ([`DedupMode::Reject`],
    /// [`DedupMode::Throttle`], or a holder that already started).
    Duplicate,
    /// The waiting task named now carries this enqueue's payload ([`DedupMode::Replace`]).
    Replaced,
    /// The waiting task named now carries this enqueue's payload and its run time moved
    /// ([`DedupMode::Debounce`]).
    Extended,
}

/// Deduplication of one enqueue ([`crate::EnqueueOptions::dedup`]): a key, a lock TTL, a mode
/// and a release point. The lock is written in the same atomic step as the task, so two
/// producers racing on one key always end with one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedup {
    key: Option<String>,
    ttl: Option<Duration>,
    mode: DedupMode,
    release: Option<Release>,
}

impl Dedup {
    /// Deduplicate by a key of the caller's choosing (1 to [`MAX_DEDUP_KEY_LEN`] bytes, no
    /// whitespace or control characters), shared by every kind in the queue that uses it.
    pub fn key(key: impl Into<String>) -> Self {
        Self {
            key: Some(key.into()),
            ..Self::payload()
        }
    }

    /// Deduplicate by the task's kind and payload (what [`crate::EnqueueOptions::unique`]
    /// locks).
    pub fn payload() -> Self {
        Self {
            key: None,
            ttl: None,
            mode: DedupMode::Reject,
            release: None,
        }
    }

    /// The most the lock lives (default [`DEFAULT_DEDUP_TTL`]; a throttle's lock lives its
    /// window instead, and a debounce's at least its `max_wait`).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// What a second enqueue does (default [`DedupMode::Reject`]).
    pub fn mode(mut self, mode: DedupMode) -> Self {
        self.mode = mode;
        self
    }

    /// When the lock is let go (defaults: see [`Release`]).
    pub fn release(mut self, release: Release) -> Self {
        self.release = Some(release);
        self
    }

    /// The caller's key, None when the payload is the key.
    pub fn caller_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The mode.
    pub fn dedup_mode(&self) -> DedupMode {
        self.mode
    }

    /// The release point in force: the one asked for, else the mode's default.
    pub fn release_point(&self) -> Release {
        match (self.mode, self.release) {
            (DedupMode::Throttle { .. }, _) => Release::AtExpiry,
            (_, Some(r)) => r,
            (DedupMode::Reject, None) => Release::OnFinish,
            (_, None) => Release::OnStart,
        }
    }

    /// The lock's TTL in force: a throttle's window; at least a debounce's `max_wait` and
    /// `delay`, so the lock outlives the wait it guards.
    pub fn lock_ttl(&self) -> Duration {
        let ttl = self.ttl.unwrap_or(DEFAULT_DEDUP_TTL);
        match self.mode {
            DedupMode::Throttle { window } => window,
            DedupMode::Debounce { delay, max_wait } => ttl.max(max_wait).max(delay),
            _ => ttl,
        }
    }

    /// Checks the key and the durations: a typed [`BrokerError::InvalidOption`] for an empty or
    /// oversized key, a zero TTL or window, a zero debounce delay, a `max_wait` shorter than
    /// the delay, or a throttle asked to release before its window ends.
    pub(crate) fn check(&self) -> Result<(), BrokerError> {
        let bad = |why: String| Err(BrokerError::InvalidOption(why));
        if let Some(k) = &self.key {
            if k.is_empty()
                || k.len() > MAX_DEDUP_KEY_LEN
                || k.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return bad(format!(
                    "dedup key {k:?} must be 1 to {MAX_DEDUP_KEY_LEN} bytes without whitespace \
                     or control characters"
                ));
            }
        }
        if self.ttl.is_some_and(|d| d.as_millis() == 0) {
            return bad("dedup TTL must be at least 1 ms".into());
        }
        match self.mode {
            DedupMode::Throttle { window } if window.as_millis() == 0 => {
                bad("throttle window must be at least 1 ms".into())
            }
            DedupMode::Throttle { .. } if self.release.is_some_and(|r| r != Release::AtExpiry) => {
                bad("a throttle's lock lives its whole window: release must be AtExpiry".into())
            }
            DedupMode::Debounce { delay, max_wait } if delay.as_millis() == 0 => bad(format!(
                "debounce delay must be at least 1 ms (max_wait {max_wait:?})"
            )),
            DedupMode::Debounce { delay, max_wait } if max_wait < delay => bad(format!(
                "debounce max_wait ({max_wait:?}) must be at least its delay ({delay:?})"
            )),
            _ => Ok(()),
        }
    }

    /// The lock's name inside the queue: `k:<caller key>`, or the payload hash given.
    pub(crate) fn lock_name(&self, payload_hash: impl FnOnce() -> String) -> String {
        match &self.key {
            Some(k) => format!("{LOCK_KEY_PREFIX}{k}"),
            None => payload_hash(),
        }
    }
}

/// What starts the lock name of a caller-chosen key (a payload hash is 64 hex digits, so the
/// two never collide).
pub const LOCK_KEY_PREFIX: &str = "k:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_mode() {
        let ms = Duration::from_millis;
        assert_eq!(Dedup::payload().release_point(), Release::OnFinish);
        let replace = Dedup::key("a").mode(DedupMode::Replace);
        assert_eq!(replace.release_point(), Release::OnStart);
        let throttle = Dedup::key("a").mode(DedupMode::Throttle { window: ms(50) });
        assert_eq!(throttle.release_point(), Release::AtExpiry);
        assert_eq!(throttle.lock_ttl(), ms(50));
        let debounce = Dedup::key("a").ttl(ms(10)).mode(DedupMode::Debounce {
            delay: ms(20),
            max_wait: ms(300),
        });
        assert_eq!(debounce.lock_ttl(), ms(300));
        assert_eq!(Dedup::key("a").lock_name(|| "h".into()), "k:a");
        assert_eq!(Dedup::payload().lock_name(|| "h".into()), "h");
    }

    #[test]
    fn bad_options_are_typed_errors() {
        let ms = Duration::from_millis;
        for d in [
            Dedup::key(""),
            Dedup::key("a b"),
            Dedup::key("x".repeat(MAX_DEDUP_KEY_LEN + 1)),
            Dedup::key("a").ttl(ms(0)),
            Dedup::key("a").mode(DedupMode::Throttle { window: ms(0) }),
            Dedup::key("a")
                .mode(DedupMode::Throttle { window: ms(5) })
                .release(Release::OnStart),
            Dedup::key("a").mode(DedupMode::Debounce {
                delay: ms(0),
                max_wait: ms(5),
            }),
            Dedup::key("a").mode(DedupMode::Debounce {
                delay: ms(10),
                max_wait: ms(5),
            }),
        ] {
            assert!(
                matches!(d.check(), Err(BrokerError::InvalidOption(_))),
                "{d:?}"
            );
        }
        assert!(Dedup::key("reindex:user:42").check().is_ok());
    }
}

/// A deduplication lock held in a queue, as an operator lists it (`chronos dedup ls`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DedupLock {
    /// The key as a release takes it: the caller's key ([`Dedup::key`]), or `#<hash>` for a
    /// lock on the kind and payload ([`Dedup::payload`] and `EnqueueOptions::unique`).
    pub key: String,
    /// The id of the task that holds it (what a duplicate enqueue answers).
    pub holder: String,
    /// The holder's state, None when its record is gone (a throttle window or a lock released
    /// only at expiry outlives its task).
    pub holder_state: Option<crate::TaskState>,
    /// Time left before the lock expires on its own (ms); None for a lock without a TTL.
    pub expires_in_ms: Option<u64>,
}
