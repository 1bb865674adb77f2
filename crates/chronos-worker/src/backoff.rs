//! The growing wait between tries of a call that keeps failing, so that a Redis outage costs a
//! few calls per second per loop rather than a busy loop, while a short blip costs little.

use std::time::Duration;

/// Waits of `initial`, then `factor` times longer each try, never longer than `max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// The first wait, and the wait after [`Backoff::reset`].
    initial: Duration,
    /// The longest wait.
    max: Duration,
    /// How much longer each wait is than the one before.
    factor: u32,
    /// The wait [`Backoff::next`] returns next.
    current: Duration,
}

impl Backoff {
    /// Waits from `initial`, doubling up to `max`.
    pub(crate) const fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            factor: 2,
            current: initial,
        }
    }

    /// The same, growing `factor` times per try instead of twice.
    pub(crate) const fn growing(self, factor: u32) -> Self {
        Self { factor, ..self }
    }

    /// The wait before the next try; the one after it is longer.
    pub(crate) fn next(&mut self) -> Duration {
        let wait = self.current;
        self.current = self.current.saturating_mul(self.factor).min(self.max);
        wait
    }

    /// Back to the first wait (the call succeeded).
    pub(crate) fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_max_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let waits: Vec<u128> = (0..7).map(|_| b.next().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 2000, 2000]);
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(100));
    }

    #[test]
    fn grows_by_its_factor() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400)).growing(4);
        let waits: Vec<u128> = (0..3).map(|_| b.next().as_millis()).collect();
        assert_eq!(waits, [100, 400, 400]);
    }
}
