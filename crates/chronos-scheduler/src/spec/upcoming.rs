//! A schedule's next triggers from a chosen instant, for tests and previews.

use chronos_core::time::{OffsetDateTime, UtcOffset};
use chronos_core::Timestamp;

use super::Spec;

impl Spec {
    /// The next `n` triggers strictly after `from` (a `time::OffsetDateTime`, a `SystemTime` or
    /// a [`Timestamp`]), ascending, each at the UTC offset its zone has at that instant (UTC for
    /// intervals), so a cron trigger reads as the wall clock it fired for.
    ///
    /// These are exactly the instants the scheduler fires: it walks the same "first trigger
    /// after" search from one trigger to the next, and uses each as the trigger's dedup key. So
    /// the DST rules of [`Spec::cron`] show here as they happen: `30 2 * * *` in
    /// `Europe/Berlin` fires at 03:00 +02:00 on the spring-forward day (02:30 does not exist),
    /// and once, at 02:30 +02:00 (the first pass), on the fall-back day.
    ///
    /// Fewer than `n` come back only at the end of representable time. Cost: arithmetic for
    /// intervals, one calendar search per trigger for cron specs.
    ///
    /// ```
    /// use chronos_scheduler::Spec;
    /// use std::time::{Duration, SystemTime};
    ///
    /// let every_5m = Spec::interval(Duration::from_secs(300)).unwrap();
    /// let from = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_123);
    /// let next = every_5m.upcoming(from, 2);
    /// // Aligned to the epoch, not to `from`.
    /// assert_eq!(next[0].unix_timestamp(), 1_000_000_200);
    /// assert_eq!(next[1].unix_timestamp(), 1_000_000_500);
    /// ```
    pub fn upcoming(&self, from: impl Into<Timestamp>, n: usize) -> Vec<OffsetDateTime> {
        let mut out = Vec::with_capacity(n.min(1024));
        let mut cursor = from.into().unix_ms();
        while out.len() < n {
            let Some(next) = self.next_after(cursor) else {
                break;
            };
            let Some(at) = self.at_zone_offset(next) else {
                break;
            };
            out.push(at);
            cursor = next;
        }
        out
    }

    /// The instant `ms` at the offset of the spec's zone.
    fn at_zone_offset(&self, ms: i64) -> Option<OffsetDateTime> {
        let utc = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
        let offset = match self {
            Spec::Interval { .. } => UtcOffset::UTC,
            Spec::Cron { zone, .. } => {
                let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
                UtcOffset::from_whole_seconds(zone.to_offset(ts).seconds()).ok()?
            }
        };
        utc.checked_to_offset(offset)
    }
}
