//! How times, ages and sizes read on the pages.

/// A unix-ms instant as `2026-12-01 17:03:04 UTC`.
pub(crate) fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| format!("{ms} ms"))
}

/// `ms` relative to `now_ms`: `3s ago`, `in 2m 5s`.
pub(crate) fn relative(ms: i64, now_ms: i64) -> String {
    let d = ms.saturating_sub(now_ms);
    if d.abs() < 1000 {
        return "now".into();
    }
    let span = duration((d.unsigned_abs() / 1000) as i64);
    if d < 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// Whole seconds as `45s`, `3m 20s`, `2h 5m`, `3d 4h`.
pub(crate) fn duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A progress percent for display, at most one decimal: `30.8`, `62.4`, `30` (a handler's
/// `200/650*100` would otherwise show sixteen digits).
pub(crate) fn percent(p: f64) -> String {
    let r = (p * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Bytes as `1.5 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// A per-minute rate: `1,234/min`, `0.5/min`, or `–` when not measured yet.
pub(crate) fn rate(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(v) if v >= 10.0 => format!("{}/min", thousands(v.round() as u64)),
        Some(v) => format!("{v:.1}/min"),
    }
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Now, unix ms, from this host's clock (only for "ago" labels; Redis decides due times).
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percent_shows_at_most_one_decimal() {
        assert_eq!(percent(30.77777777777778), "30.8");
        assert_eq!(percent(62.4), "62.4");
        assert_eq!(percent(30.0), "30");
        assert_eq!(percent(99.96), "100");
        assert_eq!(percent(0.04), "0");
    }

    #[test]
    fn labels_read_well() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(duration(200), "3m 20s");
        assert_eq!(relative(0, 5_000), "5s ago");
        assert_eq!(relative(65_000, 0), "in 1m 5s");
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(rate(None), "–");
        assert_eq!(rate(Some(1234.4)), "1,234/min");
    }
}
