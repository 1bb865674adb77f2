//! What cron expressions do across daylight-saving changes, as the scheduler fires them
//! (`Spec::upcoming` walks the same search the leader does). The crate docs state these rules;
//! each is pinned here for a fixed time of day and for stepped expressions, in Europe/Berlin
//! (2025-03-30 02:00 CET -> 03:00 CEST; 2025-10-26 03:00 CEST -> 02:00 CET) and
//! America/New_York (2025-03-09 02:00 EST -> 03:00 EDT; 2025-11-02 02:00 EDT -> 01:00 EST).

use std::time::{Duration, SystemTime};

use chronos_broker::time::OffsetDateTime;
use chronos_scheduler::Spec;

/// The next `n` triggers after `from` (RFC 3339), each as `YYYY-MM-DDTHH:MM+HH` at its zone's
/// offset.
fn next(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let from: jiff::Timestamp = from.parse().expect("instant");
    let from = SystemTime::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(from.as_millisecond()).expect("after 1970"));
    Spec::cron(expr, zone)
        .expect("valid cron")
        .upcoming(from, n)
        .iter()
        .map(hm)
        .collect()
}

fn hm(t: &OffsetDateTime) -> String {
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}{:+03}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.offset().whole_hours()
    )
}

#[test]
fn fixed_time_in_the_spring_gap_fires_once_at_the_end_of_the_gap() {
    assert_eq!(
        next(
            "30 2 * * *",
            "Europe/Berlin",
            "2025-03-29T12:00:00+01:00",
            3
        ),
        [
            "2025-03-30T03:00+02",
            "2025-03-31T02:30+02",
            "2025-04-01T02:30+02"
        ]
    );
}

#[test]
fn fixed_time_in_the_repeated_hour_fires_once_on_the_first_pass() {
    assert_eq!(
        next(
            "30 2 * * *",
            "Europe/Berlin",
            "2025-10-25T12:00:00+02:00",
            2
        ),
        ["2025-10-26T02:30+02", "2025-10-27T02:30+01"]
    );
}

#[test]
fn minute_step_skips_the_spring_gap_without_firing_at_its_end() {
    // 02:00 and 02:30 do not exist; nothing stands in for them at 03:00 beyond the 03:00
    // slot the expression names anyway.
    assert_eq!(
        next(
            "*/30 * * * *",
            "Europe/Berlin",
            "2025-03-30T01:15:00+01:00",
            3
        ),
        [
            "2025-03-30T01:30+01",
            "2025-03-30T03:00+02",
            "2025-03-30T03:30+02"
        ]
    );
    assert_eq!(
        next(
            "*/30 * * * *",
            "America/New_York",
            "2025-03-09T01:15:00-05:00",
            3
        ),
        [
            "2025-03-09T01:30-05",
            "2025-03-09T03:00-04",
            "2025-03-09T03:30-04"
        ]
    );
}

#[test]
fn minute_step_fires_on_both_passes_of_the_repeated_hour() {
    assert_eq!(
        next(
            "*/30 * * * *",
            "Europe/Berlin",
            "2025-10-26T01:45:00+02:00",
            5
        ),
        [
            "2025-10-26T02:00+02",
            "2025-10-26T02:30+02",
            "2025-10-26T02:00+01",
            "2025-10-26T02:30+01",
            "2025-10-26T03:00+01"
        ]
    );
}

#[test]
fn hour_step_whose_slot_falls_in_the_spring_gap_skips_it() {
    // 02:00 does not exist; unlike `0 2 * * *`, nothing fires at 03:00 for it.
    assert_eq!(
        next(
            "0 */2 * * *",
            "Europe/Berlin",
            "2025-03-29T23:30:00+01:00",
            3
        ),
        [
            "2025-03-30T00:00+01",
            "2025-03-30T04:00+02",
            "2025-03-30T06:00+02"
        ]
    );
    assert_eq!(
        next(
            "0 */2 * * *",
            "America/New_York",
            "2025-03-08T23:30:00-05:00",
            3
        ),
        [
            "2025-03-09T00:00-05",
            "2025-03-09T04:00-04",
            "2025-03-09T06:00-04"
        ]
    );
}

#[test]
fn hour_list_or_range_counts_as_stepping_not_as_a_fixed_time() {
    assert_eq!(
        next(
            "30 2,14 * * *",
            "Europe/Berlin",
            "2025-03-29T20:00:00+01:00",
            2
        ),
        ["2025-03-30T14:30+02", "2025-03-31T02:30+02"]
    );
    assert_eq!(
        next(
            "30 2,14 * * *",
            "Europe/Berlin",
            "2025-10-26T00:00:00+02:00",
            3
        ),
        [
            "2025-10-26T02:30+02",
            "2025-10-26T02:30+01",
            "2025-10-26T14:30+01"
        ]
    );
    assert_eq!(
        next(
            "0 1-3 * * *",
            "America/New_York",
            "2025-11-02T00:30:00-04:00",
            4
        ),
        [
            "2025-11-02T01:00-04",
            "2025-11-02T01:00-05",
            "2025-11-02T02:00-05",
            "2025-11-02T03:00-05"
        ]
    );
}

#[test]
fn hour_step_whose_slot_falls_in_the_repeated_hour_fires_on_both_passes() {
    assert_eq!(
        next(
            "0 */2 * * *",
            "Europe/Berlin",
            "2025-10-26T01:30:00+02:00",
            3
        ),
        [
            "2025-10-26T02:00+02",
            "2025-10-26T02:00+01",
            "2025-10-26T04:00+01"
        ]
    );
}
