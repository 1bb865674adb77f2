//! Times as the tables show them: UTC, to the second.

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

#[cfg(test)]
mod tests {
    use super::datetime;

    #[test]
    fn times_render_plainly() {
        assert_eq!(datetime(0), "1970-01-01 00:00:00Z");
    }
}
