//! When a schedule fires: fixed intervals and cron expressions.
//!
//! Every trigger is a unix timestamp in milliseconds, and every process that
//! evaluates the same [`Spec`] derives the same trigger instants from it, so
//! a trigger can serve as a cluster-wide deduplication key. Interval
//! triggers sit on multiples of the period counted from the unix epoch;
//! cron triggers are the expression evaluated in its IANA time zone.

use std::fmt;
use std::time::Duration;

use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Upper bound on the cron searches that a single range query runs.
///
/// A cron search is a calendar walk, not arithmetic, so an unbounded count
/// over a long outage of a per-second expression could stall the leader.
pub(crate) const CRON_SCAN_LIMIT: usize = 100_000;

/// When a schedule fires.
///
/// Build one with [`Spec::interval`] or [`Spec::cron`]. Both validate their
/// input, so a `Spec` they return has a next trigger after any instant from
/// 1970 up to croner's search horizon (the year 5000). The variants cannot
/// be built directly outside this crate, so no unvalidated `Spec` reaches
/// the scheduler.
// The parsed cron pattern makes the `Cron` variant a few hundred bytes.
// Specs are built once per schedule and then borrowed, so the size costs
// nothing that boxing would win back, and the field keeps croner's own type.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Spec {
    /// Fires every `every`, on the multiples of `every` since
    /// 1970-01-01T00:00:00Z, whatever the time zone or the start time.
    #[non_exhaustive]
    Interval {
        /// The period: at least one second, a whole number of milliseconds.
        every: Duration,
    },
    /// Fires whenever the wall clock in `zone` matches `cron`.
    #[non_exhaustive]
    Cron {
        /// The expression as the caller wrote it, trimmed.
        expr: String,
        /// The parsed expression (5 or 6 fields, no year field).
        cron: Cron,
        /// The zone whose wall clock the expression is matched against.
        zone: TimeZone,
        /// The zone's IANA name, as reported by the time zone database.
        zone_name: String,
    },
}

/// Why a schedule specification was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The interval is shorter than one second.
    #[error("interval of {every:?} is shorter than the 1s minimum")]
    IntervalTooShort {
        /// The rejected period.
        every: Duration,
    },
    /// The interval is not a whole number of milliseconds, or too long to
    /// express in signed 64-bit milliseconds.
    #[error("interval of {every:?} is invalid: {reason}")]
    InvalidInterval {
        /// The rejected period.
        every: Duration,
        /// What is wrong with it.
        reason: String,
    },
    /// The cron expression does not parse, or uses a form chronos does not
    /// accept (a year field, `@reboot`).
    #[error("invalid cron expression `{expr}`: {reason}")]
    InvalidCron {
        /// The rejected expression.
        expr: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The cron expression parses but names no real date, such as
    /// `0 0 30 2 *` (February 30th).
    #[error("cron expression `{expr}` never fires")]
    NeverFires {
        /// The rejected expression.
        expr: String,
    },
    /// The time zone is not in the time zone database.
    #[error("unknown time zone `{zone}`: {reason}")]
    UnknownZone {
        /// The rejected zone name.
        zone: String,
        /// The time zone database's explanation.
        reason: String,
    },
}

impl Spec {
    /// A spec firing every `every`, aligned to the unix epoch.
    ///
    /// Accepts periods of at least one second that are a whole number of
    /// milliseconds (and fit in `i64` milliseconds). Two processes given the
    /// same period fire on the same instants, because the triggers are the
    /// multiples of the period since 1970-01-01T00:00:00Z rather than offsets
    /// from whenever the schedule was registered.
    pub fn interval(every: Duration) -> Result<Spec, SpecError> {
        period_ms(every)?;
        Ok(Spec::Interval { every })
    }

    /// A spec firing whenever the wall clock in the IANA zone `zone` matches
    /// the cron expression `expr`.
    ///
    /// Accepts 5 fields (minute first), 6 fields (seconds first) and the
    /// aliases `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily` and
    /// `@hourly`, case-insensitively. Rejects a 7th (year) field, `@reboot`,
    /// empty list elements (`1,,2`), expressions that never fire, and zones
    /// the time zone database does not know. `UTC` is always available, even
    /// without a time zone database on the host.
    ///
    /// Daylight-saving changes: when the expression names one fixed time of
    /// day (a single value in each of the second, minute and hour fields,
    /// `30 2 * * *`), a time skipped by a spring-forward jump fires once at
    /// the first instant after the jump, and a repeated time fires once, on
    /// its first pass. Any other expression (a wildcard, step, list or range
    /// in those fields: `*/30 * * * *`, `0 */2 * * *`, `30 2,14 * * *`) skips
    /// the slots that do not exist, with no replacement run, and fires on
    /// both passes of a repeated hour.
    pub fn cron(expr: &str, zone: &str) -> Result<Spec, SpecError> {
        let expr = expr.trim();
        let invalid = |err: CronError| SpecError::InvalidCron {
            expr: expr.to_owned(),
            reason: err.to_string(),
        };
        // The default parser takes a year as a 7th field; chronos triggers
        // must repeat forever, and a year field would make a schedule expire
        // silently.
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        // croner reads an empty list element (`,` or `1,,2`) as matching
        // nothing; `, * * * *` then passes the parser and takes seconds of
        // CPU to be found never firing, so turn it away before parsing.
        if expr
            .split_whitespace()
            .any(|field| field.contains(',') && field.split(',').any(str::is_empty))
        {
            return Err(SpecError::InvalidCron {
                expr: expr.to_owned(),
                reason: "empty element in a comma-separated list".to_owned(),
            });
        }
        let cron = parser.parse(expr).map_err(invalid)?;

        // UTC needs no database lookup, and taking it built in keeps the
        // default zone working on hosts without tzdata installed.
        let tz = if zone.eq_ignore_ascii_case("UTC") {
            TimeZone::UTC
        } else {
            TimeZone::get(zone).map_err(|err| SpecError::UnknownZone {
                zone: zone.to_owned(),
                reason: err.to_string(),
            })?
        };
        let zone_name = tz.iana_name().unwrap_or(zone).to_owned();

        // Impossible dates (`0 0 30 2 *`) parse fine and only fail when
        // searched, so search once now instead of on the leader's hot path.
        // Without a year field the pattern repeats every 400 years at most,
        // which makes any starting point as good as another; the epoch keeps
        // validation independent of the clock.
        let probe = Timestamp::UNIX_EPOCH.to_zoned(tz.clone());
        match cron.find_next_occurrence(&probe, false) {
            Ok(_) => {}
            Err(CronError::TimeSearchLimitExceeded) => {
                return Err(SpecError::NeverFires {
                    expr: expr.to_owned(),
                })
            }
            Err(err) => return Err(invalid(err)),
        }

        Ok(Spec::Cron {
            expr: expr.to_owned(),
            cron,
            zone: tz,
            zone_name,
        })
    }

    /// A short human-readable form: `every 5s` for intervals, the expression
    /// and its zone (`30 2 * * * (America/New_York)`) for cron specs.
    pub fn describe(&self) -> String {
        match self {
            Spec::Interval { every } => format!("every {}", HumanPeriod(*every)),
            Spec::Cron {
                expr, zone_name, ..
            } => format!("{expr} ({zone_name})"),
        }
    }

    /// The IANA name of the zone the spec is evaluated in; `UTC` for
    /// intervals, which do not depend on any zone.
    pub fn zone_name(&self) -> &str {
        match self {
            Spec::Interval { .. } => "UTC",
            Spec::Cron { zone_name, .. } => zone_name,
        }
    }

    /// The period of an interval spec in milliseconds; `None` for cron.
    pub(crate) fn every_ms(&self) -> Option<u64> {
        match self {
            Spec::Interval { every } => period_ms(*every).ok().and_then(|p| u64::try_from(p).ok()),
            Spec::Cron { .. } => None,
        }
    }

    /// The first trigger strictly after `after_ms`, or `None` if there is
    /// none within the representable time range.
    pub(crate) fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Spec::Interval { every } => {
                let period = period_ms(*every).ok()?;
                after_ms
                    .div_euclid(period)
                    .checked_add(1)?
                    .checked_mul(period)
            }
            Spec::Cron { cron, zone, .. } => cron::next_after(cron, zone, after_ms),
        }
    }

    /// The latest trigger at or before `at_ms`, or `None` if there is none
    /// within the representable time range.
    pub(crate) fn last_at_or_before(&self, at_ms: i64) -> Option<i64> {
        match self {
            Spec::Interval { every } => {
                let period = period_ms(*every).ok()?;
                at_ms.div_euclid(period).checked_mul(period)
            }
            Spec::Cron { cron, zone, .. } => cron::last_at_or_before(cron, zone, at_ms),
        }
    }

    // Only the tests enumerate forward ranges; the scheduler walks with next_after.
    #[cfg(test)]
    /// The earliest triggers in `(after_ms, up_to_ms]`, ascending, at most
    /// `limit` of them (and at most [`CRON_SCAN_LIMIT`] for cron specs).
    pub(crate) fn triggers_between(&self, after_ms: i64, up_to_ms: i64, limit: usize) -> Vec<i64> {
        let limit = match self {
            Spec::Interval { .. } => limit,
            Spec::Cron { .. } => limit.min(CRON_SCAN_LIMIT),
        };
        let mut out = Vec::new();
        let mut cursor = after_ms;
        while out.len() < limit {
            match self.next_after(cursor) {
                Some(t) if t <= up_to_ms => {
                    out.push(t);
                    cursor = t;
                }
                _ => break,
            }
        }
        out
    }

    /// The latest triggers in `(after_ms, up_to_ms]`, ascending, at most
    /// `limit` of them (and at most [`CRON_SCAN_LIMIT`] for cron specs).
    ///
    /// Walks backwards from `up_to_ms`, so its cost depends on `limit`, not
    /// on how far back `after_ms` lies.
    pub(crate) fn latest_between(&self, after_ms: i64, up_to_ms: i64, limit: usize) -> Vec<i64> {
        let limit = match self {
            Spec::Interval { .. } => limit,
            Spec::Cron { .. } => limit.min(CRON_SCAN_LIMIT),
        };
        let mut out = Vec::new();
        let mut next = self.last_at_or_before(up_to_ms);
        while out.len() < limit {
            match next {
                Some(t) if t > after_ms => {
                    out.push(t);
                    next = t
                        .checked_sub(1)
                        .and_then(|before| self.last_at_or_before(before));
                }
                _ => break,
            }
        }
        out.reverse();
        out
    }

    /// How many triggers fall in `(after_ms, up_to_ms]`.
    ///
    /// Exact and constant-time for intervals. For cron specs the count
    /// stops at [`CRON_SCAN_LIMIT`], so a larger result reads as "at least".
    pub(crate) fn count_between(&self, after_ms: i64, up_to_ms: i64) -> u64 {
        if up_to_ms <= after_ms {
            return 0;
        }
        match self {
            Spec::Interval { every } => {
                let Ok(period) = period_ms(*every) else {
                    return 0;
                };
                // The triggers at or before x number floor(x / period) + C
                // for a constant C, so the difference counts the range.
                let upper = i128::from(up_to_ms.div_euclid(period));
                let lower = i128::from(after_ms.div_euclid(period));
                u64::try_from(upper - lower).unwrap_or(0)
            }
            Spec::Cron { .. } => {
                let mut count: u64 = 0;
                let mut cursor = after_ms;
                for _ in 0..CRON_SCAN_LIMIT {
                    match self.next_after(cursor) {
                        Some(t) if t <= up_to_ms => {
                            count += 1;
                            cursor = t;
                        }
                        _ => break,
                    }
                }
                count
            }
        }
    }
}

/// The period in milliseconds, if it is one [`Spec::interval`] accepts.
///
/// Also guards the arithmetic of specs built inside the crate without the
/// constructor: a zero period would divide by zero.
fn period_ms(every: Duration) -> Result<i64, SpecError> {
    if every < Duration::from_secs(1) {
        return Err(SpecError::IntervalTooShort { every });
    }
    if every.subsec_nanos() % 1_000_000 != 0 {
        return Err(SpecError::InvalidInterval {
            every,
            reason: "not a whole number of milliseconds".to_owned(),
        });
    }
    i64::try_from(every.as_millis()).map_err(|_| SpecError::InvalidInterval {
        every,
        reason: "longer than i64::MAX milliseconds".to_owned(),
    })
}

/// Formats a period in its largest unit that divides it exactly.
struct HumanPeriod(Duration);

impl fmt::Display for HumanPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        let units: [(u128, &str); 4] = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ];
        for (size, suffix) in units {
            if ms > 0 && ms % size == 0 {
                return write!(f, "{}{suffix}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

mod cron;
mod upcoming;

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests;
