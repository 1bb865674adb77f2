//! The settings of one queue stored in the store, shared by every server of the cluster: its
//! limits (which override, field by field, what each server was configured with) and the aging
//! time of its priority levels.
//!
//! A field that is not stored means "the server's configuration". A limit can also be stored as
//! [`Setting::Off`], which lifts a limit that servers were configured with.

use std::fmt;
use std::time::Duration;

use crate::BrokerError;

/// The longest period a stored rate may have, and the longest aging time: a year. Longer values
/// are almost surely a typo, and bounding them keeps every figure far from overflow in the
/// store's arithmetic.
pub const MAX_SETTING_PERIOD: Duration = Duration::from_secs(366 * 24 * 3600);

/// The shortest aging time: a task of a less urgent level waits at least a second.
pub const MIN_AGING: Duration = Duration::from_secs(1);

/// At most `n` starts per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Starts per period (at least 1).
    pub n: u32,
    /// The period (1 ms to [`MAX_SETTING_PERIOD`]).
    pub period: Duration,
}

impl Rate {
    /// `n` starts per `period` (checked when stored).
    pub fn new(n: u32, period: Duration) -> Self {
        Self { n, period }
    }

    /// Parses `<n>/<duration>` as an operator writes it: `100/1s`, `5/250ms`, `60/1m`, `1000/1h`
    /// (a bare number after the slash is milliseconds). Errors are [`BrokerError::InvalidOption`].
    pub fn parse(text: &str) -> Result<Self, BrokerError> {
        let bad = || {
            BrokerError::InvalidOption(format!("rate {text:?}: expected <n>/<period>, like 100/1s"))
        };
        let (n, period) = text.trim().split_once('/').ok_or_else(bad)?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        let period = parse_duration(period.trim()).ok_or_else(bad)?;
        let rate = Self { n, period };
        rate.check("rate")?;
        Ok(rate)
    }

    fn check(&self, what: &str) -> Result<(), BrokerError> {
        if self.n == 0 {
            return Err(invalid(format!("{what} must allow at least 1 start")));
        }
        if self.period < Duration::from_millis(1) || self.period > MAX_SETTING_PERIOD {
            return Err(invalid(format!(
                "{what} period must be between 1 ms and 366 days, not {:?}",
                self.period
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.n, format_duration(self.period))
    }
}

/// A stored limit: either a value, or [`Setting::Off`], which lifts the limit even where a
/// server was configured with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting<T> {
    /// No limit, whatever the servers were configured with.
    Off,
    /// This limit, whatever the servers were configured with.
    On(T),
}

impl<T: fmt::Display> fmt::Display for Setting<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Off => f.write_str("none"),
            Setting::On(v) => v.fmt(f),
        }
    }
}

/// The stored settings of one queue. Each field is `None` when nothing is stored for it: the
/// server's configuration ([`chronos-worker`'s `QueueLimit`]) applies then, and a queue with no
/// stored field behaves exactly as configured.
///
/// [`chronos-worker`'s `QueueLimit`]: https://docs.rs/chronos-worker
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct QueueSettings {
    /// At most this many starts per period across the cluster.
    pub rate: Option<Setting<Rate>>,
    /// How many starts of the rate may be granted at once (at least 1); meaningful only where a
    /// rate applies (stored or configured).
    pub burst: Option<u32>,
    /// At most this many tasks of the queue held at once across the cluster.
    pub concurrency: Option<Setting<u32>>,
    /// At most this many starts per period for each rate key.
    pub per_key_rate: Option<Setting<Rate>>,
    /// How long a waiting task of a less urgent priority level may wait before it is served
    /// ahead of newer, more urgent work (at least [`MIN_AGING`]).
    pub aging: Option<Duration>,
    /// The priority level a retried task goes to when it is more urgent than the task's own,
    /// so retries run ahead of the backlog; a retried task keeps that level.
    pub retry_level: Option<crate::Priority>,
}

impl QueueSettings {
    /// True when nothing is stored: every server runs the queue as configured.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// True when a stored field changes the queue's limits (rate, burst, concurrency, per-key
    /// rate); `aging` alone does not.
    pub fn has_limits(&self) -> bool {
        self.rate.is_some()
            || self.burst.is_some()
            || self.concurrency.is_some()
            || self.per_key_rate.is_some()
    }

    /// Checks every stored field against its range: the error names the first that is out.
    pub fn validate(&self) -> Result<(), BrokerError> {
        if let Some(Setting::On(r)) = self.rate {
            r.check("rate")?;
        }
        if let Some(Setting::On(r)) = self.per_key_rate {
            r.check("per-key rate")?;
        }
        if self.burst == Some(0) {
            return Err(invalid("burst must be at least 1".into()));
        }
        if self.concurrency == Some(Setting::On(0)) {
            return Err(invalid("concurrency must be at least 1".into()));
        }
        if let Some(a) = self.aging {
            check_aging(a)?;
        }
        Ok(())
    }
}

/// What one call to change a queue's settings does to each field: keep it, store a value, or
/// remove what is stored (back to the servers' configuration). Build it with the methods below;
/// applying the same change twice leaves the same settings as applying it once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettingsChange {
    /// The rate: `None` keeps it, `Some(None)` removes it, `Some(Some(s))` stores `s`.
    pub rate: Option<Option<Setting<Rate>>>,
    /// The burst, as `rate`.
    pub burst: Option<Option<u32>>,
    /// The concurrency, as `rate`.
    pub concurrency: Option<Option<Setting<u32>>>,
    /// The per-key rate, as `rate`.
    pub per_key_rate: Option<Option<Setting<Rate>>>,
    /// The aging time, as `rate`.
    pub aging: Option<Option<Duration>>,
    /// The retry level, as `rate`.
    pub retry_level: Option<Option<crate::Priority>>,
}

impl SettingsChange {
    /// A change that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores a rate (or [`Setting::Off`]).
    pub fn rate(mut self, rate: Setting<Rate>) -> Self {
        self.rate = Some(Some(rate));
        self
    }

    /// Stores a burst.
    pub fn burst(mut self, n: u32) -> Self {
        self.burst = Some(Some(n));
        self
    }

    /// Stores a concurrency (or [`Setting::Off`]).
    pub fn concurrency(mut self, n: Setting<u32>) -> Self {
        self.concurrency = Some(Some(n));
        self
    }

    /// Stores a per-key rate (or [`Setting::Off`]).
    pub fn per_key_rate(mut self, rate: Setting<Rate>) -> Self {
        self.per_key_rate = Some(Some(rate));
        self
    }

    /// Stores an aging time.
    pub fn aging(mut self, aging: Duration) -> Self {
        self.aging = Some(Some(aging));
        self
    }

    /// Stores the level retries go to when it is more urgent than their own.
    pub fn retry_level(mut self, level: crate::Priority) -> Self {
        self.retry_level = Some(Some(level));
        self
    }

    /// Removes the stored retry level (retries keep their own level).
    pub fn unset_retry_level(mut self) -> Self {
        self.retry_level = Some(None);
        self
    }

    /// Removes the stored rate (back to the configuration).
    pub fn unset_rate(mut self) -> Self {
        self.rate = Some(None);
        self
    }

    /// Removes the stored burst.
    pub fn unset_burst(mut self) -> Self {
        self.burst = Some(None);
        self
    }

    /// Removes the stored concurrency.
    pub fn unset_concurrency(mut self) -> Self {
        self.concurrency = Some(None);
        self
    }

    /// Removes the stored per-key rate.
    pub fn unset_per_key_rate(mut self) -> Self {
        self.per_key_rate = Some(None);
        self
    }

    /// Removes the stored aging time.
    pub fn unset_aging(mut self) -> Self {
        self.aging = Some(None);
        self
    }

    /// True when the change touches no field.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks every value to store (as [`QueueSettings::validate`]).
    pub fn validate(&self) -> Result<(), BrokerError> {
        QueueSettings {
            rate: self.rate.flatten(),
            burst: self.burst.flatten(),
            concurrency: self.concurrency.flatten(),
            per_key_rate: self.per_key_rate.flatten(),
            aging: self.aging.flatten(),
            retry_level: self.retry_level.flatten(),
        }
        .validate()
    }

    /// The settings after this change is applied to `current`.
    pub fn apply(&self, current: QueueSettings) -> QueueSettings {
        QueueSettings {
            rate: self.rate.unwrap_or(current.rate),
            burst: self.burst.unwrap_or(current.burst),
            concurrency: self.concurrency.unwrap_or(current.concurrency),
            per_key_rate: self.per_key_rate.unwrap_or(current.per_key_rate),
            aging: self.aging.unwrap_or(current.aging),
            retry_level: self.retry_level.unwrap_or(current.retry_level),
        }
    }
}

fn check_aging(a: Duration) -> Result<(), BrokerError> {
    if a < MIN_AGING || a > MAX_SETTING_PERIOD {
        return Err(invalid(format!(
            "aging must be between 1 s and 366 days, not {a:?}"
        )));
    }
    Ok(())
}

fn invalid(msg: String) -> BrokerError {
    BrokerError::InvalidOption(msg)
}

/// Parses an operator's duration: `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`, or a
/// bare number of milliseconds. None when it is not one, or does not fit.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().ok()?;
    let ms_per = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms_per).map(Duration::from_millis)
}

/// Writes a duration the way [`parse_duration`] reads it, in the largest unit that divides it.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms % per == 0 {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_as_operators_write_them() {
        assert_eq!(
            Rate::parse("100/1s").unwrap(),
            Rate::new(100, Duration::from_secs(1))
        );
        assert_eq!(
            Rate::parse("5/250ms").unwrap(),
            Rate::new(5, Duration::from_millis(250))
        );
        assert_eq!(Rate::parse("60/1m").unwrap().to_string(), "60/1m");
        assert!(Rate::parse("0/1s").is_err());
        assert!(Rate::parse("10").is_err());
        assert!(Rate::parse("10/0s").is_err());
        assert!(Rate::parse("10/1y").is_err());
        assert!(Rate::parse("99999999999/1s").is_err());
    }

    #[test]
    fn out_of_range_values_are_typed_errors() {
        for change in [
            SettingsChange::new().burst(0),
            SettingsChange::new().concurrency(Setting::On(0)),
            SettingsChange::new().aging(Duration::from_millis(999)),
            SettingsChange::new().rate(Setting::On(Rate::new(1, Duration::ZERO))),
        ] {
            assert!(matches!(
                change.validate(),
                Err(BrokerError::InvalidOption(_))
            ));
        }
        assert!(SettingsChange::new()
            .concurrency(Setting::Off)
            .aging(Duration::from_secs(60))
            .validate()
            .is_ok());
    }

    #[test]
    fn a_change_applies_field_by_field() {
        let before = QueueSettings {
            concurrency: Some(Setting::On(4)),
            burst: Some(3),
            ..Default::default()
        };
        let after = SettingsChange::new()
            .unset_burst()
            .rate(Setting::Off)
            .apply(before);
        assert_eq!(after.concurrency, Some(Setting::On(4)));
        assert_eq!(after.burst, None);
        assert_eq!(after.rate, Some(Setting::Off));
    }
}
