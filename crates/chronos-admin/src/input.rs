//! What an operator types, parsed: a run time, a delay, a state name.

use std::time::Duration;

use chronos_broker::TaskState;

use crate::error::AdminError;

/// Parses a run time an operator typed for an edit: RFC 3339 with an offset
/// (`2026-12-24T08:00:00Z`, `2026-12-24T09:00:00+01:00`), or a date and time without one
/// (`2026-12-24T08:00`, as an HTML `datetime-local` field sends it), read as UTC.
pub fn parse_run_at(text: &str) -> Result<chronos_broker::Timestamp, AdminError> {
    let text = text.trim();
    let at = text.parse::<jiff::Timestamp>().or_else(|_| {
        text.parse::<jiff::civil::DateTime>()
            .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|z| z.timestamp())
    });
    at.map(|t| chronos_broker::Timestamp::from_unix_ms(t.as_millisecond()))
        .map_err(|_| {
            AdminError::Invalid(format!(
                "bad run time {text:?}: give RFC 3339, like 2026-12-24T08:00:00Z"
            ))
        })
}

/// Parses a delay an operator typed for an edit (`30s`, `5m`, `2h`, `1d`, `0`).
pub fn parse_run_in(text: &str) -> Result<Duration, AdminError> {
    chronos_broker::parse_duration(text.trim()).ok_or_else(|| {
        AdminError::Invalid(format!(
            "bad delay {text:?}: give a number with a unit, like 30s, 5m, 2h or 1d"
        ))
    })
}

/// Parses a state name (`pending`, `active`, `scheduled`, `retry`, `archived`, `completed`).
pub fn parse_state(s: &str) -> Result<TaskState, AdminError> {
    TaskState::parse(s).ok_or_else(|| {
        AdminError::Invalid(format!(
            "unknown state {s:?} (pending, active, scheduled, retry, archived, completed, cancelled)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_run_at, parse_run_in, parse_state};
    use chronos_broker::TaskState;

    #[test]
    fn run_times_parse_with_an_offset_or_as_utc_and_garbage_is_an_error() {
        let z = parse_run_at("2026-12-24T08:00:00Z").expect("rfc3339");
        assert_eq!(z.unix_ms(), 1_798_099_200_000);
        assert_eq!(
            parse_run_at("2026-12-24T09:00:00+01:00").expect("offset"),
            z
        );
        assert_eq!(parse_run_at("2026-12-24T08:00").expect("local"), z);
        assert!(parse_run_at("tomorrow").is_err());
        assert_eq!(parse_run_in("30s").expect("in").as_secs(), 30);
        assert!(parse_run_in("soon").is_err());
    }

    #[test]
    fn state_names_parse_or_say_which_exist() {
        assert_eq!(parse_state("retry").expect("state"), TaskState::Retry);
        let err = parse_state("dead").expect_err("unknown").to_string();
        assert!(err.contains("pending, active"), "{err}");
    }
}
