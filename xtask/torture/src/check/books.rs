//! The books at the end: counters and history against the truth of the journal, and the keys
//! left in Redis against what retention keeps.
//!
//! Counters: a queue's processed counter counts tasks completed, so it must lie between the
//! tasks the journal saw succeed and that plus the successes that ran more than once; the
//! per-minute history must sum to the counter. The failed counter counts failed attempts,
//! including those lost with their worker, so only a lower bound is certain: the failures the
//! journal shows were settled (a later attempt started, or the task ended dead).
//!
//! Keys: every key without a TTL must be one that retention keeps (the queue's structure, its
//! counters and settings, the kept sets and their tasks' records, the event stream), and then
//! hold nothing that should be gone (pending deliveries, waiting or held tenant entries, a
//! rotation with nobody waiting, concurrency permits, the reclaim outbox). Deduplication
//! locks of finished holders are leaks too, unless their mode keeps them (a throttle window).

use std::collections::{BTreeMap, HashMap, HashSet};

use chronos::{Keyspace, QueueName, TaskState};

use super::facts::{Facts, KeyInfo, Violation};
use crate::gen::DedupSpec;
use crate::job::queue;
use crate::journal::Outcome;
use crate::model::Fate;

pub(crate) fn check(f: &Facts<'_>, out: &mut Vec<Violation>) {
    counters(f, out);
    keys(f, out);
    locks(f, out);
}

fn counters(f: &Facts<'_>, out: &mut Vec<Violation>) {
    for (name, _) in queue::ALL {
        let Some(b) = f.obs.books.get(name) else {
            continue;
        };
        // Successes by task id; a task an operator removed after it ran may or may not count.
        let mut ok: BTreeMap<&str, usize> = BTreeMap::new();
        for r in f.obs.journal.runs.iter().filter(|r| r.queue == name) {
            if matches!(r.end, Some((_, Outcome::Ok))) {
                *ok.entry(r.task.as_str()).or_default() += 1;
            }
        }
        let uncertain = ok
            .keys()
            .filter(|id| {
                f.model
                    .key_of(name, id)
                    .and_then(|k| f.model.tasks.get(&k))
                    .is_some_and(|t| matches!(t.fate, Fate::Deleted(_) | Fate::Archived(_)))
            })
            .count() as u64;
        let truth = ok.len() as u64 - uncertain;
        let extra: u64 = ok.values().map(|n| (*n as u64).saturating_sub(1)).sum();
        let processed = b.stats.processed;
        if processed < truth || processed > truth + extra + uncertain {
            out.push(f.violation(
                "processed-count",
                format!(
                    "queue {name}: processed counter {processed}, but {truth} tasks succeeded by the journal (up to {} more allowed: {extra} repeated successes, {uncertain} removed after running)",
                    extra + uncertain
                ),
            ));
        }
        if b.history.0 != processed {
            out.push(f.violation(
                "history-count",
                format!(
                    "queue {name}: the per-minute history sums to {} processed, the counter says {processed}",
                    b.history.0
                ),
            ));
        }
        let mut settled = 0u64;
        let mut by_id: HashMap<&str, Vec<&crate::journal::Run>> = HashMap::new();
        for r in f.obs.journal.runs.iter().filter(|r| r.queue == name) {
            by_id.entry(r.task.as_str()).or_default().push(r);
        }
        for (id, runs) in &by_id {
            for (i, r) in runs.iter().enumerate() {
                if !matches!(
                    r.end,
                    Some((_, Outcome::Fail | Outcome::Panic | Outcome::Skip))
                ) {
                    continue;
                }
                let later = runs[i + 1..].iter().any(|x| x.attempt > r.attempt);
                let last_dead = i + 1 == runs.len()
                    && f.record(name, id)
                        .is_some_and(|x| x.state == TaskState::Archived);
                if later || last_dead {
                    settled += 1;
                }
            }
        }
        if b.stats.failed < settled {
            out.push(f.violation(
                "failed-count",
                format!(
                    "queue {name}: failed counter {}, but the journal shows {settled} failed attempts that were settled",
                    b.stats.failed
                ),
            ));
        }
    }
}

/// The namespace and queue a key belongs to and the rest of its name, for keys
/// `<ns>:{<queue>}:<rest>`.
fn split(key: &str) -> Option<(&str, &str, &str)> {
    let open = key.find('{')?;
    let close = key[open..].find('}')? + open;
    let rest = key.get(close + 2..)?;
    let ns = key.get(..open.checked_sub(1)?)?;
    Some((ns, &key[open + 1..close], rest))
}

/// One queue's key names, as the broker's key layout (`QueueKeys`) makes them: the checks below
/// name no key themselves, so a key renamed there cannot leave them checking a name no run
/// ever writes.
struct QueueKeyNames {
    keys: chronos_broker::QueueKeys,
    /// `QueueKeys::state_keys`: the queue's own keys, which a run may leave behind (those that
    /// must be empty by then are checked first).
    state: HashSet<String>,
}

impl QueueKeyNames {
    fn new(ns: &str, queue: &str) -> Option<Self> {
        let keys = Keyspace::new(ns).ok()?.queue(&QueueName::new(queue).ok()?);
        let state = keys.state_keys().into_iter().collect();
        Some(Self { keys, state })
    }

    /// Why `k` must not be left at the end of a run, if it must not.
    fn must_be_gone(&self, k: &KeyInfo) -> Option<&'static str> {
        let q = &self.keys;
        let key = k.key.as_str();
        if key == q.scheduled() || key == q.retry() {
            Some("tasks still waiting")
        } else if key == q.tenant_waiting() {
            Some("tenant tasks still waiting")
        } else if key == q.tenant_held() {
            Some("tenant slots still held")
        } else if key == q.tenant_rotation() {
            Some("tenants left in the rotation with nothing waiting")
        } else if key == q.reclaimed() {
            Some("reclaim outbox not emptied")
        } else if key == q.active() && k.ttl_ms < 0 {
            // Permits of killed workers stay until they expire: only one that never will is
            // a leak.
            Some("concurrency permits held for ever")
        } else if key == q.cancel() && k.ttl_ms < 0 {
            Some("cancel requests kept for ever")
        } else {
            None
        }
    }

    /// Whether retention keeps `key` without a TTL: the queue's own keys, its event stream and
    /// deduplication counters, and the scheduler's fencing epoch and fire counters of the queue
    /// (named in chronos-broker's redis/schedules.rs, not in the key layout).
    fn kept(&self, key: &str, rest: &str) -> bool {
        self.state.contains(key)
            || key == self.keys.events()
            || key == self.keys.deduplicated()
            || matches!(rest, "sched:fence" | "sched:metrics")
    }
}

fn keys(f: &Facts<'_>, out: &mut Vec<Violation>) {
    let queues: HashSet<&str> = queue::ALL.iter().map(|(q, _)| *q).collect();
    let kept: HashSet<(&str, &str)> = f
        .obs
        .kept
        .iter()
        .flat_map(|(q, ids)| ids.iter().map(move |id| (q.as_str(), id.as_str())))
        .collect();
    let mut names: HashMap<&str, QueueKeyNames> = HashMap::new();
    let mut leaks: Vec<String> = Vec::new();
    for k in &f.obs.keys {
        let Some((ns, q, rest)) = split(&k.key).filter(|(_, q, _)| queues.contains(q)) else {
            continue;
        };
        if !names.contains_key(q) {
            let Some(n) = QueueKeyNames::new(ns, q) else {
                continue;
            };
            names.insert(q, n);
        }
        let n = &names[q];
        if k.kind == "stream" && k.pending > 0 {
            leaks.push(format!("{}: {} deliveries still pending", k.key, k.pending));
        }
        if let Some(why) = n.must_be_gone(k) {
            leaks.push(format!(
                "{}: {why} ({} members, ttl {} ms)",
                k.key, k.len, k.ttl_ms
            ));
            continue;
        }
        if k.key == n.keys.tenant_turns() {
            if k.fields.iter().any(|x| !x.is_empty()) {
                leaks.push(format!(
                    "{}: turns kept for tenants with nothing to do: {:?}",
                    k.key, k.fields
                ));
            }
            continue;
        }
        // The load set keeps its completeness member `\0` only once nothing is waiting or held.
        if k.key == n.keys.tenant_load() {
            if k.len > 1 {
                leaks.push(format!(
                    "{}: loads kept for tenants with nothing to do ({} members)",
                    k.key, k.len
                ));
            }
            continue;
        }
        if k.ttl_ms >= 0 || n.kept(&k.key, rest) {
            continue;
        }
        if let Some(id) = k.key.strip_prefix(n.keys.task("").as_str()) {
            if !kept.contains(&(q, id)) {
                leaks.push(format!(
                    "{}: record of a task in no kept set (no TTL)",
                    k.key
                ));
            }
            continue;
        }
        leaks.push(format!(
            "{}: {} without a TTL, kept by no retention",
            k.key, k.kind
        ));
    }
    if !leaks.is_empty() {
        let n = leaks.len();
        leaks.truncate(25);
        out.push(f.violation(
            "leaked-keys",
            format!("{n} keys left that nothing keeps: {}", leaks.join("; ")),
        ));
    }
}

fn locks(f: &Facts<'_>, out: &mut Vec<Violation>) {
    // The modes of the run's caller keys.
    let mut throttles: HashSet<String> = HashSet::new();
    for t in f.model.tasks.values() {
        if let Some(DedupSpec::Throttle { key, .. }) = &t.shape.dedup {
            throttles.insert(key.clone());
        }
    }
    for (name, b) in &f.obs.books {
        for l in &b.locks {
            if throttles.contains(&l.key) {
                continue;
            }
            let finished = match l.holder_state {
                None => true,
                Some(s) => matches!(
                    s,
                    TaskState::Completed | TaskState::Archived | TaskState::Cancelled
                ),
            };
            if finished {
                out.push(f.violation(
                    "leaked-lock",
                    format!(
                        "queue {name}: lock {:?} still held by {} ({:?}), which has finished (expires in {:?} ms)",
                        l.key, l.holder, l.holder_state, l.expires_in_ms
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn queue_keys_split_into_queue_and_rest() {
        assert_eq!(
            split("tq:{tt-plain}:t:x-1"),
            Some(("tq", "tt-plain", "t:x-1"))
        );
        assert_eq!(split("tq:queues"), None);
    }
}
