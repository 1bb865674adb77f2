//! Bad input at volume: property tests of the schedule specs a caller registers (cron
//! expressions, IANA zones, intervals). Arbitrary strings and near-valid input (an expression
//! built from valid fields with one field broken, zone names slightly off) must give a spec or
//! the `SpecError` variant that names the problem, never a panic.
//!
//! `PROPTEST_CASES` sets the case count (`cargo xtask fuzz` runs these in release with counts
//! that add up, over all parsers, to a million inputs).

use std::time::Duration;

use chronos_scheduler::{Spec, SpecError};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

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

const CASES: u32 = 2_000;

// ---------------------------------------------------------------------------------------------
// Cron expressions

/// Valid values of each field, seconds first (a 5-field expression drops it).
const SECONDS: &[&str] = &["0", "30", "59", "*", "*/15", "0-10", "5,35", "10-50/20"];
const MINUTES: &[&str] = &["0", "59", "*", "*/5", "1-30", "0,15,30,45", "0-59/7"];
const HOURS: &[&str] = &["0", "23", "*", "*/6", "9-17", "2,3", "12"];
const DAYS: &[&str] = &["1", "31", "*", "15", "1-7", "L", "15W", "?", "*/10"];
const MONTHS: &[&str] = &["1", "12", "*", "JAN", "jan-mar", "*/3", "2", "6,12"];
const WEEKDAYS: &[&str] = &[
    "*", "0", "6", "7", "MON-FRI", "sun", "1-5", "5L", "1#2", "?", "SAT,SUN",
];

/// Values no field accepts, or not this one: out of range, bad steps, stray characters,
/// numbers past any integer type, empty list elements.
const BROKEN: &[&str] = &[
    "-1",
    "*/0",
    "5-",
    "-",
    "1--2",
    "a",
    "**",
    "1,,2",
    ",",
    "1,",
    "99999999999999999999999",
    "1-99999999999",
    "/5",
    "5/",
    "#",
    "%",
    "1.5",
    "\u{663}",
    "６",
    "*/-1",
    "1-2-3",
];

/// Per field (seconds first), a value out of that field's range.
const OUT_OF_RANGE: [&str; 6] = ["60", "60", "24", "32", "13", "8"];

fn pick(values: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(values).prop_map(str::to_string)
}

fn valid_fields() -> impl Strategy<Value = Vec<String>> {
    (
        pick(SECONDS),
        pick(MINUTES),
        pick(HOURS),
        pick(DAYS),
        pick(MONTHS),
        pick(WEEKDAYS),
        any::<bool>(),
    )
        .prop_map(|(s, m, h, d, mo, w, with_seconds)| {
            let mut f = vec![s, m, h, d, mo, w];
            if !with_seconds {
                f.remove(0);
            }
            f
        })
}

/// Joins fields with arbitrary (ASCII) whitespace, and pads the ends.
fn join(fields: &[String], seps: &[usize]) -> String {
    const WS: [&str; 4] = [" ", "  ", "\t", " \t "];
    let mut out = String::from(WS[seps.first().copied().unwrap_or(0) % 4]);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(WS[seps.get(i).copied().unwrap_or(0) % 4]);
        }
        out.push_str(f);
    }
    out
}

/// Checks a cron result against what the input deserves: Ok, never-fires for a valid shape, or
/// an invalid-cron error naming the trimmed expression. A zone error never comes from UTC.
fn check_cron(expr: &str, r: Result<Spec, SpecError>) -> Result<Option<Spec>, TestCaseError> {
    let trimmed = expr.trim();
    match r {
        Ok(spec) => {
            prop_assert_eq!(spec.zone_name(), "UTC");
            prop_assert_eq!(spec.describe(), format!("{trimmed} (UTC)"));
            Ok(Some(spec))
        }
        Err(SpecError::InvalidCron { expr: e, reason }) => {
            prop_assert_eq!(e.as_str(), trimmed);
            prop_assert!(!reason.is_empty());
            Ok(None)
        }
        Err(SpecError::NeverFires { expr: e }) => {
            prop_assert_eq!(e.as_str(), trimmed);
            Ok(None)
        }
        Err(other) => Err(TestCaseError::fail(format!(
            "{expr:?} in UTC gave {other:?}"
        ))),
    }
}

#[test]
fn cron_of_valid_fields_parses_or_never_fires() {
    let input = (valid_fields(), proptest::collection::vec(0usize..4, 7));
    TestRunner::new(config(CASES))
        .run(&input, |(fields, seps)| {
            let expr = join(&fields, &seps);
            match Spec::cron(&expr, "UTC") {
                // Only day-of-month, month and weekday together can name no date (Feb 31,
                // or `?` with a `#`/`L` weekday croner cannot place).
                Err(SpecError::InvalidCron { reason, .. }) => {
                    prop_assert!(false, "{expr:?} refused: {reason}")
                }
                r => {
                    check_cron(&expr, r)?;
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn cron_with_one_broken_field_is_refused() {
    let broken = prop_oneof![pick(BROKEN), Just(String::from("OUT"))];
    let input = (
        valid_fields(),
        broken,
        any::<usize>(),
        proptest::collection::vec(0usize..4, 7),
    );
    TestRunner::new(config(CASES))
        .run(&input, |(mut fields, bad, at, seps)| {
            let i = at % fields.len();
            let bad = if bad == "OUT" {
                // the out-of-range value of the field at `i` (5-field forms have no seconds)
                let field = i + 6 - fields.len();
                OUT_OF_RANGE[field].to_string()
            } else {
                bad
            };
            fields[i] = bad;
            let expr = join(&fields, &seps);
            match Spec::cron(&expr, "UTC") {
                Err(SpecError::InvalidCron { expr: e, reason }) => {
                    prop_assert_eq!(e.as_str(), expr.trim());
                    prop_assert!(!reason.is_empty());
                }
                other => prop_assert!(false, "{expr:?} gave {other:?}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn cron_with_wrong_field_count_is_refused() {
    let input = (
        valid_fields(),
        prop_oneof![Just(0usize), 1usize..5, 7usize..10],
        proptest::collection::vec(0usize..4, 10),
    );
    TestRunner::new(config(CASES))
        .run(&input, |(fields, n, seps)| {
            let fields: Vec<String> = fields.into_iter().cycle().take(n).collect();
            let expr = join(&fields, &seps);
            match Spec::cron(&expr, "UTC") {
                Err(SpecError::InvalidCron { .. }) => {}
                other => prop_assert!(false, "{n} fields {expr:?} gave {other:?}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn cron_of_arbitrary_text() {
    let text = prop_oneof![
        any::<String>(),
        "[0-9*/,LW#?-]{0,12}( [0-9*/,LW#?-]{0,6}){0,7}",
        "@[a-zA-Z]{0,10}",
        prop::sample::select(vec![
            "@yearly",
            "@ANNUALLY",
            "@monthly",
            "@weekly",
            "@Daily",
            "@hourly",
            "@reboot",
            "@midnight",
            "@",
            "@every 5s",
        ])
        .prop_map(str::to_string),
    ];
    TestRunner::new(config(CASES))
        .run(&text, |expr| {
            let r = Spec::cron(&expr, "UTC");
            if expr.trim().eq_ignore_ascii_case("@reboot") {
                let refused = matches!(r, Err(SpecError::InvalidCron { .. }));
                prop_assert!(refused, "@reboot gave {r:?}");
            }
            check_cron(&expr, r)?;
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Zones

fn known_zone() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "UTC",
        "utc",
        "Europe/Berlin",
        "America/New_York",
        "America/Argentina/Buenos_Aires",
        "Asia/Kolkata",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "Pacific/Chatham",
        "Etc/GMT+12",
        "Etc/GMT-14",
        "Asia/Kathmandu",
        "Africa/Casablanca",
        "America/St_Johns",
    ])
    .prop_map(str::to_string)
}

/// Zone names slightly off (cut, a character swapped in, case changed) and names that try to
/// leave the zone database (`..`, absolute paths, NUL).
fn near_zone() -> impl Strategy<Value = String> {
    let edit = prop_oneof![
        any::<usize>().prop_map(|i| (i, None)),
        (any::<usize>(), any::<char>()).prop_map(|(i, c)| (i, Some(c))),
    ];
    prop_oneof![
        (known_zone(), edit).prop_map(|(z, (i, c))| {
            let mut chars: Vec<char> = z.chars().collect();
            let at = i % (chars.len() + 1);
            match c {
                Some(c) => chars.insert(at, c),
                None => chars.truncate(at),
            }
            chars.into_iter().collect()
        }),
        known_zone().prop_map(|z| z.to_uppercase()),
        known_zone().prop_map(|z| z.to_lowercase()),
        prop::sample::select(vec![
            "",
            " ",
            "/",
            "..",
            "../../../../etc/passwd",
            "/etc/localtime",
            "/usr/share/zoneinfo/UTC",
            "Europe/../Europe/Berlin",
            "Europe/Berlin\0",
            "Europe//Berlin",
            "zone.tab",
            "posixrules",
            "Factory",
            "EST5EDT",
            "CET",
            "Etc/GMT+13",
            "GMT+0",
        ])
        .prop_map(str::to_string),
    ]
}

fn check_zone(zone: &str) -> Result<(), TestCaseError> {
    match Spec::cron("0 0 * * *", zone) {
        Ok(spec) => {
            let name = spec.zone_name();
            prop_assert!(!name.is_empty());
            // A name that climbs out of the database is never a zone.
            prop_assert!(!zone.contains(".."), "{zone:?} accepted as {name:?}");
            prop_assert!(!zone.starts_with('/'), "{zone:?} accepted as {name:?}");
            let suffix = format!("({name})");
            prop_assert!(spec.describe().ends_with(&suffix));
        }
        Err(SpecError::UnknownZone { zone: z, reason }) => {
            prop_assert_eq!(z.as_str(), zone);
            prop_assert!(!reason.is_empty());
        }
        Err(other) => prop_assert!(false, "zone {zone:?} gave {other:?}"),
    }
    Ok(())
}

#[test]
fn zones_are_known_or_unknown_zone_errors() {
    let zones = prop_oneof![any::<String>(), near_zone()];
    TestRunner::new(config(CASES))
        .run(&zones, |zone| check_zone(&zone))
        .unwrap();
}

#[test]
fn known_zones_are_accepted() {
    TestRunner::new(config(CASES / 10))
        .run(&known_zone(), |zone| {
            prop_assert!(Spec::cron("*/5 * * * *", &zone).is_ok(), "{zone}");
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Intervals

#[test]
fn intervals_are_accepted_or_typed_errors() {
    let every = prop_oneof![
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..5, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (1u64..100_000, 0u32..1_000).prop_map(|(s, ms)| Duration::new(s, ms * 1_000_000)),
        (
            i64::MAX as u64 / 1_000 - 2..=u64::MAX / 1_000 + 2,
            0u32..1_000
        )
            .prop_map(|(s, ms)| Duration::new(s, ms * 1_000_000)),
    ];
    TestRunner::new(config(CASES))
        .run(&every, |every| {
            let fits = i64::try_from(every.as_millis()).is_ok();
            match Spec::interval(every) {
                Ok(spec) => {
                    prop_assert!(every >= Duration::from_secs(1));
                    prop_assert_eq!(every.subsec_nanos() % 1_000_000, 0);
                    prop_assert!(fits);
                    prop_assert!(spec.describe().starts_with("every "));
                    prop_assert_eq!(spec.zone_name(), "UTC");
                }
                Err(SpecError::IntervalTooShort { every: e }) => {
                    prop_assert_eq!(e, every);
                    prop_assert!(every < Duration::from_secs(1));
                }
                Err(SpecError::InvalidInterval { every: e, reason }) => {
                    prop_assert_eq!(e, every);
                    prop_assert!(every >= Duration::from_secs(1));
                    prop_assert!(every.subsec_nanos() % 1_000_000 != 0 || !fits, "{reason}");
                }
                Err(other) => prop_assert!(false, "{every:?} gave {other:?}"),
            }
            Ok(())
        })
        .unwrap();
}
