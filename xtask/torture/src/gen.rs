//! The workload, the operators' actions and the fault schedule of one run, drawn from its
//! seed. Nothing here touches Redis or the clock: a seed always gives the same [`Plan`], so a
//! printed seed replays the same run (the timing of real processes still varies, which is why
//! the checker reads what happened rather than assuming it).
//!
//! The timeline alternates phases: bursts (tasks at a steady rate), trickles (one to three
//! tasks of any shape) and idle gaps of 3 to 6 s, long enough for every server to finish its
//! work and park in its blocking read, so that what follows must wake it.

use crate::job::{queue, Act};
use crate::rng::Rng;

/// One enqueue: every option a user may combine, as drawn.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub(crate) key: u64,
    pub(crate) act: Act,
    pub(crate) queue: &'static str,
    pub(crate) max_retry: u32,
    pub(crate) task_id: Option<String>,
    pub(crate) delay_ms: Option<u64>,
    pub(crate) priority: Option<u8>,
    pub(crate) lifo: bool,
    pub(crate) tenant: Option<String>,
    pub(crate) dedup: Option<DedupSpec>,
    /// `EnqueueOptions::unique`; the plan re-sends the same payload right after (`Enqueue`
    /// with `same_as`), which must be refused while the first holds the lock.
    pub(crate) unique: bool,
    pub(crate) rate_key: Option<String>,
    pub(crate) retention: bool,
    pub(crate) discard: bool,
    pub(crate) timeout_ms: Option<u64>,
}

impl Shape {
    /// A member of a chain or group (queue set by the caller).
    pub(crate) fn new_member(key: u64, act: Act, max_retry: u32) -> Self {
        let mut s = Self::new(key, act, queue::FLOW);
        s.max_retry = max_retry;
        s
    }

    fn new(key: u64, act: Act, queue: &'static str) -> Self {
        Self {
            key,
            act,
            queue,
            max_retry: 3,
            task_id: None,
            delay_ms: None,
            priority: None,
            lifo: false,
            tenant: None,
            dedup: None,
            unique: false,
            rate_key: None,
            retention: false,
            discard: false,
            timeout_ms: None,
        }
    }

    /// A short description for reports.
    pub(crate) fn describe(&self) -> String {
        let mut parts = vec![format!("{:?}", self.act), self.queue.to_string()];
        if self.max_retry != 3 {
            parts.push(format!("max_retry {}", self.max_retry));
        }
        if let Some(id) = &self.task_id {
            parts.push(format!("id {id}"));
        }
        if let Some(d) = self.delay_ms {
            parts.push(format!("in {d} ms"));
        }
        if let Some(p) = self.priority {
            parts.push(format!("level {p}"));
        }
        if self.lifo {
            parts.push("lifo".into());
        }
        if let Some(t) = &self.tenant {
            parts.push(format!("tenant {t}"));
        }
        if let Some(d) = &self.dedup {
            parts.push(format!("{d:?}"));
        }
        if self.unique {
            parts.push("unique".into());
        }
        if let Some(k) = &self.rate_key {
            parts.push(format!("rate key {k}"));
        }
        if self.retention {
            parts.push("retention".into());
        }
        if self.discard {
            parts.push("discard".into());
        }
        if let Some(t) = self.timeout_ms {
            parts.push(format!("timeout {t} ms"));
        }
        parts.join(", ")
    }
}

/// A deduplicated enqueue: the mode and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DedupSpec {
    Reject(String),
    Replace(String),
    Debounce {
        key: String,
        delay_ms: u64,
        max_wait_ms: u64,
    },
    Throttle {
        key: String,
        window_ms: u64,
    },
}

/// A member of a chain or a group.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) key: u64,
    pub(crate) act: Act,
    pub(crate) max_retry: u32,
}

/// An operator's action, on a task named by its model key or on a queue or tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Delete(u64),
    Archive(u64),
    RunNow(u64),
    /// Waits (up to a few seconds) for the task to be active, then asks for its cancel.
    Cancel(u64),
    Prioritize(u64, u8),
    /// A new payload generation and a run time of now.
    Edit(u64),
    PauseQueue(&'static str, u64),
    PauseTenant(String, u64),
    /// A tenant's stored cap and weight.
    TenantChange {
        tenant: String,
        cap: Option<u32>,
        weight: u32,
    },
    /// The limited queue's stored concurrency limit.
    LimitChange(u32),
    /// Lifts the queue-wide block of the block queue, then runs its blocker again at once.
    Unblock(u64),
    /// Events of the plain queue off for this long, then on again.
    EventsOff(u64),
    /// End of the load: run every task still waiting for a far run time, resume what is
    /// paused, lift every block.
    Sweep,
}

/// A fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// SIGKILL worker `i`, start a new one in its place after `ms`.
    KillWorker(usize, u64),
    /// SIGSTOP worker `i`, SIGCONT after `ms`.
    StopWorker(usize, u64),
    /// SIGKILL the scheduler leader, start a new scheduler in its place.
    KillLeader,
    /// SIGSTOP the scheduler leader for `ms` (past its leader TTL when long).
    StopLeader(u64),
    /// The next reply to worker `i` (None: to the producer) is dropped after Redis ran the
    /// call, and its connection cut.
    DropReply(Option<usize>),
    /// All traffic between worker `i` and Redis held for `ms`.
    Stall(usize, u64),
    /// Redis SIGKILLed and started again (append-only, fsync always).
    RedisRestart,
}

/// What happens at one moment of the timeline.
#[derive(Debug, Clone)]
pub(crate) enum What {
    Enqueue(Shape),
    /// The same payload as key `.1`'s enqueue again (unique: must be refused while held).
    Resend(Shape),
    Chain(Vec<Member>),
    Group {
        callback: u64,
        members: Vec<Member>,
    },
    Op(Op),
    Fault(Fault),
}

/// One step, at `at_ms` after the start of the load.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) at_ms: u64,
    pub(crate) what: What,
}

/// The kind of a phase of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PhaseKind {
    Burst,
    Trickle,
    Idle,
}

/// A tenant of the tenant queue and its initial stored settings.
#[derive(Debug, Clone)]
pub(crate) struct TenantSpec {
    pub(crate) name: String,
    pub(crate) weight: u32,
    pub(crate) cap: Option<u32>,
    pub(crate) backlog: Option<u64>,
}

/// The limits the workers configure for the limited queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) concurrency: u32,
    /// Starts per second.
    pub(crate) rate: u32,
    /// Starts per second per rate key.
    pub(crate) per_key: u32,
}

/// Everything a seed decides.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) seed: u64,
    /// Against the testkit's Redis Cluster: no proxies there, so no lost replies or stalls,
    /// and no Redis restart (the fixture cannot restart a node).
    pub(crate) cluster: bool,
    pub(crate) workers: usize,
    pub(crate) concurrency: usize,
    pub(crate) limits: Limits,
    pub(crate) tenants: Vec<TenantSpec>,
    /// Scheduler processes (the runtime schedule is added once they run).
    pub(crate) schedulers: usize,
    /// When the runtime schedule is added and removed (ms into the load).
    pub(crate) schedule_window: (u64, u64),
    pub(crate) load_ms: u64,
    pub(crate) phases: Vec<(u64, u64, PhaseKind)>,
    pub(crate) steps: Vec<Step>,
}

impl Plan {
    /// Tasks the plan enqueues (chain steps and group members and callbacks included).
    pub(crate) fn task_count(&self) -> usize {
        self.steps
            .iter()
            .map(|s| match &s.what {
                What::Enqueue(_) | What::Resend(_) => 1,
                What::Chain(m) => m.len(),
                What::Group { members, .. } => members.len() + 1,
                _ => 0,
            })
            .sum()
    }

    pub(crate) fn faults(&self) -> impl Iterator<Item = (u64, Fault)> + '_ {
        self.steps.iter().filter_map(|s| match s.what {
            What::Fault(f) => Some((s.at_ms, f)),
            _ => None,
        })
    }

    pub(crate) fn ops(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.what, What::Op(_)))
            .count()
    }
}

/// The stream ids of [`Rng::fork`], one per concern.
const TASKS: u64 = 1;
const OPS: u64 = 2;
const FAULTS: u64 = 3;
const SETUP: u64 = 4;

/// Draws the plan of `seed` for a load of `load_ms` (against a cluster when `cluster`).
pub(crate) fn plan(seed: u64, load_ms: u64, cluster: bool) -> Plan {
    let mut setup = Rng::fork(seed, SETUP);
    let workers = setup.range(2, 4) as usize;
    let concurrency = setup.range(4, 8) as usize;
    let limits = Limits {
        concurrency: setup.range(2, 4) as u32,
        rate: setup.range(10, 30) as u32,
        per_key: setup.range(2, 4) as u32,
    };
    let tenants = (0..setup.range(3, 5))
        .map(|i| TenantSpec {
            name: format!("tn{i}"),
            weight: setup.range(1, 3) as u32,
            // The first tenant is always capped, so that the cap is checked in every run.
            cap: (i == 0 || setup.chance(30)).then(|| setup.range(1, 3) as u32),
            backlog: (i == 1).then(|| setup.range(4, 8)),
        })
        .collect::<Vec<_>>();
    let schedulers = 2;
    let schedule_window = (2_000, load_ms.saturating_sub(1_000).max(3_000));

    let mut g = Gen {
        tasks: Rng::fork(seed, TASKS),
        ops: Rng::fork(seed, OPS),
        next_key: 1,
        steps: Vec::new(),
        tenants: tenants.iter().map(|t| t.name.clone()).collect(),
        blocked: false,
        load_ms,
    };
    let mut phases = Vec::new();
    let mut t = 0u64;
    // A warm-up burst, then idle gaps between bursts and trickles.
    let mut kind = PhaseKind::Burst;
    while t < load_ms {
        let len = match kind {
            PhaseKind::Burst => g.tasks.range(2_000, 6_000),
            PhaseKind::Trickle => g.tasks.range(500, 1_500),
            PhaseKind::Idle => g.tasks.range(3_000, 6_000),
        };
        let end = (t + len).min(load_ms);
        match kind {
            PhaseKind::Burst => {
                let per_s = g.tasks.range(10, 40);
                let n = (end - t) * per_s / 1000;
                for i in 0..n {
                    g.draw(t + i * 1000 / per_s.max(1));
                }
            }
            PhaseKind::Trickle => {
                let n = g.tasks.range(1, 3);
                for i in 0..n {
                    g.draw(t + i * (end - t) / n);
                }
            }
            PhaseKind::Idle => {}
        }
        phases.push((t, end, kind));
        t = end;
        kind = match kind {
            PhaseKind::Idle if g.tasks.chance(50) => PhaseKind::Trickle,
            PhaseKind::Idle => PhaseKind::Burst,
            _ => PhaseKind::Idle,
        };
    }
    g.queue_ops(&phases);
    faults(&mut g, seed, &phases, workers, cluster);
    g.steps.push(Step {
        at_ms: load_ms,
        what: What::Op(Op::Sweep),
    });
    g.steps.sort_by_key(|s| s.at_ms);
    Plan {
        seed,
        cluster,
        workers,
        concurrency,
        limits,
        tenants,
        schedulers,
        schedule_window,
        load_ms,
        phases,
        steps: g.steps,
    }
}

/// The drawing state of one plan.
struct Gen {
    tasks: Rng,
    ops: Rng,
    next_key: u64,
    steps: Vec<Step>,
    tenants: Vec<String>,
    /// The block scenario is drawn once per run.
    blocked: bool,
    load_ms: u64,
}

impl Gen {
    fn key(&mut self) -> u64 {
        let k = self.next_key;
        self.next_key += 1;
        k
    }

    fn push(&mut self, at_ms: u64, what: What) {
        self.steps.push(Step { at_ms, what });
    }

    fn op(&mut self, at_ms: u64, op: Op) {
        self.push(at_ms, What::Op(op));
    }

    /// A handler behaviour; `keyed` when a `rate_limited` signal can name a rate key.
    fn act(&mut self, keyed: bool) -> Act {
        let r = &mut self.tasks;
        match r.weighted(&[55, 10, 5, 4, 4, 5, 3, 3]) {
            0 => Act::Ok {
                // Half of them finish within the worker's start-mark window (2 ms).
                ms: match r.weighted(&[50, 40, 10]) {
                    0 => r.range(0, 2) as u32,
                    1 => r.range(5, 100) as u32,
                    _ => r.range(100, 400) as u32,
                },
            },
            1 => Act::Fail {
                times: r.range(1, 3) as u32,
                ms: r.range(0, 30) as u32,
            },
            2 => Act::Panic {
                times: r.range(1, 2) as u32,
            },
            3 => Act::Slow {
                times: r.range(1, 2) as u32,
                ms: 1_500,
            },
            4 => Act::SkipRetry,
            5 => Act::Snooze {
                ms: r.range(200, 1_500) as u32,
            },
            6 if keyed => Act::RateLimited {
                ms: r.range(300, 1_500) as u32,
                queue_wide: false,
            },
            7 => Act::Cancel,
            _ => Act::Ok { ms: 1 },
        }
    }

    /// Draws one enqueue (or a small pattern of them) at `at`.
    fn draw(&mut self, at: u64) {
        let kind = self
            .tasks
            .weighted(&[20, 8, 8, 4, 8, 6, 16, 10, 3, 2, 3, 2, 4, 1]);
        let key = self.key();
        let act = self.act(false);
        let mut s = Shape::new(key, act, queue::PLAIN);
        match kind {
            // Plain: no option that needs a record (a bare stream entry).
            0 => {}
            1 => s.task_id = Some(format!("x-{key}")),
            2 => s.delay_ms = Some(self.tasks.range(300, 3_000)),
            3 => {
                // A victim: waits far longer than the run, for an operator to act on.
                s.act = Act::Ok { ms: 5 };
                s.delay_ms = Some(self.tasks.range(120_000, 300_000));
                if self.tasks.chance(30) {
                    s.task_id = Some(format!("v-{key}"));
                }
                let when = at + self.ops.range(500, 3_000);
                let op = match self.ops.weighted(&[25, 25, 20, 15, 15]) {
                    0 => Op::Delete(key),
                    1 => {
                        if self.ops.chance(50) {
                            let later = when + self.ops.range(500, 3_000);
                            self.op(later, Op::RunNow(key));
                        }
                        Op::Archive(key)
                    }
                    2 => Op::Edit(key),
                    3 => Op::Prioritize(key, self.ops.range(0, 9) as u8),
                    _ => Op::RunNow(key),
                };
                self.op(when, op);
            }
            4 => s.priority = Some(self.tasks.range(0, 9) as u8),
            5 => {
                s.lifo = true;
                if self.tasks.chance(30) {
                    s.priority = Some(self.tasks.range(0, 9) as u8);
                }
            }
            6 => {
                s.queue = queue::TENANT;
                s.tenant = Some(self.tasks.pick(&self.tenants).clone());
                s.lifo = self.tasks.chance(20);
                if self.tasks.chance(30) {
                    s.priority = Some(self.tasks.range(0, 9) as u8);
                }
                if self.tasks.chance(20) {
                    // Delayed tenant tasks count against the backlog cap too.
                    s.delay_ms = Some(self.tasks.range(500, 3_000));
                }
            }
            7 => {
                s.queue = queue::LIMIT;
                if self.tasks.chance(60) {
                    s.rate_key = Some(format!("k{}", self.tasks.range(0, 3)));
                    s.act = self.act(true);
                }
            }
            8 => return self.dedup(at, s),
            9 => {
                // Unique: the same payload again right after must be refused.
                s.unique = true;
                s.delay_ms = Some(self.tasks.range(1_000, 2_000));
                self.push(at + 50, What::Resend(s.clone()));
            }
            10 => return self.chain(at),
            11 => return self.group(at),
            12 => {
                // A long task for an operator to cancel while it runs (or not: half of them
                // run to the end).
                s.act = Act::Long {
                    ms: self.tasks.range(2_000, 5_000) as u32,
                };
                if self.ops.chance(60) {
                    let when = at + self.ops.range(100, 1_000);
                    self.op(when, Op::Cancel(key));
                }
            }
            _ => {
                if !self.blocked && at + 15_000 < self.load_ms {
                    return self.block(at, s);
                }
            }
        }
        if matches!(s.act, Act::Slow { .. }) {
            s.timeout_ms = Some(300);
        }
        if s.act.failures() > 0 {
            // Either enough retries to succeed, or too few: a dead letter.
            s.max_retry = self.tasks.range(0, 3) as u32;
        }
        let dies = s.act == Act::SkipRetry || s.act.failures() > s.max_retry;
        if kind != 0 {
            s.retention = self.tasks.chance(15);
            s.discard = dies && self.tasks.chance(30);
        }
        // Racing operators: a delete or archive sent while the task may be starting (not of a
        // unique task: a delete frees its lock, and the re-send would rightly be let in).
        if !matches!(kind, 3 | 9 | 12) && self.ops.chance(3) {
            let when = at + self.ops.range(0, 150);
            let op = if self.ops.chance(50) {
                Op::Delete(key)
            } else {
                Op::Archive(key)
            };
            self.op(when, op);
        }
        self.push(at, What::Enqueue(s));
    }

    /// Two or three enqueues sharing a dedup key, close together.
    fn dedup(&mut self, at: u64, first: Shape) {
        let dkey = format!("d{}", first.key);
        let spec = match self.tasks.weighted(&[30, 30, 25, 15]) {
            0 => DedupSpec::Reject(dkey),
            1 => DedupSpec::Replace(dkey),
            2 => DedupSpec::Debounce {
                key: dkey,
                delay_ms: self.tasks.range(500, 1_500),
                max_wait_ms: 4_000,
            },
            _ => DedupSpec::Throttle {
                key: dkey,
                window_ms: self.tasks.range(1_000, 3_000),
            },
        };
        let n = self.tasks.range(2, 3);
        for i in 0..n {
            let mut s = if i == 0 {
                first.clone()
            } else {
                Shape::new(self.key(), Act::Ok { ms: 1 }, queue::PLAIN)
            };
            s.act = Act::Ok {
                ms: self.tasks.range(0, 50) as u32,
            };
            if !matches!(spec, DedupSpec::Debounce { .. }) {
                // Waiting long enough that the later enqueues find the holder waiting.
                s.delay_ms = Some(1_000);
            }
            s.dedup = Some(spec.clone());
            self.push(at + i * 150, What::Enqueue(s));
        }
    }

    fn members(&mut self, n: u64) -> Vec<Member> {
        (0..n)
            .map(|_| {
                let key = self.key();
                let act = match self.tasks.weighted(&[70, 15, 15]) {
                    0 => Act::Ok {
                        ms: self.tasks.range(0, 50) as u32,
                    },
                    1 => Act::Fail { times: 1, ms: 5 },
                    _ => Act::SkipRetry,
                };
                Member {
                    key,
                    act,
                    max_retry: 2,
                }
            })
            .collect()
    }

    fn chain(&mut self, at: u64) {
        let n = self.tasks.range(2, 4);
        let m = self.members(n);
        self.push(at, What::Chain(m));
    }

    fn group(&mut self, at: u64) {
        let n = self.tasks.range(2, 6);
        let members = self.members(n);
        let callback = self.key();
        self.push(at, What::Group { callback, members });
    }

    /// The block scenario: a task of the block queue blocks its whole queue for ten minutes;
    /// an operator lifts the block a few seconds later and runs the blocker again; plain
    /// tasks of that queue follow, and must start without waiting for the ten minutes.
    fn block(&mut self, at: u64, mut s: Shape) {
        self.blocked = true;
        s.queue = queue::BLOCK;
        s.act = Act::RateLimited {
            ms: 600_000,
            queue_wide: true,
        };
        let key = s.key;
        self.push(at, What::Enqueue(s));
        let lift = at + self.ops.range(3_000, 5_000);
        self.op(lift, Op::Unblock(key));
        for i in 0..3 {
            let k = self.key();
            let s = Shape::new(k, Act::Ok { ms: 5 }, queue::BLOCK);
            self.push(lift + 1_000 + i * 2_000, What::Enqueue(s));
        }
    }

    /// Operator actions on queues and tenants, spread over the load.
    fn queue_ops(&mut self, phases: &[(u64, u64, PhaseKind)]) {
        let load = self.load_ms;
        let mut t = self.ops.range(4_000, 8_000);
        while t + 5_000 < load {
            let op = match self.ops.weighted(&[30, 30, 15, 10, 15]) {
                0 => Op::PauseQueue(
                    [queue::PLAIN, queue::LIMIT, queue::FLOW][self.ops.range(0, 2) as usize],
                    self.ops.range(1_500, 4_000),
                ),
                1 => Op::PauseTenant(
                    self.ops.pick(&self.tenants).clone(),
                    self.ops.range(1_500, 4_000),
                ),
                2 => Op::TenantChange {
                    tenant: self.tenants[0].clone(),
                    cap: Some(self.ops.range(1, 3) as u32),
                    weight: self.ops.range(1, 3) as u32,
                },
                3 => Op::LimitChange(self.ops.range(1, 5) as u32),
                _ => Op::EventsOff(self.ops.range(1_500, 3_000)),
            };
            self.op(t, op);
            t += self.ops.range(6_000, 14_000);
        }
        // Keep an idle gap free of queue operations at times too: nothing to do.
        let _ = phases;
    }
}

/// The fault schedule: one fault every 6 to 12 s, inside bursts only, so that the idle gaps
/// and the trickles after them test the wake-up paths of healthy servers.
fn faults(g: &mut Gen, seed: u64, phases: &[(u64, u64, PhaseKind)], workers: usize, cluster: bool) {
    let mut r = Rng::fork(seed, FAULTS);
    let mut restarts = 0;
    let mut next = r.range(3_000, 6_000);
    for &(from, to, kind) in phases {
        if kind != PhaseKind::Burst {
            continue;
        }
        while next < to {
            if next >= from {
                let w = r.range(0, workers as u64 - 1) as usize;
                // Stalls, lost replies and restarts need the standalone server and its proxies.
                let weights = if cluster {
                    [35, 35, 0, 0, 15, 15, 0]
                } else {
                    [25, 20, 15, 20, 5, 5, 10]
                };
                let f = match r.weighted(&weights) {
                    0 => Fault::KillWorker(w, r.range(300, 2_000)),
                    1 => Fault::StopWorker(
                        w,
                        if r.chance(50) {
                            r.range(300, 1_000)
                        } else {
                            r.range(3_000, 4_000)
                        },
                    ),
                    2 => Fault::Stall(w, r.range(1_000, 4_000)),
                    3 => Fault::DropReply(r.chance(70).then_some(w)),
                    4 => Fault::KillLeader,
                    5 => Fault::StopLeader(r.range(1_000, 4_000)),
                    _ if restarts < 2 => {
                        restarts += 1;
                        Fault::RedisRestart
                    }
                    _ => Fault::DropReply(None),
                };
                g.push(next, What::Fault(f));
                next += r.range(6_000, 12_000);
            } else {
                next = from + r.range(0, 1_000);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_plan() {
        let a = plan(17, 60_000, false);
        let b = plan(17, 60_000, false);
        assert_eq!(format!("{:?}", a.steps), format!("{:?}", b.steps));
        assert_ne!(
            format!("{:?}", a.steps),
            format!("{:?}", plan(18, 60_000, false).steps)
        );
    }

    #[test]
    fn a_plan_has_idle_gaps_faults_and_operators() {
        let p = plan(3, 90_000, false);
        assert!(p
            .phases
            .iter()
            .any(|(a, b, k)| *k == PhaseKind::Idle && b - a >= 3_000));
        assert!(p.faults().count() >= 3);
        assert!(p.ops() >= 3);
        assert!(p.task_count() > 100);
        // Every fault falls inside a burst.
        for (at, _) in p.faults() {
            assert!(p
                .phases
                .iter()
                .any(|(a, b, k)| *k == PhaseKind::Burst && *a <= at && at < *b));
        }
    }
}
