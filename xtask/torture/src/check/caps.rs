//! Caps, from the handlers' own start and end records: a tenant's concurrency cap, the limited
//! queue's concurrency limit, its rate, and the rate of each of its keys.
//!
//! The caps count deliveries from fetch to settle, and an attempt runs inside its delivery, so
//! the attempts running at once are a lower bound of what the broker holds: more attempts than
//! the cap at once is a broken cap. Two exceptions are left out on purpose (conservative): an
//! attempt of a process that a fault stopped or cut off (SIGSTOP, a stall) may be reclaimed
//! and run elsewhere while the stalled one resumes, which at-least-once delivery allows; and a
//! killed process's attempt counts until its kill.

use std::collections::HashMap;

use super::facts::{Facts, Violation};
use crate::gen::Fault;
use crate::job::queue;
use crate::journal::Run;

/// A stored cap takes effect at each server's next settings read (about a second, two at
/// most): over this long after a change, the larger of the old and the new cap holds.
const SETTINGS_LAG_US: i64 = 3_000_000;

pub(crate) fn check(f: &Facts<'_>, out: &mut Vec<Violation>) {
    tenant_caps(f, out);
    backlogs(f, out);
    limit_concurrency(f, out);
    rates(f, out);
}

/// Whether the run is one the caps judge (see the module docs).
fn counted(f: &Facts<'_>, r: &Run) -> bool {
    !f.model.faults.iter().any(|x| {
        matches!(
            x.fault,
            Fault::StopWorker(..) | Fault::Stall(..) | Fault::RedisRestart
        ) && x.pids.contains(&r.pid)
            && x.from_us <= f.run_end(r)
            && x.to_us >= r.start_us
    })
}

/// The cap in force at `x` from a history of `(since, cap)`: the largest of those in force at
/// any time within the settings lag before `x`; None when none was.
fn cap_at(history: &[(i64, Option<u32>)], x: i64) -> Option<u32> {
    let mut current: Option<Option<u32>> = None;
    let mut best: Option<u32> = None;
    let mut uncapped = false;
    for &(since, cap) in history {
        if since <= x - SETTINGS_LAG_US {
            current = Some(cap);
        } else if since <= x {
            match cap {
                Some(c) => best = Some(best.map_or(c, |b| b.max(c))),
                None => uncapped = true,
            }
        }
    }
    match current {
        Some(Some(c)) => best = Some(best.map_or(c, |b| b.max(c))),
        Some(None) => uncapped = true,
        None => {}
    }
    if uncapped {
        None
    } else {
        best
    }
}

/// The most of `runs` running at once, checked at each start against `cap(start)`: the first
/// start that exceeds it, with the count.
fn exceeds(
    f: &Facts<'_>,
    runs: &[&Run],
    cap: impl Fn(i64) -> Option<u32>,
) -> Option<(i64, usize, u32)> {
    let mut spans: Vec<(i64, i64)> = runs.iter().map(|r| (r.start_us, f.run_end(r))).collect();
    spans.sort_unstable();
    for (i, &(s, _)) in spans.iter().enumerate() {
        let Some(c) = cap(s) else { continue };
        let n = spans[..=i].iter().filter(|(_, e)| *e > s).count();
        if n > c as usize {
            return Some((s, n, c));
        }
    }
    None
}

fn tenant_caps(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let mut by_tenant: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in &f.obs.journal.runs {
        if r.queue != queue::TENANT || !counted(f, r) {
            continue;
        }
        if let Some(t) = f
            .model
            .tasks
            .get(&r.key)
            .and_then(|t| t.shape.tenant.as_deref())
        {
            by_tenant.entry(t).or_default().push(r);
        }
    }
    for (tenant, runs) in by_tenant {
        let history = f.model.caps.get(tenant).cloned().unwrap_or_default();
        if let Some((at, n, cap)) = exceeds(f, &runs, |x| cap_at(&history, x)) {
            out.push(f.violation(
                "tenant-cap-exceeded",
                format!(
                    "tenant {tenant} ran {n} attempts at once at {} (cap {cap})",
                    f.model.rel(at)
                ),
            ));
        }
    }
}

/// A tenant's backlog cap: an enqueue answered `Created` while the tenant already had its cap
/// of tasks waiting (ready or delayed: answered `Created` before this call was sent, not
/// started before it, and not removed) broke the cap. Conservative on timing: a task counts
/// as waiting only if it certainly was for the whole call.
fn backlogs(f: &Facts<'_>, out: &mut Vec<Violation>) {
    use crate::model::Fate;
    for spec in &f.plan.tenants {
        let Some(cap) = spec.backlog else { continue };
        let mine: Vec<(&u64, &crate::model::TaskModel)> = f
            .model
            .tasks
            .iter()
            .filter(|(_, t)| t.shape.tenant.as_deref() == Some(spec.name.as_str()))
            .filter(|(_, t)| {
                t.ack
                    .as_ref()
                    .is_some_and(|a| a.answer.starts_with("Created"))
            })
            .collect();
        for (key, t) in &mine {
            let Some(ack) = &t.ack else { continue };
            let sent = ack.sent_us;
            let waiting = mine
                .iter()
                .filter(|(k, o)| {
                    k != key
                        && o.ack.as_ref().is_some_and(|a| a.at_us < sent)
                        && !f.runs_of_key(**k).iter().any(|r| r.start_us < ack.at_us)
                        && match o.fate {
                            Fate::Deleted(at) | Fate::Archived(at) => at > ack.at_us,
                            _ => true,
                        }
                })
                .count() as u64;
            if waiting >= cap {
                out.push(f.task_violation(
                    "tenant-backlog-exceeded",
                    queue::TENANT,
                    t.id.as_deref(),
                    Some(**key),
                    format!(
                        "tenant {} had {waiting} tasks waiting (backlog cap {cap}), yet this enqueue was answered Created at {}",
                        spec.name,
                        f.model.rel(ack.at_us)
                    ),
                ));
            }
        }
    }
}

fn limit_concurrency(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let runs: Vec<&Run> = f
        .obs
        .journal
        .runs
        .iter()
        .filter(|r| r.queue == queue::LIMIT && counted(f, r))
        .collect();
    let history: Vec<(i64, Option<u32>)> = f
        .model
        .limit_concurrency
        .iter()
        .map(|&(t, c)| (t, Some(c)))
        .collect();
    if let Some((at, n, cap)) = exceeds(f, &runs, |x| cap_at(&history, x)) {
        out.push(f.violation(
            "queue-concurrency-exceeded",
            format!(
                "queue {} ran {n} attempts at once at {} (limit {cap})",
                queue::LIMIT,
                f.model.rel(at)
            ),
        ));
    }
}

/// The most starts in any window of `window_us` (sliding, starting at a start).
fn densest(starts: &mut [i64], window_us: i64) -> (usize, i64) {
    starts.sort_unstable();
    let mut best = (0, 0);
    let mut j = 0;
    for i in 0..starts.len() {
        while starts[i] - starts[j] >= window_us {
            j += 1;
        }
        if i + 1 - j > best.0 {
            best = (i + 1 - j, starts[j]);
        }
    }
    best
}

/// The queue's rate: a generic cell rate algorithm by Redis' clock lets at most `n + 1` starts
/// into any window of one period (the documented bound, burst 0). Starts are stamped at the
/// handler's entry, a little after the permit: one more is allowed for that skew. Per key:
/// fixed windows aligned to the period, so a sliding window spans two of them: `2n`, plus one
/// for the skew.
fn rates(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let limits = f.plan.limits;
    let runs: Vec<&Run> = f
        .obs
        .journal
        .runs
        .iter()
        .filter(|r| r.queue == queue::LIMIT)
        .collect();
    let mut starts: Vec<i64> = runs.iter().map(|r| r.start_us).collect();
    let (n, at) = densest(&mut starts, 1_000_000);
    let bound = limits.rate as usize + 2;
    if n > bound {
        out.push(f.violation(
            "rate-exceeded",
            format!(
                "queue {} started {n} attempts within one second from {} (rate {}/s, bound {bound})",
                queue::LIMIT,
                f.model.rel(at),
                limits.rate
            ),
        ));
    }
    let mut by_key: HashMap<&str, Vec<i64>> = HashMap::new();
    for r in runs {
        if let Some(k) = f
            .model
            .tasks
            .get(&r.key)
            .and_then(|t| t.shape.rate_key.as_deref())
        {
            by_key.entry(k).or_default().push(r.start_us);
        }
    }
    for (k, mut starts) in by_key {
        let (n, at) = densest(&mut starts, 1_000_000);
        let bound = 2 * limits.per_key as usize + 1;
        if n > bound {
            out.push(f.violation(
                "key-rate-exceeded",
                format!(
                    "rate key {k} started {n} attempts within one second from {} (per key {}/s, bound {bound})",
                    f.model.rel(at),
                    limits.per_key
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_change_holds_the_larger_cap_for_the_lag() {
        let h = [(0, Some(1)), (10_000_000, Some(3)), (20_000_000, Some(1))];
        assert_eq!(cap_at(&h, 5_000_000), Some(1));
        assert_eq!(cap_at(&h, 11_000_000), Some(3));
        assert_eq!(cap_at(&h, 21_000_000), Some(3));
        assert_eq!(cap_at(&h, 24_000_000), Some(1));
        assert_eq!(cap_at(&[(0, None)], 5), None);
    }

    #[test]
    fn the_densest_window_is_found() {
        let mut s = vec![0, 100, 200, 1_500_000, 1_600_000];
        assert_eq!(densest(&mut s, 1_000_000).0, 3);
    }
}
