//! What a newly elected leader does about triggers that fell due while no
//! leader was running.

use std::time::Duration;

use crate::spec::Spec;

/// How a new leader treats triggers that fell due while no leader ran.
///
/// Only triggers after the schedule's last fired trigger and at or before
/// the moment the leader takes over are considered; a schedule that never
/// fired has nothing to catch up on. Whatever the policy, triggers after
/// that moment fire normally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MisfirePolicy {
    /// Fires the most recent missed triggers, oldest first: those less than
    /// `window` old, and at most `max` of them. Older or surplus triggers
    /// are dropped and counted as missed. A zero `window` or `max` fires
    /// nothing.
    FireAll {
        /// How far back a missed trigger may lie and still fire.
        window: Duration,
        /// The most missed triggers fired in one catch-up.
        max: u32,
    },
    /// Fires only the latest missed trigger, however old, and counts the
    /// rest as missed. Suits jobs where one run covers any backlog.
    FireLatest,
    /// Fires no missed trigger; every one of them counts as missed.
    Skip,
}

impl Default for MisfirePolicy {
    /// Catches up on at most 10 triggers from the last hour.
    fn default() -> Self {
        MisfirePolicy::FireAll {
            window: Duration::from_secs(3_600),
            max: 10,
        }
    }
}

/// A leader's catch-up decision for one schedule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CatchUp {
    /// Due triggers to fire now, ascending, in unix milliseconds.
    pub(crate) fire: Vec<i64>,
    /// Due triggers that will never fire. For cron specs the count stops at
    /// [`crate::spec::CRON_SCAN_LIMIT`].
    pub(crate) missed: u64,
}

/// Decides which triggers in `(last_fired_ms, now_ms]` fire now under
/// `policy`, and counts the rest as missed.
///
/// `last_fired_ms` is the latest trigger already fired; `None` means the
/// schedule never fired, in which case it starts from now and nothing in the
/// past is due. The triggers chosen are always the most recent due ones, so
/// everything before the first of them is what was missed.
pub(crate) fn plan(
    policy: &MisfirePolicy,
    spec: &Spec,
    last_fired_ms: Option<i64>,
    now_ms: i64,
) -> CatchUp {
    let Some(last_fired) = last_fired_ms else {
        return CatchUp::default();
    };
    if now_ms <= last_fired {
        return CatchUp::default();
    }

    let fire = match *policy {
        MisfirePolicy::FireAll { window, max } => {
            let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
            let oldest_excluded = now_ms.saturating_sub(window_ms).max(last_fired);
            let max = usize::try_from(max).unwrap_or(usize::MAX);
            spec.latest_between(oldest_excluded, now_ms, max)
        }
        MisfirePolicy::FireLatest => spec.latest_between(last_fired, now_ms, 1),
        MisfirePolicy::Skip => Vec::new(),
    };

    // `fire` is a tail of the due triggers, so the missed ones are exactly
    // those before its first element.
    let missed_up_to = fire
        .first()
        .map_or(now_ms, |&first| first.saturating_sub(1));
    let missed = spec.count_between(last_fired, missed_up_to);
    CatchUp { fire, missed }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;

    /// 2025-01-01T00:00:00Z.
    const T0: i64 = 1_735_689_600_000;

    fn ms(rfc3339: &str) -> i64 {
        rfc3339
            .parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("bad test instant {rfc3339}: {e}"))
            .as_millisecond()
    }

    fn every(secs: u64) -> Spec {
        Spec::interval(Duration::from_secs(secs)).expect("valid interval")
    }

    fn fire_all(window_secs: u64, max: u32) -> MisfirePolicy {
        MisfirePolicy::FireAll {
            window: Duration::from_secs(window_secs),
            max,
        }
    }

    #[test]
    fn default_policy_fires_up_to_ten_triggers_from_the_last_hour() {
        assert_eq!(MisfirePolicy::default(), fire_all(3_600, 10));
    }

    #[test]
    fn never_fired_schedule_catches_up_on_nothing() {
        for policy in [
            MisfirePolicy::default(),
            MisfirePolicy::FireLatest,
            MisfirePolicy::Skip,
        ] {
            assert_eq!(plan(&policy, &every(1), None, T0 + DAY), CatchUp::default());
        }
    }

    #[test]
    fn nothing_is_due_when_now_is_not_past_the_last_fired_trigger() {
        let spec = every(60);
        let policy = MisfirePolicy::default();
        assert_eq!(plan(&policy, &spec, Some(T0), T0), CatchUp::default());
        assert_eq!(plan(&policy, &spec, Some(T0), T0 - 1), CatchUp::default());
        // Due means at or before now, so a trigger one minute later is not.
        assert_eq!(
            plan(&policy, &spec, Some(T0), T0 + MINUTE - 1),
            CatchUp::default()
        );
    }

    #[test]
    fn fire_all_fires_every_due_trigger_within_window_and_max() {
        let plan = plan(&fire_all(3_600, 10), &every(60), Some(T0), T0 + 3 * MINUTE);
        assert_eq!(
            plan,
            CatchUp {
                fire: vec![T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE],
                missed: 0,
            }
        );
    }

    #[test]
    fn fire_all_keeps_the_most_recent_max_and_counts_the_rest_missed() {
        let now = T0 + 30 * MINUTE + 30 * SECOND;
        let plan = plan(&fire_all(3_600, 5), &every(60), Some(T0), now);
        let expected: Vec<i64> = (26..=30).map(|m| T0 + m * MINUTE).collect();
        assert_eq!(plan.fire, expected);
        assert_eq!(plan.missed, 25);
    }

    #[test]
    fn fire_all_drops_triggers_older_than_the_window() {
        // Ten minutes of outage, a five-minute window: triggers at minutes
        // 6..=10 are newer than now - window (minute 5 is exactly at the
        // edge, so not newer).
        let now = T0 + 10 * MINUTE;
        let plan = plan(&fire_all(300, 100), &every(60), Some(T0), now);
        let expected: Vec<i64> = (6..=10).map(|m| T0 + m * MINUTE).collect();
        assert_eq!(plan.fire, expected);
        assert_eq!(plan.missed, 5);
    }

    #[test]
    fn fire_all_with_zero_window_or_zero_max_fires_nothing() {
        let now = T0 + 10 * MINUTE;
        for policy in [fire_all(0, 10), fire_all(3_600, 0)] {
            let plan = plan(&policy, &every(60), Some(T0), now);
            assert!(plan.fire.is_empty(), "{policy:?}");
            assert_eq!(plan.missed, 10, "{policy:?}");
        }
    }

    #[test]
    fn day_long_outage_of_one_second_job_plans_at_most_max_and_counts_rest_quickly() {
        let started = std::time::Instant::now();
        let now = T0 + DAY;
        let plan = plan(&MisfirePolicy::default(), &every(1), Some(T0), now);
        assert_eq!(plan.fire.len(), 10);
        assert_eq!(plan.fire.first(), Some(&(now - 9 * SECOND)));
        assert_eq!(plan.fire.last(), Some(&now));
        assert!(plan.fire.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(plan.missed, 86_400 - 10);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn fire_latest_fires_only_the_newest_due_trigger() {
        let now = T0 + DAY + 500;
        let plan = plan(&MisfirePolicy::FireLatest, &every(1), Some(T0), now);
        assert_eq!(plan.fire, vec![T0 + DAY]);
        assert_eq!(plan.missed, 86_399);
    }

    #[test]
    fn fire_latest_ignores_the_window_and_reaches_far_back() {
        let plan = plan(
            &MisfirePolicy::FireLatest,
            &every(86_400),
            Some(T0),
            T0 + 30 * DAY + HOUR,
        );
        assert_eq!(plan.fire, vec![T0 + 30 * DAY]);
        assert_eq!(plan.missed, 29);
    }

    #[test]
    fn skip_fires_nothing_and_counts_every_due_trigger_missed() {
        let plan = plan(&MisfirePolicy::Skip, &every(1), Some(T0), T0 + DAY);
        assert!(plan.fire.is_empty());
        assert_eq!(plan.missed, 86_400);
    }

    #[test]
    fn cron_fire_all_catches_up_across_the_spring_forward_gap() {
        let spec = Spec::cron("30 * * * *", "America/New_York").expect("valid cron");
        // Last fired 2025-03-09 00:30 EST; the leader returns at 04:45 EDT.
        // 02:30 does not exist that night, so 01:30 EST, 03:30 EDT and
        // 04:30 EDT are due.
        let last = ms("2025-03-09T00:30:00-05:00");
        let now = ms("2025-03-09T04:45:00-04:00");
        let plan = plan(&fire_all(3 * 3_600, 2), &spec, Some(last), now);
        assert_eq!(
            plan.fire,
            vec![
                ms("2025-03-09T03:30:00-04:00"),
                ms("2025-03-09T04:30:00-04:00"),
            ]
        );
        assert_eq!(plan.missed, 1); // 01:30 EST
    }

    #[test]
    fn cron_skip_and_fire_latest_count_the_same_due_triggers() {
        let spec = Spec::cron("0 */6 * * *", "UTC").expect("valid cron");
        let now = T0 + 10 * DAY + HOUR;
        let skip = plan(&MisfirePolicy::Skip, &spec, Some(T0), now);
        assert_eq!(
            skip,
            CatchUp {
                fire: vec![],
                missed: 40
            }
        );
        let latest = plan(&MisfirePolicy::FireLatest, &spec, Some(T0), now);
        assert_eq!(latest.fire, vec![T0 + 10 * DAY]);
        assert_eq!(latest.missed, 39);
    }

    #[test]
    fn fired_plus_missed_accounts_for_every_due_trigger() {
        let spec = every(7);
        let last = T0 + 3;
        for now in [T0 + 10 * SECOND, T0 + HOUR, T0 + 5 * HOUR + 1] {
            let due = spec.count_between(last, now);
            for policy in [
                MisfirePolicy::default(),
                fire_all(60, 3),
                MisfirePolicy::FireLatest,
                MisfirePolicy::Skip,
            ] {
                let plan = plan(&policy, &spec, Some(last), now);
                assert_eq!(plan.fire.len() as u64 + plan.missed, due, "{policy:?}");
                assert!(plan.fire.iter().all(|t| *t > last && *t <= now));
            }
        }
    }
}
