//! Per task: the terminal state the model predicts, nothing started after an operator removed
//! a task or a payload was replaced or edited, no run beyond what a fault in flight explains,
//! and the workflows' order (chains, groups) and the schedule's triggers.

use std::collections::{BTreeSet, HashSet};

use chronos::TaskState;

use super::facts::{Facts, Violation};
use crate::gen::Op;
use crate::job::{Act, TICK_KEY};
use crate::journal::{Outcome, Run};
use crate::model::{Fate, Role, TaskModel};

/// How a task ended, as the model expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Completed,
    Dead,
    Discarded,
    Cancelled,
    /// A chain step behind a step that died: never enqueued.
    Never,
}

/// Slack for "an operator's cancel reaches the handler within a second" (the worker polls
/// cancel requests every second) plus the time to settle.
const CANCEL_REACH_US: i64 = 1_500_000;

pub(crate) fn check(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for (key, t) in &f.model.tasks {
        terminal(f, *key, t, out);
    }
    removals(f, out);
    reruns(f, out);
    groups(f, out);
    schedule(f, out);
    journal(f, out);
}

/// Whether a fault touched any run of these: the task may have spent attempts on reclaims, so
/// a task that fails a few times may end dead rather than completed.
fn fault_hit(f: &Facts<'_>, runs: &[&Run]) -> bool {
    runs.iter().any(|r| {
        f.fault_on(r.pid, r.start_us, f.run_end(r) + 1_000_000)
            .is_some()
    }) || runs.iter().any(|r| {
        f.any_fault(r.start_us, f.run_end(r) + 1_000_000, false)
            .is_some_and(|x| x.pids.len() > 1)
    })
}

/// The end the model predicts for a task that runs (fate `Run`).
fn predicted(f: &Facts<'_>, t: &TaskModel) -> End {
    if let Role::Step { chain, index } = &t.role {
        for k in &chain[..*index] {
            if f.model.tasks.get(k).is_some_and(TaskModel::dies) {
                return End::Never;
            }
        }
    }
    if t.shape.act == Act::Cancel {
        return End::Cancelled;
    }
    if t.dies() {
        return if t.shape.discard {
            End::Discarded
        } else {
            End::Dead
        };
    }
    End::Completed
}

fn terminal(f: &Facts<'_>, key: u64, t: &TaskModel, out: &mut Vec<Violation>) {
    let q = t.shape.queue;
    let id = t.id.as_deref();
    let runs = f.runs_of_key(key);
    let rec = id.and_then(|i| f.record(q, i));
    let mut bad = |kind: &'static str, detail: String| {
        out.push(f.task_violation(kind, q, id, Some(key), detail));
    };
    match &t.fate {
        Fate::Unknown => {}
        Fate::NotCreated(why) => {
            if let Some(r) = runs.first() {
                bad(
                    "ran-though-not-created",
                    format!(
                        "the enqueue answered {why:?}, yet a handler ran the payload at {}",
                        f.model.rel(r.start_us)
                    ),
                );
            }
        }
        Fate::Superseded { .. } => {}
        Fate::Deleted(_) => {
            if let Some(r) = rec {
                bad(
                    "deleted-still-stored",
                    format!("deleted by an operator, but stored as {:?}", r.state),
                );
            }
        }
        Fate::Archived(_) => {
            if rec.is_none_or(|r| r.state != TaskState::Archived) {
                bad(
                    "archived-not-kept",
                    format!(
                        "archived by an operator, but stored as {:?}",
                        rec.map(|r| r.state)
                    ),
                );
            }
        }
        Fate::Run => {
            let Some(id) = id else { return };
            if let Some(second) = &t.resent_as {
                bad(
                    "unique-admitted-duplicate",
                    format!("the same payload enqueued again 50 ms later, while this unique task waited, was answered Created as task {second}"),
                );
            }
            let want = predicted(f, t);
            let id_runs = f.runs_of(q, id);
            let hit = fault_hit(f, id_runs);
            let ok = runs.iter().any(|r| matches!(r.end, Some((_, Outcome::Ok))));
            let state = rec.map(|r| r.state);
            let got = match state {
                Some(TaskState::Archived) => Some(End::Dead),
                Some(TaskState::Cancelled) => Some(End::Cancelled),
                Some(TaskState::Completed) => Some(End::Completed),
                Some(_) => None,
                None if ok => Some(End::Completed),
                None if id_runs.is_empty() => Some(End::Never),
                None => match f.last_outcome(q, id) {
                    Some(o) if o.is_failure() => Some(End::Discarded),
                    _ => None,
                },
            };
            // An operator's cancel of a long task: cancelled when it reached the handler well
            // before its natural end, else either end.
            let cancel_ack = f
                .model
                .ops
                .iter()
                .find_map(|o| (o.done && o.op == Op::Cancel(key)).then_some(o.ack_us));
            let mut allowed = vec![want];
            if let (Some(ack), Act::Long { ms }) = (cancel_ack, t.shape.act) {
                let natural = runs
                    .iter()
                    .map(|r| r.start_us + i64::from(ms) * 1000)
                    .max()
                    .unwrap_or(i64::MAX);
                // A fault in flight may re-deliver it (a reclaim) to a handler that never saw
                // the cancel: then either end.
                allowed = if ack + CANCEL_REACH_US < natural && !hit {
                    vec![End::Cancelled]
                } else {
                    vec![End::Completed, End::Cancelled]
                };
            }
            if hit && t.shape.act.failures() > 0 {
                // Reclaims spend attempts too.
                allowed.push(if t.shape.discard {
                    End::Discarded
                } else {
                    End::Dead
                });
            }
            match got {
                Some(g) if allowed.contains(&g) => {
                    if g == End::Dead && !hit {
                        let reason = t.shape.act.dead_reason();
                        let err = rec.and_then(|r| r.last_error.clone()).unwrap_or_default();
                        if !reason.is_empty() && !err.contains(reason) {
                            bad(
                                "dead-letter-reason",
                                format!("dead-lettered with {err:?}, expected a reason containing {reason:?}"),
                            );
                        }
                    }
                }
                Some(End::Never) if want != End::Never => bad(
                    "never-ran",
                    format!("expected {want:?}, but no handler ever ran it (record: {state:?})"),
                ),
                Some(g) => bad(
                    "wrong-terminal-state",
                    format!("expected {allowed:?}, ended {g:?} (record: {state:?})"),
                ),
                None => bad(
                    "terminal-not-reached",
                    format!(
                        "expected {allowed:?}, but it is left {state:?} after the drain ({} runs)",
                        id_runs.len()
                    ),
                ),
            }
        }
    }
}

/// Nothing starts after an operator's delete or archive, or after a replace or edit of its
/// payload, was acknowledged; and an operator's delete or archive never takes a task whose
/// handler is running or has succeeded (issue 35, 2.17).
fn removals(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for o in f.model.ops.iter().filter(|o| o.done) {
        let (key, what) = match o.op {
            Op::Delete(k) => (k, "delete"),
            Op::Archive(k) => (k, "archive"),
            Op::Edit(k) => (k, "edit"),
            _ => continue,
        };
        let Some(t) = f.model.tasks.get(&key) else {
            continue;
        };
        let Some((_, id)) = o.task.as_ref() else {
            continue;
        };
        let id = id.as_str();
        let q = t.shape.queue;
        // Run again later by an operator: starts after that are its own.
        let rerun = f
            .model
            .ops
            .iter()
            .filter(|r| r.done && r.op == Op::RunNow(key) && r.ack_us > o.ack_us)
            .map(|r| r.sent_us)
            .min()
            .unwrap_or(i64::MAX);
        for r in f.runs_of(q, id) {
            if r.start_us > o.ack_us && r.start_us < rerun {
                if what == "edit" {
                    if r.gen < t.gen {
                        out.push(f.task_violation(
                            "old-payload-after-edit",
                            q,
                            Some(id),
                            Some(key),
                            format!(
                                "started with payload generation {} at {}, after the edit to {} was acknowledged at {}",
                                r.gen,
                                f.model.rel(r.start_us),
                                t.gen,
                                f.model.rel(o.ack_us)
                            ),
                        ));
                    }
                } else {
                    out.push(f.task_violation(
                        "start-after-removal",
                        q,
                        Some(id),
                        Some(key),
                        format!(
                            "a handler started at {}, after the operator's {what} was acknowledged at {}",
                            f.model.rel(r.start_us),
                            f.model.rel(o.ack_us)
                        ),
                    ));
                }
            }
        }
        if what == "edit" {
            continue;
        }
        // Conservative: only a handler that started before the call was sent and ended after
        // it was answered certainly ran through it; only a success that ended before the call
        // was sent certainly ran before it.
        for r in f.runs_of(q, id) {
            let through = r.start_us < o.sent_us && f.run_end(r) > o.ack_us && r.end.is_some();
            let succeeded_before = matches!(r.end, Some((e, Outcome::Ok)) if e < o.sent_us);
            let kept = t.shape.retention || matches!(t.role, Role::Step { .. });
            if through || (succeeded_before && !(what == "delete" && kept)) {
                out.push(f.task_violation(
                    "removed-after-run",
                    q,
                    Some(id),
                    Some(key),
                    format!(
                        "the operator's {what} (sent {}, answered Done {}) took a task whose handler {} (attempt {} started {})",
                        f.model.rel(o.sent_us),
                        f.model.rel(o.ack_us),
                        if through { "was running" } else { "had already succeeded" },
                        r.attempt,
                        f.model.rel(r.start_us)
                    ),
                ));
                break;
            }
        }
    }
    // A replaced or debounced payload must not start once the replace was acknowledged.
    for (key, t) in &f.model.tasks {
        if let Fate::Superseded { by, at } = t.fate {
            for r in f.runs_of_key(*key) {
                if r.start_us > at {
                    out.push(f.task_violation(
                        "replaced-payload-ran",
                        t.shape.queue,
                        t.id.as_deref(),
                        Some(*key),
                        format!(
                            "payload of key {key} started at {} though key {by} replaced it at {}",
                            f.model.rel(r.start_us),
                            f.model.rel(at)
                        ),
                    ));
                }
            }
        }
    }
}

/// Every run of a task after its first is explained: the attempt before it failed or snoozed,
/// an operator ran it again, or a fault was in flight on the process that ran it.
fn reruns(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let mut ids: Vec<(&str, &str)> = f
        .by_id
        .iter()
        .flat_map(|(q, m)| m.keys().map(move |id| (*q, *id)))
        .collect();
    ids.sort_unstable();
    for (queue, id) in ids {
        let runs = f.runs_of(queue, id);
        for w in runs.windows(2) {
            let (prev, cur) = (w[0], w[1]);
            let retried = matches!(
                prev.end,
                Some((
                    _,
                    Outcome::Fail
                        | Outcome::Panic
                        | Outcome::Dropped
                        | Outcome::Snooze
                        | Outcome::RateLimited
                ))
            ) && prev.end.is_some_and(|(e, _)| e <= cur.start_us);
            let key = f.model.key_of(queue, id);
            let by_operator = f.model.ops.iter().any(|o| {
                o.done
                    && o.targets(queue, id)
                    && matches!(o.op, Op::RunNow(_) | Op::Edit(_) | Op::Unblock(_))
                    && o.ack_us > prev.start_us
                    && o.sent_us < cur.start_us
            });
            let prev_end = prev.end.map(|(e, _)| e).unwrap_or(cur.start_us);
            let fault = f
                .fault_on(
                    prev.pid,
                    prev.start_us,
                    prev_end.max(prev.start_us) + 1_000_000,
                )
                .is_some()
                // A fault on the second run's process: a stale delivery it took before it
                // stopped or stalled (reclaimed and run meanwhile elsewhere), which
                // at-least-once allows.
                || f.fault_on(cur.pid, prev.start_us - 10_000_000, cur.start_us)
                    .is_some()
                || f.any_fault(prev.start_us, cur.start_us, false)
                    .is_some_and(|x| x.pids.len() > 1)
                || prev.end.is_none();
            if retried || by_operator || fault {
                continue;
            }
            let q = key
                .and_then(|k| f.model.tasks.get(&k))
                .map(|t| t.shape.queue)
                .unwrap_or(prev.queue.as_str());
            out.push(f.task_violation(
                "unexplained-rerun",
                q,
                Some(id),
                key,
                format!(
                    "ran again at {} (attempt {}) after a run that ended {:?}, with no fault in flight and no operator's run",
                    f.model.rel(cur.start_us),
                    cur.attempt,
                    prev.end.map(|(_, o)| o)
                ),
            ));
        }
    }
}

/// Groups: the callback runs with counts that match its members; chains: a step starts only
/// after its predecessor succeeded.
fn groups(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for (key, t) in &f.model.tasks {
        match &t.role {
            Role::Callback { members } if t.fate == Fate::Run => {
                let Some(id) = t.id.as_deref() else { continue };
                let member_runs: Vec<&Run> = members
                    .iter()
                    .flat_map(|k| f.runs_of_key(*k).iter().copied())
                    .collect();
                let hit = fault_hit(f, &member_runs);
                for g in f.obs.journal.groups.iter().filter(|g| g.key == *key) {
                    let succeeded = members
                        .iter()
                        .filter(|k| {
                            f.runs_of_key(**k)
                                .iter()
                                .any(|r| matches!(r.end, Some((_, Outcome::Ok))))
                        })
                        .count() as u64;
                    let total = members.len() as u64;
                    let counts_ok = g.total == total
                        && g.succeeded + g.failed == total
                        && (hit || g.succeeded == succeeded);
                    if !counts_ok {
                        out.push(f.task_violation(
                            "group-counts",
                            t.shape.queue,
                            Some(id),
                            Some(*key),
                            format!(
                                "callback {} saw {}/{} succeeded/failed of {}, the members' runs say {succeeded} of {total} succeeded",
                                g.task, g.succeeded, g.failed, g.total
                            ),
                        ));
                    }
                }
            }
            Role::Step { chain, index } if *index > 0 => {
                let Some(first) = f.runs_of_key(*key).first() else {
                    continue;
                };
                let prev = chain[index - 1];
                let prev_ok = f
                    .runs_of_key(prev)
                    .iter()
                    .filter_map(|r| match r.end {
                        Some((e, Outcome::Ok)) => Some(e),
                        _ => None,
                    })
                    .min();
                if prev_ok.is_none_or(|e| e > first.start_us) {
                    out.push(f.task_violation(
                        "chain-order",
                        t.shape.queue,
                        t.id.as_deref(),
                        Some(*key),
                        format!(
                            "step {index} started at {} before step {} succeeded ({:?})",
                            f.model.rel(first.start_us),
                            index - 1,
                            prev_ok.map(|e| f.model.rel(e))
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
}

/// The runtime schedule: every trigger second inside its window ran, and none after its removal.
fn schedule(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let Some((added, removed)) = f.model.schedule else {
        return;
    };
    let ticks: BTreeSet<i64> = f
        .runs_of_key(TICK_KEY)
        .iter()
        .filter_map(|r| r.task.rsplit_once(':').and_then(|(_, s)| s.parse().ok()))
        .collect();
    let from = added.div_euclid(1_000_000) + 2;
    let to = removed
        .unwrap_or(f.obs.end_us)
        .div_euclid(1_000_000)
        .saturating_sub(2);
    let missing: Vec<i64> = (from..=to).filter(|s| !ticks.contains(s)).collect();
    if !missing.is_empty() {
        out.push(f.violation(
            "schedule-trigger-missed",
            format!(
                "{} trigger seconds of the schedule's window never ran: {:?}",
                missing.len(),
                missing.iter().take(20).collect::<Vec<_>>()
            ),
        ));
    }
    if let Some(removed) = removed {
        let late: Vec<&i64> = ticks
            .iter()
            .filter(|s| **s * 1_000_000 > removed + 2_000_000)
            .collect();
        if !late.is_empty() {
            out.push(f.violation(
                "schedule-fired-after-removal",
                format!("triggers after the schedule was removed: {late:?}"),
            ));
        }
    }
}

/// The journal itself: every line parsed, every run belongs to a task the run enqueued, and
/// no enqueue became two tasks.
fn journal(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for l in f.obs.journal.bad_lines.iter().take(5) {
        out.push(f.violation("journal-line", format!("unreadable journal line {l:?}")));
    }
    let mut seen = HashSet::new();
    for r in &f.obs.journal.runs {
        if r.key == TICK_KEY || !seen.insert((r.key, r.task.as_str())) {
            continue;
        }
        let Some(t) = f.model.tasks.get(&r.key) else {
            out.push(f.violation(
                "unknown-task",
                format!(
                    "task {} ran a payload of key {} nobody enqueued",
                    r.task, r.key
                ),
            ));
            continue;
        };
        let ids: BTreeSet<&str> = f
            .runs_of_key(r.key)
            .iter()
            .map(|x| x.task.as_str())
            .collect();
        if ids.len() > 1 && t.id.as_deref() == Some(r.task.as_str()) {
            let kind = if t.shape.unique {
                "unique-admitted-duplicate"
            } else {
                "enqueued-twice"
            };
            out.push(f.task_violation(
                kind,
                t.shape.queue,
                Some(&r.task),
                Some(r.key),
                format!("one enqueue of key {} ran as tasks {ids:?}", r.key),
            ));
        }
    }
}
