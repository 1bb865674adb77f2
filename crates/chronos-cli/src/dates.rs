//! Times as the tables show them (UTC, to the second), and durations as commands take them.

use std::time::Duration;

/// `YYYY-MM-DD HH:MM:SSZ` (UTC).
pub(crate) fn datetime(ms: i64) -> String {
    match chronos_broker::time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(ms) * 1_000_000,
    ) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => ms.to_string(),
    }
}

/// `YYYY-MM-DD` (UTC).
pub(crate) fn date(ms: i64) -> String {
    datetime(ms).chars().take(10).collect()
}

/// `30s`, `5m`, `2h`, `1d`, `1500ms`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (30s, 5m, 1h, 1500ms)"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h, d)")),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_render_plainly() {
        assert_eq!(datetime(0), "1970-01-01 00:00:00Z");
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
