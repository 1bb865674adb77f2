//! Liveness: no runnable task waits longer than [`BOUND`] while a server that serves its queue
//! has a free slot.
//!
//! When a task becomes runnable, by the model: its enqueue was answered (or the time it was
//! due came), the attempt before it failed and the fixed retry delay passed, its snooze ended,
//! an operator ran or edited it, the step before it in a chain succeeded, or the last member
//! of its group ended. Its wait is from then to its next start (or the end of the drain).
//!
//! Judged only where the answer is certain (conservative, said in the report): tasks of the
//! limited queue and keyed tasks wait for permits by design and are left out, as are
//! deduplicated tasks (their run time moves), waits overlapping a pause of the queue or
//! tenant, the block queue's block, a fault of a worker or of Redis, and a tenant at its cap.
//! A "free slot": some worker process alive and untouched by faults over the whole wait that,
//! at the bound's end, ran fewer attempts than its concurrency.

use super::facts::{Facts, Violation};
use crate::gen::{Fault, Op};
use crate::job::{queue, Act};
use crate::journal::{Outcome, Run};
use crate::model::{Fate, Role, TaskModel};
use crate::procs::RETRY_DELAY;

/// The longest a runnable task may wait while a server has a free slot. What a healthy server
/// needs is well under it: a push wakes the forwarder within milliseconds of a task coming due
/// (the safety pass is `forward_interval`, 500 ms), and a new task wakes the shared blocking
/// read at once. It is shorter than the 5 s the shared read blocks for, so a task that only a
/// read's expiry (not a wake-up) would find is caught, and far above scheduling noise on a
/// loaded 2-core machine (the run's own handlers sleep at most 400 ms in a burst).
pub(crate) const BOUND_US: i64 = 3_000_000;

/// A start this long before the model's estimate still counts as the start it waited for:
/// the estimate is taken after the answer came back, the task may start before.
const EARLY_US: i64 = 200_000;

pub(crate) fn check(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for (key, t) in &f.model.tasks {
        if t.fate != Fate::Run || judged(t).is_err() {
            continue;
        }
        let Some(id) = t.id.as_deref() else { continue };
        let runs = f.runs_of(t.shape.queue, id);
        for (ready, why) in ready_moments(f, *key, t, runs) {
            let next = runs.iter().find(|r| r.start_us >= ready - EARLY_US);
            let started = next.map(|r| r.start_us).unwrap_or(f.obs.end_us);
            if started - ready <= BOUND_US {
                continue;
            }
            if exempt(f, t, ready).is_some() {
                continue;
            }
            let at = ready + BOUND_US;
            let Some((pid, busy)) = free_worker(f, ready, at) else {
                continue;
            };
            out.push(f.task_violation(
                "liveness",
                t.shape.queue,
                Some(id),
                Some(*key),
                format!(
                    "runnable at {} ({why}), {}; waited more than {:.0} s while worker pid {pid} ran {busy} of {} slots (checked at {})",
                    f.model.rel(ready),
                    match next {
                        Some(r) => format!("started at {}", f.model.rel(r.start_us)),
                        None => "never started".into(),
                    },
                    BOUND_US as f64 / 1e6,
                    f.model.concurrency,
                    f.model.rel(at)
                ),
            ));
            // One report per task: its first long wait.
            break;
        }
    }
}

/// Whether the model can judge this task's waits at all (see the module docs).
fn judged(t: &TaskModel) -> Result<(), &'static str> {
    if t.shape.queue == queue::LIMIT || t.shape.rate_key.is_some() {
        return Err("waits for permits");
    }
    if t.shape.dedup.is_some() || t.shape.unique {
        return Err("deduplicated");
    }
    Ok(())
}

/// The moments the task became runnable, each with why, in time order.
fn ready_moments(f: &Facts<'_>, key: u64, t: &TaskModel, runs: &[&Run]) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    match &t.role {
        Role::Step { chain, index } if *index > 0 => {
            let prev_ok = f
                .runs_of_key(chain[index - 1])
                .iter()
                .filter_map(|r| match r.end {
                    Some((e, Outcome::Ok)) => Some(e),
                    _ => None,
                })
                .min();
            if let Some(e) = prev_ok {
                out.push((e, "its chain's previous step succeeded".into()));
            }
        }
        Role::Callback { members } => {
            let mut last = Some(0);
            for m in members {
                let end = f
                    .runs_of_key(*m)
                    .iter()
                    .filter_map(|r| r.end.map(|(e, _)| e))
                    .max();
                last = match (last, end) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
            // The callback comes due when the last member settles; a member the model cannot
            // see settle (no end) leaves it unjudged.
            if let Some(e) = last.filter(|e| *e > 0) {
                out.push((e, "its group's last member ended".into()));
            }
        }
        _ => {
            if let Some(ack) = &t.ack {
                if ack.answer.starts_with("Created") {
                    let due = ack.due_us.unwrap_or(ack.at_us).max(ack.at_us);
                    // An operator who ran, edited (to run now) or archived it before it came
                    // due moved its time: the time it was enqueued with no longer holds (the
                    // 6-minute campaign's long delays showed it; the operator's answer is a
                    // moment of its own below).
                    let moved = f.model.ops.iter().any(|o| {
                        o.done
                            && o.ack_us < due
                            && matches!(o.op, Op::RunNow(k) | Op::Edit(k) | Op::Archive(k) if k == key)
                    });
                    if !moved {
                        out.push((due, "enqueued (or due)".into()));
                    }
                }
            }
        }
    }
    for r in runs {
        let Some((end, o)) = r.end else {
            // Cut by a kill: the recoverer takes the delivery back once its lease has been
            // idle long enough, and it is runnable again when the fault's effect is over (a
            // second after, so that this fault itself no longer excuses the wait).
            let killed = f.model.faults.iter().find(|x| {
                matches!(x.fault, Fault::KillWorker(..))
                    && x.pids.contains(&r.pid)
                    && x.from_us >= r.start_us
            });
            if let Some(x) = killed {
                out.push((
                    x.to_us + 1_000_000,
                    format!("reclaimed after its worker (pid {}) was killed", r.pid),
                ));
            }
            continue;
        };
        let more = r.attempt <= t.shape.max_retry;
        match (o, t.shape.act) {
            (Outcome::Fail | Outcome::Panic, _) | (Outcome::Dropped, Act::Slow { .. }) if more => {
                out.push((
                    end + RETRY_DELAY.as_micros() as i64,
                    format!("retry of attempt {} due", r.attempt),
                ));
            }
            (Outcome::Snooze, Act::Snooze { ms }) => {
                out.push((end + i64::from(ms) * 1000, "its snooze ended".into()));
            }
            _ => {}
        }
    }
    for o in &f.model.ops {
        if o.done
            && t.id
                .as_deref()
                .is_some_and(|id| o.targets(t.shape.queue, id))
            && matches!(o.op, Op::RunNow(k) | Op::Edit(k) if k == key)
        {
            out.push((o.ack_us, format!("operator's {:?} answered", o.op)));
        }
    }
    // A pause lifted: a task that was runnable behind it and had not started yet is runnable
    // again.
    for w in &f.model.windows {
        if w.queue == t.shape.queue && (w.tenant.is_none() || w.tenant == t.shape.tenant) {
            if let Some(end) = w.to_us {
                let waiting =
                    out.iter().any(|(r, _)| *r < end) && !runs.iter().any(|r| r.start_us < end);
                if waiting {
                    out.push((
                        end,
                        format!(
                            "its {} {} ended",
                            w.what,
                            w.tenant.as_deref().map_or("queue", |_| "tenant")
                        ),
                    ));
                }
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

/// Why a wait from `ready` is not judged, if it is not.
fn exempt(f: &Facts<'_>, t: &TaskModel, ready: i64) -> Option<String> {
    let until = ready + BOUND_US;
    for w in &f.model.windows {
        let overlaps = w.from_us <= until && w.to_us.is_none_or(|e| e >= ready);
        if overlaps
            && w.queue == t.shape.queue
            && (w.tenant.is_none() || w.tenant == t.shape.tenant)
        {
            return Some(format!("{} window", w.what));
        }
    }
    if let Some(x) = f.any_fault(ready - 1_000_000, until, false) {
        return Some(format!("fault {:?}", x.fault));
    }
    if t.shape.queue == queue::BLOCK {
        // Blocked from the blocker's signal until the operator's unblock.
        let signal = f
            .obs
            .journal
            .runs
            .iter()
            .filter(|r| r.queue == queue::BLOCK)
            .filter_map(|r| match r.end {
                Some((e, Outcome::RateLimited)) => Some(e),
                _ => None,
            })
            .min();
        let lifted = f
            .model
            .ops
            .iter()
            .find(|o| matches!(o.op, Op::Unblock(_)))
            .map(|o| o.ack_us);
        if let Some(s) = signal {
            if s <= until && lifted.is_none_or(|l| l >= ready) {
                return Some("queue blocked".into());
            }
        }
    }
    if let Some(tenant) = t.shape.tenant.as_deref() {
        let history = f.model.caps.get(tenant).cloned().unwrap_or_default();
        let cap = history
            .iter()
            .rev()
            .find(|(since, _)| *since <= until)
            .and_then(|(_, c)| *c);
        if let Some(cap) = cap {
            let held = f
                .obs
                .journal
                .runs
                .iter()
                .filter(|r| {
                    r.start_us <= until
                        && f.run_end(r) >= ready
                        && f.model
                            .tasks
                            .get(&r.key)
                            .and_then(|x| x.shape.tenant.as_deref())
                            == Some(tenant)
                })
                .count();
            if held >= cap as usize {
                return Some("tenant at its cap".into());
            }
        }
    }
    None
}

/// A worker alive and untouched by faults from `from` to `at` that ran fewer attempts than its
/// concurrency at `at`: its pid and how many it ran.
fn free_worker(f: &Facts<'_>, from: i64, at: i64) -> Option<(String, usize)> {
    f.model
        .lives
        .iter()
        .filter(|l| l.born_us <= from && l.died_us.is_none_or(|d| d > at))
        .filter(|l| f.fault_on(l.pid, from - 1_000_000, at).is_none())
        .map(|l| {
            (
                format!("{} (slot {})", l.pid, l.slot),
                f.running_at(l.pid, at),
            )
        })
        .find(|(_, busy)| *busy < f.model.concurrency)
}
