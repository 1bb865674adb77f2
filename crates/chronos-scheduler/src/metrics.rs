//! What the scheduler reports through the `metrics` facade (no recorder, no cost). Counters
//! count this instance's own work: sum them over instances for the cluster (only the leader
//! fires, so the sum counts each trigger once).

use ::metrics::{counter, gauge, histogram};

/// Triggers this instance fired (a task was enqueued), by `queue`.
pub const TRIGGERS_FIRED: &str = "chronos_scheduler_triggers_fired_total";
/// Triggers skipped as missed (misfire policy, passed deadline, a task that cannot be stored),
/// by `queue`.
pub const TRIGGERS_MISSED: &str = "chronos_scheduler_triggers_missed_total";
/// Triggers found already fired, or skipped by the overlap policy or a held unique lock, by
/// `queue`.
pub const TRIGGERS_SUPPRESSED: &str = "chronos_scheduler_triggers_suppressed_total";
/// Seconds from a trigger's time to its firing, by `queue` (histogram).
pub const TRIGGER_LATENESS: &str = "chronos_scheduler_trigger_lateness_seconds";
/// 1 while this instance is the leader, else 0.
pub const LEADER: &str = "chronos_scheduler_leader";
/// Schedules this instance fires as leader that only other live instances register (its own
/// version lacks them: a rolling deploy in progress), as last read; 0 after a term ends.
pub const ADOPTED_SCHEDULES: &str = "chronos_scheduler_adopted_schedules";

/// Sets the [`LEADER`] gauge, and describes every family to the recorder: a recorder keeps
/// the first description of a name and one installed after the scheduler started has none,
/// while this runs at every term's start and renewal (a map look-up in the recorder).
pub(crate) fn leader(is: bool) {
    describe();
    gauge!(LEADER).set(if is { 1.0 } else { 0.0 });
}

/// The `# HELP` text of each family, for the recorder installed now.
fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        TRIGGERS_FIRED,
        "Triggers this scheduler instance fired (a task was enqueued), by queue."
    );
    describe_counter!(
        TRIGGERS_MISSED,
        "Triggers skipped as missed (misfire policy, passed deadline, a task that cannot be \
         stored), by queue."
    );
    describe_counter!(
        TRIGGERS_SUPPRESSED,
        "Triggers found already fired, or skipped by the overlap policy or a held unique lock, \
         by queue."
    );
    describe_histogram!(
        TRIGGER_LATENESS,
        "Seconds from a trigger's time to its firing, by queue."
    );
    describe_gauge!(
        LEADER,
        "1 while this instance is the scheduler leader, else 0."
    );
    describe_gauge!(
        ADOPTED_SCHEDULES,
        "Schedules this leader fires that only other live instances register (a rolling \
         deploy in progress)."
    );
}

/// Counts one fired trigger and records its lateness.
pub(crate) fn fired(queue: &str, lateness_ms: i64) {
    counter!(TRIGGERS_FIRED, "queue" => queue.to_string()).increment(1);
    histogram!(TRIGGER_LATENESS, "queue" => queue.to_string())
        .record(lateness_ms.max(0) as f64 / 1000.0);
}

/// Counts one suppressed trigger.
pub(crate) fn suppressed(queue: &str) {
    counter!(TRIGGERS_SUPPRESSED, "queue" => queue.to_string()).increment(1);
}

/// Counts `n` missed triggers.
pub(crate) fn missed(queue: &str, n: u64) {
    if n > 0 {
        counter!(TRIGGERS_MISSED, "queue" => queue.to_string()).increment(n);
    }
}

/// Sets the [`ADOPTED_SCHEDULES`] gauge.
pub(crate) fn adopted(n: usize) {
    describe();
    gauge!(ADOPTED_SCHEDULES).set(n as f64);
}
