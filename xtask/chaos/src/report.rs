use std::time::Duration;

/// One row of the table: what a scenario did and what its books showed.
#[derive(Debug, Default)]
pub(crate) struct Row {
    pub(crate) scenario: String,
    /// The work it carried (tasks, triggers).
    pub(crate) load: String,
    /// The faults injected.
    pub(crate) faults: String,
    /// Tasks (or trigger seconds) that never completed (were never enqueued).
    pub(crate) lost: u64,
    /// Extra runs (or extra enqueues of a trigger).
    pub(crate) duplicated: u64,
    /// The most tasks a faulted process held at one fault: the bound duplicates are checked
    /// against is the sum over all faults.
    pub(crate) max_in_flight: u64,
    /// The worst time from a fault until the system was whole again. Worker storm: from the
    /// last kill until the queue drained (its tasks wait out their lease). Network stall: from
    /// the end of a stall until the stalled worker talked to its group again. Redis restart:
    /// from a kill of Redis until a worker recorded a run again. Scheduler storm and
    /// clock skew: from a fault to the leader until another instance held the lock.
    pub(crate) recovery: Option<Duration>,
    /// The broken promises, each said in a line; empty when the books balance.
    pub(crate) broken: Vec<String>,
    /// Further figures worth a line under the table.
    pub(crate) notes: Vec<String>,
}

impl Row {
    /// A scenario that could not run to its books.
    pub(crate) fn failed(name: &str, why: String) -> Self {
        Self {
            scenario: name.to_string(),
            broken: vec![format!("did not complete: {why}")],
            ..Self::default()
        }
    }
}

/// Prints the table, then the notes and broken promises below it.
pub(crate) fn print(rows: &[Row]) {
    println!(
        "{:<26} {:<24} {:<30} {:>5} {:>6} {:>9} {:>9}  verdict",
        "scenario", "load", "faults", "lost", "dup", "inflight", "recovery"
    );
    for r in rows {
        let recovery = r
            .recovery
            .map(|d| format!("{:.1} s", d.as_secs_f64()))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<26} {:<24} {:<30} {:>5} {:>6} {:>9} {:>9}  {}",
            r.scenario,
            r.load,
            r.faults,
            r.lost,
            r.duplicated,
            r.max_in_flight,
            recovery,
            if r.broken.is_empty() { "ok" } else { "BROKEN" }
        );
    }
    for r in rows {
        for n in &r.notes {
            println!("  {}: {n}", r.scenario);
        }
        for b in &r.broken {
            println!("  {}: BROKEN: {b}", r.scenario);
        }
    }
    println!();
}
