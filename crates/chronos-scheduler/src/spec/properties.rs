//! Property tests of trigger arithmetic on arbitrary instants: the scheduler feeds these
//! functions times read back from Redis (a schedule's last fired trigger), so any `i64`, however
//! far from now, must give an answer or `None`, never a panic, and the answers must keep their
//! order. Inside the crate because the functions are private; `PROPTEST_CASES` sets the count.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::Spec;

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Instants anywhere in `i64`, with weight on the edges and on the years around now.
fn instant() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        prop::sample::select(vec![
            i64::MIN,
            i64::MIN + 1,
            -1,
            0,
            1,
            i64::MAX - 1,
            i64::MAX
        ]),
        // croner's and jiff's ranges end near years -9999 and 9999
        -377_705_116_800_000i64..=253_402_300_799_999,
        1_600_000_000_000i64..1_900_000_000_000,
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let interval = prop_oneof![
        (1u64..100_000).prop_map(Duration::from_secs),
        (1_000u64..=i64::MAX as u64).prop_map(Duration::from_millis),
    ]
    .prop_map(|d| Spec::interval(d).ok());
    let cron = (
        prop::sample::select(vec![
            "* * * * *",
            "*/7 * * * * *",
            "30 2 * * *",
            "0 0 29 2 *",
            "0 0 L * *",
            "0 12 * * 1#5",
            "15 1 * * SUN",
            "@yearly",
            "0 30 2 * * *",
        ]),
        prop::sample::select(vec![
            "UTC",
            "America/New_York",
            "Pacific/Apia",
            "Australia/Lord_Howe",
            "Europe/Dublin",
        ]),
    )
        .prop_map(|(e, z)| Spec::cron(e, z).ok());
    prop_oneof![interval, cron].prop_filter_map("valid spec", |s| s)
}

#[test]
fn trigger_arithmetic_never_panics_and_keeps_order() {
    TestRunner::new(config(1_000))
        .run(&(spec(), instant(), instant()), |(spec, a, b)| {
            let next = spec.next_after(a);
            prop_assert!(next.is_none_or(|n| n > a), "next_after({a}) = {next:?}");
            let last = spec.last_at_or_before(a);
            prop_assert!(
                last.is_none_or(|l| l <= a),
                "last_at_or_before({a}) = {last:?}"
            );
            if let (Some(l), Some(n)) = (last, next) {
                prop_assert!(l < n);
            }
            let (lo, hi) = (a.min(b), a.max(b));
            let latest = spec.latest_between(lo, hi, 3);
            prop_assert!(latest.len() <= 3);
            prop_assert!(latest.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(latest.iter().all(|&t| t > lo && t <= hi));
            if let Spec::Interval { .. } = spec {
                // exact and constant-time for intervals, so any range is cheap to count
                let n = spec.count_between(lo, hi);
                prop_assert!(n >= latest.len() as u64);
            }
            Ok(())
        })
        .unwrap();
}
