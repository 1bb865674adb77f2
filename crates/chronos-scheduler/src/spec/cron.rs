//! The calendar search behind a cron spec: the expression matched against the wall clock of its
//! zone, forward and backward from an instant, through clock jumps (DST and the rarer jumps of
//! a whole day) so that both directions agree on the same triggers.

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

const MILLIS_PER_SECOND: i64 = 1_000;

/// The first cron trigger strictly after `after_ms`.
pub(super) fn next_after(cron: &Cron, zone: &TimeZone, after_ms: i64) -> Option<i64> {
    // Triggers fall on whole seconds, so none lies between the start of
    // `after_ms`'s second and `after_ms` itself; croner ignores sub-second
    // digits, and feeding it a whole second keeps its answer independent of
    // them.
    let start = zoned_at(zone, floor_to_second(after_ms)?)?;
    let found = match cron.find_next_occurrence(&start, false) {
        Ok(found) => found,
        // croner gives up when a time of day the pattern names falls inside
        // a clock jump longer than two hours (Pacific/Apia skipped the whole
        // of 2011-12-30). Resuming where the jump lands keeps the schedule
        // alive; the swallowed trigger is dropped, exactly as the backward
        // search below drops it, so both directions agree on the triggers.
        Err(_) => {
            let landing = zone.following(start.timestamp()).next()?.timestamp();
            cron.find_next_occurrence(&landing.to_zoned(zone.clone()), true)
                .ok()?
        }
    };
    Some(found.timestamp().as_millisecond()).filter(|&t| t > after_ms)
}

/// The latest cron trigger at or before `at_ms`.
pub(super) fn last_at_or_before(cron: &Cron, zone: &TimeZone, at_ms: i64) -> Option<i64> {
    let start = zoned_at(zone, floor_to_second(at_ms)?)?;
    let found = match cron.find_previous_occurrence(&start, true) {
        Ok(found) => found,
        // The mirror image of the forward case: resume just before the jump.
        Err(_) => {
            let landing = zone.preceding(start.timestamp()).next()?.timestamp();
            let before_jump = floor_to_second(landing.as_millisecond().checked_sub(1)?)?;
            cron.find_previous_occurrence(&zoned_at(zone, before_jump)?, true)
                .ok()?
        }
    };
    Some(found.timestamp().as_millisecond()).filter(|&t| t <= at_ms)
}

/// The start of the second `ms` falls in.
fn floor_to_second(ms: i64) -> Option<i64> {
    ms.div_euclid(MILLIS_PER_SECOND)
        .checked_mul(MILLIS_PER_SECOND)
}

/// The instant `ms` seen in `zone`. Building it from the timestamp (not
/// from a wall clock time) pins which pass of a repeated hour it is on,
/// which croner needs to neither skip nor repeat the second pass.
fn zoned_at(zone: &TimeZone, ms: i64) -> Option<Zoned> {
    Timestamp::from_millisecond(ms)
        .ok()
        .map(|ts| ts.to_zoned(zone.clone()))
}
