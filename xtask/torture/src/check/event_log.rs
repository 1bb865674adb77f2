//! Events: for every task whose whole life fell inside a span in which its queue's events were
//! on, the stream tells its transitions: it was enqueued, each attempt started, each failed
//! attempt that was retried says so, and its last event is the final one its end calls for
//! (completed, dead, cancelled; after an operator's delete or archive, some event that says it
//! left: the model does not assume a name for it, only that it is not one of the in-flight
//! kinds), and no attempt has more started events than the journal has starts of it.

use chronos::{EventKind, TaskEvent, TaskState};

use super::facts::{Facts, Violation};
use crate::gen::Op;
use crate::job::Act;
use crate::journal::{Outcome, Run};
use crate::model::{Fate, Role, TaskModel};

/// Margin around a task's life inside an events-on span: the stream is made within a second
/// for other processes, and a settle follows the handler's end by a little.
const MARGIN_US: i64 = 1_000_000;

pub(crate) fn check(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for (key, t) in &f.model.tasks {
        let Some(id) = t.id.as_deref() else { continue };
        if t.shape.dedup.is_some() || t.shape.unique {
            continue;
        }
        let runs = f.runs_of(t.shape.queue, id);
        let Some((born, ended)) = life(f, t, runs) else {
            continue;
        };
        let q = t.shape.queue;
        let covered = f.model.events.iter().any(|w| {
            w.queue == q
                && w.from_us <= born - MARGIN_US
                && w.to_us.is_none_or(|e| e >= ended + MARGIN_US)
        });
        if !covered {
            continue;
        }
        let events = f.obs.events.of(q, id);
        let mut bad = |kind: &'static str, detail: String| {
            out.push(f.task_violation(kind, q, Some(id), Some(*key), detail));
        };
        if !events
            .iter()
            .any(|e| matches!(e.event, EventKind::Enqueued { .. }))
        {
            bad(
                "event-missing-enqueued",
                "no enqueued event for a task created while events were on".into(),
            );
        }
        let missing: Vec<u32> = runs
            .iter()
            .map(|r| r.attempt)
            .filter(|a| {
                !events
                    .iter()
                    .any(|e| matches!(e.event, EventKind::Started { attempt, .. } if attempt == *a))
            })
            .collect();
        if !missing.is_empty() {
            bad(
                "event-missing-started",
                format!(
                    "no started event for attempts {missing:?} (runs: {})",
                    runs.len()
                ),
            );
        }
        // Each started event stands for a start: more of them for one attempt than the
        // journal has starts of it is a transition written twice (a re-sent call).
        for a in runs
            .iter()
            .map(|r| r.attempt)
            .collect::<std::collections::BTreeSet<_>>()
        {
            let started = runs.iter().filter(|r| r.attempt == a).count();
            let said = events
                .iter()
                .filter(|e| matches!(e.event, EventKind::Started { attempt, .. } if attempt == a))
                .count();
            if said > started {
                bad(
                    "event-duplicated",
                    format!("{said} started events for attempt {a}, which started {started} times"),
                );
            }
        }
        for w in runs.windows(2) {
            let retried = matches!(w[0].end, Some((_, Outcome::Fail | Outcome::Panic)))
                || matches!(
                    (w[0].end, t.shape.act),
                    (Some((_, Outcome::Dropped)), Act::Slow { .. })
                );
            // A failed attempt whose worker stalled or died before its retry landed ends by
            // the recoverer's reclaim instead, which says so with its own event.
            if retried
                && w[1].attempt == w[0].attempt + 1
                && !events.iter().any(|e| {
                    matches!(e.event, EventKind::Retried { attempt, .. } | EventKind::Reclaimed { attempt, .. } if attempt == w[0].attempt)
                })
            {
                bad(
                    "event-missing-retried",
                    format!("attempt {} failed and was retried, with no retried event", w[0].attempt),
                );
            }
        }
        final_event(f, t, id, &events, &mut bad);
    }
}

/// When the task came to be and when it ended, by the model and the journal; None while it
/// has no end the model can date.
fn life(f: &Facts<'_>, t: &TaskModel, runs: &[&Run]) -> Option<(i64, i64)> {
    let born = match &t.role {
        Role::Step { chain, index } if *index > 0 => f
            .runs_of_key(chain[index - 1])
            .iter()
            .filter_map(|r| match r.end {
                Some((e, Outcome::Ok)) => Some(e),
                _ => None,
            })
            .min()?,
        Role::Callback { members } => members
            .iter()
            .map(|m| {
                f.runs_of_key(*m)
                    .iter()
                    .filter_map(|r| r.end.map(|(e, _)| e))
                    .max()
            })
            .collect::<Option<Vec<i64>>>()?
            .into_iter()
            .max()?,
        _ => t.ack.as_ref()?.sent_us,
    };
    let ended = match t.fate {
        Fate::Deleted(at) | Fate::Archived(at) => at,
        Fate::Run => runs.last()?.end?.0,
        _ => return None,
    };
    Some((born, ended))
}

fn final_event(
    f: &Facts<'_>,
    t: &TaskModel,
    id: &str,
    events: &[&TaskEvent],
    bad: &mut impl FnMut(&'static str, String),
) {
    let last = events.last();
    match t.fate {
        Fate::Deleted(at) | Fate::Archived(at) => {
            let in_flight = ["enqueued", "started", "progress", "retried", "snoozed"];
            let said = events
                .iter()
                .any(|e| e.at_ms * 1000 >= at - MARGIN_US && !in_flight.contains(&e.event.name()));
            if !said {
                bad(
                    "event-missing-removal",
                    format!(
                        "an operator's {} was acknowledged at {}, and no event says the task left",
                        if matches!(t.fate, Fate::Deleted(_)) {
                            "delete"
                        } else {
                            "archive"
                        },
                        f.model.rel(at)
                    ),
                );
            }
        }
        Fate::Run => {
            // A task run again by an operator after its end has two lives: judge the last.
            let q = t.shape.queue;
            let rec = f.record(q, id);
            // Any success: a stale delivery cut off after it (a stopped worker's) changes
            // nothing.
            let ok = f
                .runs_of(q, id)
                .iter()
                .any(|r| matches!(r.end, Some((_, Outcome::Ok))));
            let want = match rec.map(|r| r.state) {
                Some(TaskState::Archived) => "dead",
                Some(TaskState::Cancelled) => "cancelled",
                Some(TaskState::Completed) => "completed",
                Some(_) => return,
                None if ok => "completed",
                None => "dead",
            };
            let rerun = f
                .model
                .ops
                .iter()
                .any(|o| o.done && o.targets(q, id) && matches!(o.op, Op::RunNow(_)));
            match last {
                Some(e) if e.event.name() == want => {}
                Some(e) if events.iter().any(|x| x.event.name() == want) && !rerun => bad(
                    "event-after-final",
                    format!("its {want} event is followed by a {} event", e.event.name()),
                ),
                _ if events.iter().any(|x| x.event.name() == want) => {}
                _ => bad(
                    "event-missing-final",
                    format!(
                        "ended {want}, but its last event is {:?}",
                        last.map(|e| e.event.name())
                    ),
                ),
            }
        }
        _ => {}
    }
}
