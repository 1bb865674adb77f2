//! The checker: every promise of the run held against the model, one module per concern.
//! Each check is conservative where the model cannot be sure, and says so in its docs; none
//! asserts nothing.

mod books;
mod caps;
mod event_log;
pub(crate) mod facts;
mod liveness;
mod tasks;

pub(crate) use facts::{Books, Facts, KeyInfo, Observed, Record, Violation};
pub(crate) use liveness::BOUND_US;

use crate::gen::Plan;
use crate::model::Model;

/// Every violation the run shows.
pub(crate) fn all(plan: &Plan, model: &Model, obs: &Observed) -> Vec<Violation> {
    let f = Facts::new(plan, model, obs);
    let mut out = Vec::new();
    tasks::check(&f, &mut out);
    caps::check(&f, &mut out);
    liveness::check(&f, &mut out);
    event_log::check(&f, &mut out);
    books::check(&f, &mut out);
    out
}

#[cfg(test)]
mod tests {
    //! The checker on made-up histories: each check fires on the history that breaks its
    //! promise and stays quiet on the one a fault or a pause explains.

    use std::collections::HashMap;

    use super::*;
    use crate::events::Collected;
    use crate::gen::{Fault, Shape};
    use crate::job::{queue, Act};
    use crate::journal::{Outcome, Read, Run};
    use crate::model::{EnqueueAck, Fate, FaultRecord, Life, Role, Window};

    const S: i64 = 1_000_000;

    fn model(tasks: &[(u64, &'static str, Option<&str>)]) -> Model {
        let mut m = Model {
            concurrency: 4,
            ..Model::default()
        };
        m.lives.push(Life {
            slot: 0,
            pid: 10,
            born_us: 0,
            died_us: None,
        });
        m.lives.push(Life {
            slot: 1,
            pid: 11,
            born_us: 0,
            died_us: None,
        });
        for &(key, q, tenant) in tasks {
            let mut s = Shape::new_member(key, Act::Ok { ms: 1 }, 3);
            s.queue = q;
            s.tenant = tenant.map(str::to_string);
            m.register(s, Role::Single);
            let ack = EnqueueAck {
                sent_us: S,
                at_us: S,
                answer: "Created (Pending)".into(),
                due_us: Some(S),
            };
            m.enqueued(key, ack, Some(&format!("t{key}")), Fate::Run);
        }
        m
    }

    fn run(key: u64, q: &str, pid: u32, start: i64, end: i64) -> Run {
        Run {
            key,
            gen: 0,
            task: format!("t{key}"),
            attempt: 1,
            pid,
            queue: q.into(),
            start_us: start,
            end: Some((end, Outcome::Ok)),
        }
    }

    fn observed(runs: Vec<Run>) -> Observed {
        Observed {
            journal: Read {
                runs,
                ..Read::default()
            },
            events: Collected::default(),
            records: HashMap::new(),
            books: HashMap::new(),
            keys: Vec::new(),
            kept: HashMap::new(),
            end_us: 100 * S,
        }
    }

    fn kinds(m: &Model, o: &Observed) -> Vec<&'static str> {
        let plan = crate::gen::plan(1, 10_000, false);
        let mut k: Vec<&str> = all(&plan, m, o).iter().map(|v| v.kind).collect();
        k.sort_unstable();
        k.dedup();
        k
    }

    #[test]
    fn a_second_success_without_a_fault_is_an_unexplained_rerun() {
        let mut m = model(&[(1, queue::PLAIN, None)]);
        let o = observed(vec![
            run(1, queue::PLAIN, 10, S, S + 1_000),
            run(1, queue::PLAIN, 11, 5 * S, 5 * S + 1_000),
        ]);
        assert!(kinds(&m, &o).contains(&"unexplained-rerun"));
        // The first run's process killed right after it: the ack may have been lost.
        m.faults.push(FaultRecord {
            fault: Fault::KillWorker(0, 100),
            pids: vec![10],
            from_us: S + 2_000,
            to_us: 4 * S,
        });
        assert!(!kinds(&m, &o).contains(&"unexplained-rerun"));
    }

    #[test]
    fn a_tenant_over_its_cap_is_caught() {
        let mut m = model(&[
            (1, queue::TENANT, Some("tn0")),
            (2, queue::TENANT, Some("tn0")),
        ]);
        m.caps.insert("tn0".into(), vec![(0, Some(1))]);
        let o = observed(vec![
            run(1, queue::TENANT, 10, S, 3 * S),
            run(2, queue::TENANT, 11, 2 * S, 4 * S),
        ]);
        assert!(kinds(&m, &o).contains(&"tenant-cap-exceeded"));
        m.caps.insert("tn0".into(), vec![(0, Some(2))]);
        assert!(!kinds(&m, &o).contains(&"tenant-cap-exceeded"));
    }

    #[test]
    fn a_long_wait_beside_a_free_slot_is_a_liveness_violation_unless_paused() {
        let mut m = model(&[(1, queue::PLAIN, None)]);
        let o = observed(vec![run(1, queue::PLAIN, 10, 6 * S, 6 * S + 1_000)]);
        assert!(kinds(&m, &o).contains(&"liveness"));
        m.windows.push(Window {
            queue: queue::PLAIN.into(),
            tenant: None,
            what: "paused",
            from_us: 0,
            to_us: Some(5 * S),
        });
        assert!(!kinds(&m, &o).contains(&"liveness"));
    }

    #[test]
    fn a_start_after_an_acknowledged_delete_is_caught() {
        let mut m = model(&[(1, queue::PLAIN, None)]);
        m.operated(
            crate::model::OpRecord {
                op: crate::gen::Op::Delete(1),
                task: Some((queue::PLAIN.into(), "t1".into())),
                sent_us: 2 * S,
                ack_us: 2 * S + 1_000,
                answer: "Done".into(),
                done: true,
            },
            Some(1),
        );
        let o = observed(vec![run(1, queue::PLAIN, 10, 3 * S, 3 * S + 1_000)]);
        assert!(kinds(&m, &o).contains(&"start-after-removal"));
    }

    #[test]
    fn two_replaces_that_overlapped_are_settled_by_the_payload_that_ran() {
        // Keys 1 and 2 replace one task in calls that overlapped; the model handled key 2's
        // answer last, but Redis applied key 1 last: key 1's payload ran.
        let mut m = model(&[(1, queue::PLAIN, None), (2, queue::PLAIN, None)]);
        for (key, sent) in [(1, S), (2, S + 100)] {
            let t = m.tasks.get_mut(&key).unwrap();
            t.id = Some("t1".into());
            t.ack = Some(EnqueueAck {
                sent_us: sent,
                at_us: S + 500,
                answer: "Replaced (Scheduled)".into(),
                due_us: Some(2 * S),
            });
        }
        m.tasks.get_mut(&1).unwrap().fate = Fate::Superseded { by: 2, at: S + 500 };
        let mut r = run(1, queue::PLAIN, 10, 2 * S, 2 * S + 1_000);
        r.task = "t1".into();
        let o = observed(vec![r.clone()]);
        assert!(kinds(&m, &o).contains(&"replaced-payload-ran"));
        m.settle_races(&o.journal.runs);
        assert!(!kinds(&m, &o).contains(&"replaced-payload-ran"));
        assert_eq!(m.tasks[&2].fate, Fate::Superseded { by: 1, at: S + 500 });
        // Calls that did not overlap keep their order: the earlier payload must not run.
        let mut m = model(&[(1, queue::PLAIN, None), (2, queue::PLAIN, None)]);
        m.tasks.get_mut(&2).unwrap().ack.as_mut().unwrap().sent_us = S + 1;
        m.tasks.get_mut(&2).unwrap().ack.as_mut().unwrap().at_us = S + 2;
        m.tasks.get_mut(&1).unwrap().fate = Fate::Superseded { by: 2, at: S + 2 };
        let o = observed(vec![run(1, queue::PLAIN, 10, 2 * S, 2 * S + 1_000)]);
        m.settle_races(&o.journal.runs);
        assert!(kinds(&m, &o).contains(&"replaced-payload-ran"));
    }

    #[test]
    fn an_operator_who_runs_a_delayed_task_early_voids_its_due_time() {
        // Enqueued to run at +60 s; an operator's edit ran it at +2 s, and it succeeded.
        let mut m = model(&[(1, queue::PLAIN, None)]);
        m.tasks.get_mut(&1).unwrap().ack.as_mut().unwrap().due_us = Some(60 * S);
        let o = observed(vec![run(1, queue::PLAIN, 10, 2 * S + 1_000, 2 * S + 2_000)]);
        assert!(
            kinds(&m, &o).contains(&"liveness"),
            "no edit: never ran after its due"
        );
        m.operated(
            crate::model::OpRecord {
                op: crate::gen::Op::Edit(1),
                task: Some((queue::PLAIN.into(), "t1".into())),
                sent_us: 2 * S - 1_000,
                ack_us: 2 * S,
                answer: "Done".into(),
                done: true,
            },
            Some(1),
        );
        assert!(!kinds(&m, &o).contains(&"liveness"));
    }
}
