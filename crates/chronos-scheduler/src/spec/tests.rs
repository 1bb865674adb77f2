//! Triggers of interval and cron specs: alignment, ranges, DST gaps and repeats, the ends of
//! time.

use super::*;

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// Unix milliseconds of an RFC 3339 instant with an explicit offset.
fn ms(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<Timestamp>()
        .unwrap_or_else(|e| panic!("bad test instant {rfc3339}: {e}"))
        .as_millisecond()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn interval(every: Duration) -> Spec {
    Spec::interval(every).expect("valid interval")
}

fn cron(expr: &str, zone: &str) -> Spec {
    Spec::cron(expr, zone).unwrap_or_else(|e| panic!("{expr} in {zone}: {e}"))
}

/// The triggers reached by feeding each answer of `next_after` back in.
fn chain(spec: &Spec, from_ms: i64, n: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(n);
    let mut at = from_ms;
    for _ in 0..n {
        let next = spec.next_after(at).expect("spec keeps firing");
        assert!(next > at, "next_after({at}) went backwards to {next}");
        out.push(next);
        at = next;
    }
    out
}

#[test]
fn interval_accepts_one_second_and_whole_milliseconds() {
    assert!(Spec::interval(secs(1)).is_ok());
    assert!(Spec::interval(Duration::from_millis(1_500)).is_ok());
    assert!(Spec::interval(secs(7 * 86_400)).is_ok());
}

#[test]
fn interval_below_one_second_is_rejected() {
    for every in [Duration::ZERO, Duration::from_millis(999)] {
        assert_eq!(
            Spec::interval(every).unwrap_err(),
            SpecError::IntervalTooShort { every }
        );
    }
}

#[test]
fn interval_with_sub_millisecond_part_or_beyond_i64_is_rejected() {
    let fractional = Duration::from_micros(1_000_500);
    assert!(matches!(
        Spec::interval(fractional),
        Err(SpecError::InvalidInterval { every, .. }) if every == fractional
    ));
    assert!(matches!(
        Spec::interval(Duration::MAX),
        Err(SpecError::InvalidInterval { .. })
    ));
}

#[test]
fn interval_triggers_are_multiples_of_the_period_since_the_epoch() {
    let spec = interval(secs(5));
    assert_eq!(spec.next_after(0), Some(5 * SECOND));
    assert_eq!(spec.next_after(1), Some(5 * SECOND));
    assert_eq!(spec.next_after(4_999), Some(5 * SECOND));
    // Strictly after: a trigger instant itself is not returned.
    assert_eq!(spec.next_after(5_000), Some(10 * SECOND));
    // Before the epoch the grid continues the same way.
    assert_eq!(spec.next_after(-1), Some(0));
    assert_eq!(spec.next_after(-5_000), Some(0));
    assert_eq!(spec.next_after(-5_001), Some(-5_000));

    let t = ms("2025-06-01T12:34:56.789Z");
    let next = spec.next_after(t).expect("fires");
    assert_eq!(next, ms("2025-06-01T12:35:00Z"));
    assert_eq!(next % 5_000, 0);
}

#[test]
fn interval_alignment_does_not_depend_on_who_asks_or_when() {
    // Two processes starting at different moments agree on every trigger
    // they both see.
    let spec = interval(Duration::from_millis(1_500));
    let a = chain(&spec, ms("2025-01-01T00:00:00.123Z"), 50);
    let b = chain(&spec, ms("2025-01-01T00:00:10.999Z"), 40);
    assert!(a.iter().all(|t| t % 1_500 == 0));
    let overlap: Vec<i64> = a.iter().copied().skip_while(|t| *t < b[0]).collect();
    let n = overlap.len().min(b.len());
    assert!(n > 30, "the two runs share {n} triggers");
    assert_eq!(overlap[..n], b[..n]);
}

#[test]
fn interval_last_at_or_before_includes_the_instant_itself() {
    let spec = interval(secs(60));
    let t = ms("2025-03-01T10:05:00Z");
    assert_eq!(spec.last_at_or_before(t), Some(t));
    assert_eq!(spec.last_at_or_before(t + 59_999), Some(t));
    assert_eq!(spec.last_at_or_before(t - 1), Some(t - MINUTE));
    assert_eq!(spec.last_at_or_before(-1), Some(-MINUTE));
}

#[test]
fn interval_range_queries_agree_with_iteration() {
    let spec = interval(secs(7));
    let after = ms("2025-05-05T05:05:05.555Z");
    let up_to = after + 10 * MINUTE;
    let all = chain(&spec, after, 200)
        .into_iter()
        .filter(|t| *t <= up_to)
        .collect::<Vec<_>>();
    assert_eq!(spec.triggers_between(after, up_to, usize::MAX), all);
    assert_eq!(spec.triggers_between(after, up_to, 3), all[..3].to_vec());
    assert_eq!(
        spec.latest_between(after, up_to, 3),
        all[all.len() - 3..].to_vec()
    );
    assert_eq!(spec.count_between(after, up_to), all.len() as u64);
    // The upper bound is inclusive, the lower bound exclusive.
    let first = all[0];
    assert_eq!(spec.triggers_between(first, first, 10), Vec::<i64>::new());
    assert_eq!(spec.triggers_between(first - 1, first, 10), vec![first]);
    assert_eq!(spec.count_between(first - 1, first), 1);
    assert_eq!(spec.count_between(up_to, after), 0);
}

#[test]
fn interval_counts_a_day_of_one_second_triggers_arithmetically() {
    let spec = interval(secs(1));
    let start = ms("2025-01-01T00:00:00Z");
    let started = std::time::Instant::now();
    assert_eq!(spec.count_between(start, start + DAY), 86_400);
    assert_eq!(
        spec.count_between(i64::MIN, i64::MAX),
        (i64::MAX / 1_000 - i64::MIN.div_euclid(1_000)) as u64
    );
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[test]
fn interval_arithmetic_at_the_ends_of_time_returns_none_instead_of_overflowing() {
    let spec = interval(secs(1));
    assert_eq!(spec.next_after(i64::MAX), None);
    assert_eq!(spec.last_at_or_before(i64::MIN), None);
    assert!(spec.triggers_between(i64::MAX - 10, i64::MAX, 5).is_empty());
}

#[test]
fn interval_built_without_the_constructor_never_divides_by_zero() {
    let spec = Spec::Interval {
        every: Duration::ZERO,
    };
    assert_eq!(spec.next_after(0), None);
    assert_eq!(spec.last_at_or_before(0), None);
    assert_eq!(spec.count_between(0, 1_000), 0);
    assert!(spec.triggers_between(0, 1_000, 10).is_empty());
}

#[test]
fn interval_describes_itself_in_its_largest_exact_unit() {
    assert_eq!(interval(secs(5)).describe(), "every 5s");
    assert_eq!(interval(secs(90)).describe(), "every 90s");
    assert_eq!(interval(secs(120)).describe(), "every 2m");
    assert_eq!(interval(secs(7_200)).describe(), "every 2h");
    assert_eq!(interval(secs(86_400)).describe(), "every 1d");
    assert_eq!(
        interval(Duration::from_millis(1_500)).describe(),
        "every 1500ms"
    );
    assert_eq!(interval(secs(5)).zone_name(), "UTC");
}

#[test]
fn cron_five_fields_fire_at_minute_resolution_in_utc() {
    let spec = cron("*/15 * * * *", "UTC");
    assert_eq!(spec.zone_name(), "UTC");
    let from = ms("2025-04-01T10:07:31.250Z");
    assert_eq!(
        chain(&spec, from, 3),
        vec![
            ms("2025-04-01T10:15:00Z"),
            ms("2025-04-01T10:30:00Z"),
            ms("2025-04-01T10:45:00Z"),
        ]
    );
}

#[test]
fn cron_six_fields_take_seconds_first() {
    let spec = cron("*/20 30 2 * * *", "UTC");
    assert_eq!(
        chain(&spec, ms("2025-04-01T00:00:00Z"), 4),
        vec![
            ms("2025-04-01T02:30:00Z"),
            ms("2025-04-01T02:30:20Z"),
            ms("2025-04-01T02:30:40Z"),
            ms("2025-04-02T02:30:00Z"),
        ]
    );
}

#[test]
fn cron_in_a_zone_fires_on_that_zones_wall_clock() {
    let spec = cron("0 9 * * mon-fri", "Europe/Berlin");
    // Friday 2025-01-03 09:00 CET, then Monday 2025-01-06 09:00 CET.
    assert_eq!(
        chain(&spec, ms("2025-01-03T07:00:00Z"), 2),
        vec![ms("2025-01-03T08:00:00Z"), ms("2025-01-06T08:00:00Z")]
    );
}

#[test]
fn cron_aliases_are_accepted_case_insensitively() {
    let from = ms("2025-07-15T13:45:00Z");
    let cases = [
        ("@hourly", "2025-07-15T14:00:00Z"),
        ("@daily", "2025-07-16T00:00:00Z"),
        ("@weekly", "2025-07-20T00:00:00Z"),
        ("@monthly", "2025-08-01T00:00:00Z"),
        ("@yearly", "2026-01-01T00:00:00Z"),
        ("@annually", "2026-01-01T00:00:00Z"),
        ("@DAILY", "2025-07-16T00:00:00Z"),
    ];
    for (alias, expected) in cases {
        assert_eq!(
            cron(alias, "UTC").next_after(from),
            Some(ms(expected)),
            "{alias}"
        );
    }
}

#[test]
fn cron_rejects_malformed_expressions() {
    for expr in [
        "61 * * * *",
        "*/0 * * * *",
        "* * *",
        "",
        "   ",
        "abc",
        "@reboot",
        "0 0 * * * * 2030",
    ] {
        match Spec::cron(expr, "UTC") {
            Err(SpecError::InvalidCron { expr: got, reason }) => {
                assert_eq!(got, expr.trim());
                assert!(!reason.is_empty());
            }
            other => panic!("{expr:?} gave {other:?}"),
        }
    }
}

#[test]
fn cron_with_empty_list_element_is_rejected_before_any_search() {
    // croner alone accepts these and spends seconds searching for a
    // match that cannot exist.
    for expr in [", * * * *", "1,,2 * * * *", "1, * * * *", "0 0 * * +,"] {
        let started = std::time::Instant::now();
        assert!(
            matches!(Spec::cron(expr, "UTC"), Err(SpecError::InvalidCron { .. })),
            "{expr}"
        );
        assert!(started.elapsed() < Duration::from_millis(50), "{expr}");
    }
}

#[test]
fn cron_that_names_an_impossible_date_never_fires() {
    for expr in ["0 0 30 2 *", "0 0 31 4 *"] {
        assert_eq!(
            Spec::cron(expr, "UTC").unwrap_err(),
            SpecError::NeverFires {
                expr: expr.to_owned()
            }
        );
    }
    // Rare is not impossible: February 29th exists in leap years.
    let leap = cron("0 0 29 2 *", "UTC");
    assert_eq!(
        leap.next_after(ms("2025-01-01T00:00:00Z")),
        Some(ms("2028-02-29T00:00:00Z"))
    );
}

#[test]
fn cron_rejects_unknown_zones() {
    for zone in ["Mars/Olympus", "", "Not A Zone"] {
        match Spec::cron("* * * * *", zone) {
            Err(SpecError::UnknownZone { zone: got, .. }) => assert_eq!(got, zone),
            other => panic!("{zone:?} gave {other:?}"),
        }
    }
}

#[test]
fn cron_describes_expression_and_zone() {
    let spec = cron("  30 2 * * *  ", "America/New_York");
    assert_eq!(spec.describe(), "30 2 * * * (America/New_York)");
    assert_eq!(spec.zone_name(), "America/New_York");
}

#[test]
fn cron_sub_second_inputs_give_whole_second_triggers() {
    let spec = cron("* * * * * *", "UTC");
    let t = ms("2025-01-01T00:00:00Z");
    assert_eq!(spec.next_after(t), Some(t + SECOND));
    assert_eq!(spec.next_after(t + 1), Some(t + SECOND));
    assert_eq!(spec.next_after(t + 999), Some(t + SECOND));
    assert_eq!(spec.last_at_or_before(t + 999), Some(t));
    assert_eq!(spec.last_at_or_before(t), Some(t));
    assert_eq!(spec.last_at_or_before(t - 1), Some(t - SECOND));
}

#[test]
fn spring_forward_gap_fires_once_at_next_valid_instant() {
    // 2025-03-09 02:00 EST jumps to 03:00 EDT in New York; 02:30 does
    // not exist that day.
    let spec = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        chain(&spec, ms("2025-03-08T00:00:00-05:00"), 3),
        vec![
            ms("2025-03-08T02:30:00-05:00"),
            ms("2025-03-09T03:00:00-04:00"),
            ms("2025-03-10T02:30:00-04:00"),
        ]
    );
}

#[test]
fn fall_back_repeated_time_fires_once_on_first_pass() {
    // 2025-11-02 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    let spec = cron("30 1 * * *", "America/New_York");
    let from = ms("2025-11-01T12:00:00-04:00");
    assert_eq!(
        chain(&spec, from, 2),
        vec![
            ms("2025-11-02T01:30:00-04:00"),
            ms("2025-11-03T01:30:00-05:00"),
        ]
    );
    // Asking from inside the repeated hour, after the first pass, must
    // not offer the second pass either.
    assert_eq!(
        spec.next_after(ms("2025-11-02T01:10:00-05:00")),
        Some(ms("2025-11-03T01:30:00-05:00"))
    );
}

#[test]
fn stepping_expression_fires_on_both_passes_of_a_repeated_hour() {
    let spec = cron("*/30 * * * *", "America/New_York");
    assert_eq!(
        chain(&spec, ms("2025-11-02T00:15:00-04:00"), 6),
        vec![
            ms("2025-11-02T00:30:00-04:00"),
            ms("2025-11-02T01:00:00-04:00"),
            ms("2025-11-02T01:30:00-04:00"),
            ms("2025-11-02T01:00:00-05:00"),
            ms("2025-11-02T01:30:00-05:00"),
            ms("2025-11-02T02:00:00-05:00"),
        ]
    );
}

#[test]
fn skipped_calendar_day_does_not_stop_the_schedule() {
    // Samoa jumped from 2011-12-29T23:59:59-10:00 to
    // 2011-12-31T00:00:00+14:00; croner's own search fails on the
    // missing day.
    let spec = cron("30 2 * * *", "Pacific/Apia");
    let expected = vec![
        ms("2011-12-28T02:30:00-10:00"),
        ms("2011-12-29T02:30:00-10:00"),
        ms("2011-12-31T02:30:00+14:00"),
        ms("2012-01-01T02:30:00+14:00"),
    ];
    let from = ms("2011-12-28T00:00:00-10:00");
    assert_eq!(chain(&spec, from, 4), expected);
    assert_eq!(spec.latest_between(from, expected[3], usize::MAX), expected);

    let midnight = cron("0 0 * * *", "Pacific/Apia");
    let from = ms("2011-12-28T12:00:00-10:00");
    let forward = chain(&midnight, from, 3);
    assert_eq!(
        forward,
        vec![
            ms("2011-12-29T00:00:00-10:00"),
            ms("2011-12-31T00:00:00+14:00"),
            ms("2012-01-01T00:00:00+14:00"),
        ]
    );
    assert_eq!(
        midnight.latest_between(from, forward[2], usize::MAX),
        forward
    );
}

#[test]
fn backward_search_finds_exactly_the_triggers_forward_search_finds() {
    // Catch-up walks backwards from now while everything else walks
    // forwards; the two must agree, above all across DST changes, or a
    // trigger would get two different dedup keys.
    let cases = [
        (
            "30 2 * * *",
            "America/New_York",
            "2025-03-07T00:00:00-05:00",
        ),
        (
            "30 1 * * *",
            "America/New_York",
            "2025-10-31T00:00:00-04:00",
        ),
        (
            "*/30 * * * *",
            "America/New_York",
            "2025-03-08T22:00:00-05:00",
        ),
        (
            "*/30 * * * *",
            "America/New_York",
            "2025-11-01T22:00:00-04:00",
        ),
        (
            "0 */7 * * * *",
            "America/New_York",
            "2025-11-02T00:50:00-04:00",
        ),
        ("0 0 * * *", "Europe/London", "2025-03-28T00:00:00Z"),
        (
            "0 30 0 * * *",
            "Australia/Lord_Howe",
            "2025-04-04T00:00:00Z",
        ),
        ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03T00:00:00Z"),
        ("0 0 * * *", "America/Santiago", "2025-09-05T00:00:00Z"),
    ];
    for (expr, zone, start) in cases {
        let spec = cron(expr, zone);
        let after = ms(start);
        let forward = chain(&spec, after, 40);
        let up_to = *forward.last().expect("40 triggers");
        assert_eq!(
            spec.latest_between(after, up_to, usize::MAX),
            forward,
            "{expr} in {zone}"
        );
        for &t in &forward {
            assert_eq!(spec.last_at_or_before(t), Some(t), "{expr} in {zone}");
        }
    }
}

#[test]
fn cron_range_queries_respect_bounds_and_limits() {
    let spec = cron("0 * * * *", "UTC");
    let after = ms("2025-01-01T00:00:00Z");
    let up_to = ms("2025-01-02T00:00:00Z");
    let all = spec.triggers_between(after, up_to, usize::MAX);
    assert_eq!(all.len(), 24);
    assert_eq!(all[0], after + HOUR);
    assert_eq!(all[23], up_to);
    assert_eq!(spec.count_between(after, up_to), 24);
    assert_eq!(spec.triggers_between(after, up_to, 2), all[..2].to_vec());
    assert_eq!(spec.latest_between(after, up_to, 2), all[22..].to_vec());
    assert!(spec.latest_between(after, up_to, 0).is_empty());
    assert_eq!(spec.count_between(up_to, after), 0);
}

#[test]
fn cron_count_stops_at_the_scan_limit() {
    let spec = cron("* * * * * *", "UTC");
    let after = ms("2025-01-01T00:00:00Z");
    // Two days of per-second triggers is beyond the cap.
    let count = spec.count_between(after, after + 2 * DAY);
    assert_eq!(count, CRON_SCAN_LIMIT as u64);
}

#[test]
fn cron_queries_at_the_ends_of_time_return_none() {
    let spec = cron("0 0 * * *", "UTC");
    assert_eq!(spec.next_after(i64::MAX), None);
    assert_eq!(spec.next_after(i64::MIN), None);
    assert_eq!(spec.last_at_or_before(i64::MIN), None);
    assert_eq!(spec.count_between(i64::MAX - 1, i64::MAX), 0);
}

#[test]
fn zone_names_are_reported_canonically() {
    let spec = cron("0 0 * * *", "america/new_york");
    assert_eq!(spec.zone_name(), "America/New_York");
    assert_eq!(cron("0 0 * * *", "utc").zone_name(), "UTC");
}
