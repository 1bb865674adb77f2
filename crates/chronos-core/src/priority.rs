//! Priority levels inside one queue.

use std::fmt;
use std::str::FromStr;

use crate::BrokerError;

/// How urgent a task is among the ready tasks of its own queue: level 0 runs first, 9 last, and
/// tasks of one level run in the order they became ready. [`Priority::NORMAL`] (5) is the
/// default, so a queue whose tasks all keep it runs exactly as a queue without priorities.
///
/// A task keeps its level through a delay, every retry, a reclaim after a lost worker, an
/// operator's run-now, and rate-limit deferrals; an operator can change the level of a waiting
/// task (`Operate::prioritize` in the broker crate, `chronos task prioritize`). Priority
/// between queues is unchanged (weights or strict order in the worker's config).
///
/// Starvation is bounded by aging: a task that has waited longer than the queue's aging bound
/// (stored with the queue's settings, default [`Priority::DEFAULT_AGING`]) is served ahead of
/// newer, more urgent work.
///
/// The levels follow BullMQ, Oban and River in that a smaller number is more urgent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Priority(u8);

impl Priority {
    /// Level 0: runs before every other level.
    pub const HIGHEST: Priority = Priority(0);
    /// Level 2.
    pub const HIGH: Priority = Priority(2);
    /// Level 5, the default.
    pub const NORMAL: Priority = Priority(5);
    /// Level 7.
    pub const LOW: Priority = Priority(7);
    /// Level 9: runs after every other level (until aging serves it).
    pub const LOWEST: Priority = Priority(9);
    /// The number of levels (0 to 9).
    pub const LEVELS: u8 = 10;
    /// How long a task may wait behind more urgent levels before it is served ahead of them,
    /// for a queue whose settings name no bound: one minute.
    pub const DEFAULT_AGING: std::time::Duration = std::time::Duration::from_secs(60);

    /// Level `n`, 0 (first) to 9 (last); [`BrokerError::InvalidOption`] otherwise.
    pub fn level(n: u8) -> Result<Self, BrokerError> {
        if n < Self::LEVELS {
            Ok(Self(n))
        } else {
            Err(BrokerError::InvalidOption(format!(
                "priority level {n} is out of range: levels are 0 (first) to 9 (last)"
            )))
        }
    }

    /// The level, 0 to 9.
    pub fn get(self) -> u8 {
        self.0
    }

    /// True for [`Priority::NORMAL`], which is stored as a task without a level.
    pub fn is_normal(self) -> bool {
        self == Self::NORMAL
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::NORMAL
    }
}

impl TryFrom<u8> for Priority {
    type Error = BrokerError;

    fn try_from(n: u8) -> Result<Self, Self::Error> {
        Self::level(n)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Parses a level (`0` to `9`) or a preset name (`highest`, `high`, `normal`, `low`, `lowest`).
impl FromStr for Priority {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "highest" => Ok(Self::HIGHEST),
            "high" => Ok(Self::HIGH),
            "normal" => Ok(Self::NORMAL),
            "low" => Ok(Self::LOW),
            "lowest" => Ok(Self::LOWEST),
            other => match other.parse::<u8>() {
                Ok(n) => Self::level(n),
                Err(_) => Err(BrokerError::InvalidOption(format!(
                    "priority {s:?}: expected a level 0 to 9 or highest, high, normal, low, lowest"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_presets() {
        assert_eq!(Priority::default().get(), 5);
        assert!(Priority::level(10).is_err());
        assert_eq!("high".parse::<Priority>().expect("preset"), Priority::HIGH);
        assert_eq!("9".parse::<Priority>().expect("level"), Priority::LOWEST);
        assert!("urgent".parse::<Priority>().is_err());
    }
}
