//! What a run prints: one row per seed, the violations counted by kind, then the first few of
//! each kind in full (the task, its model history, its runs and events, its Redis state), each
//! with its seed and the command that replays it.

use std::collections::BTreeMap;

use crate::run::Outcome;

/// Prints the table and the violations, `shown` of each kind in full per seed.
pub(crate) fn print(outcomes: &[Outcome], shown_per_kind: usize, replay: &dyn Fn(u64) -> String) {
    println!(
        "{:<22} {:>6} {:>6} {:>6} {:>5} {:>7} {:>7} {:>8}  violations",
        "seed", "tasks", "runs", "faults", "ops", "events", "drain", "elapsed"
    );
    for o in outcomes {
        println!(
            "{:<22} {:>6} {:>6} {:>6} {:>5} {:>7} {:>6.1}s {:>7.0}s  {}",
            o.seed,
            o.tasks,
            o.runs,
            o.faults,
            o.ops,
            o.events,
            o.drain.as_secs_f64(),
            o.elapsed.as_secs_f64(),
            o.violations.len()
        );
    }
    for o in outcomes {
        if o.violations.is_empty() {
            continue;
        }
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &o.violations {
            *kinds.entry(v.kind).or_default() += 1;
        }
        println!();
        println!("seed {}: {} violations", o.seed, o.violations.len());
        for (k, n) in &kinds {
            println!("  {k:<32} {n}");
        }
        println!("faults of seed {}:", o.seed);
        for l in &o.fault_lines {
            println!("  {l}");
        }
        let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &o.violations {
            let n = shown.entry(v.kind).or_default();
            *n += 1;
            if *n > shown_per_kind {
                continue;
            }
            println!();
            println!(
                "[seed {}] {}{}: {}",
                o.seed,
                v.kind,
                match (&v.queue, &v.task) {
                    (Some(q), Some(t)) => format!(" (queue {q}, task {t})"),
                    (Some(q), None) => format!(" (queue {q})"),
                    _ => String::new(),
                },
                v.detail
            );
            for h in &v.history {
                println!("    {h}");
            }
            for r in &v.redis {
                println!("    redis: {r}");
            }
        }
        println!();
        println!("replay: {}", replay(o.seed));
    }
    let mut all: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for o in outcomes {
        for v in &o.violations {
            let seeds = all.entry(v.kind).or_default();
            if !seeds.contains(&o.seed) {
                seeds.push(o.seed);
            }
        }
    }
    if !all.is_empty() {
        println!();
        println!("violation kinds over all seeds (kind: seeds that show it):");
        for (k, seeds) in &all {
            println!("  {k:<32} {seeds:?}");
        }
    }
    println!();
}
