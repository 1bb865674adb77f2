//! Tenant storm: the tenants of one queue share four worker processes while one of them,
//! picked at random, is SIGKILLed every 2 s and started again. The tenants: `big` with a large
//! backlog, `gold` of weight 3, `capped` with a concurrency cap of 2, and small tenants that
//! arrive in waves while the others still have work; every tenant's tasks are spread over the
//! ten priority levels. Every task records the start and the end of each of its attempts
//! (wall-clock microseconds, one machine's clock for all processes).
//!
//! Books, beyond worker-storm's (every task ran, duplicates at most what the killed processes
//! held, nothing left in the queue or in any tenant):
//!
//! * **The cap was never exceeded.** The broker's promise is about *holds*: a delivery holds a
//!   slot of its tenant from its fetch until it is settled, and a killed worker's deliveries
//!   keep theirs until the recoverer reclaims them. An attempt runs inside its delivery's hold
//!   (it starts after the fetch, its end is recorded before the ack), and an attempt cut short
//!   by its worker's death ran until that death, which comes before the reclaim. So at every
//!   instant the attempts of a tenant that have started and neither ended nor lost their
//!   process (killed attempts count until the moment of the kill) must be at most its cap.
//!   "Exceeded" is more than the cap of them at once. The only at-least-once overlap this
//!   admits is a delivery reclaimed from a worker that was alive but too slow to heartbeat:
//!   that would show here as a violation, and should (a task running twice at once is what a
//!   cap exists to prevent). Beside it, the broker's own count (`Tenants::tenants`, what the
//!   cap counts) is sampled every 100 ms and must never pass the cap either.
//! * **No tenant starved.** For each small tenant, the starts (of any tenant, by the attempt
//!   records) between its enqueue and its first start. A newly arrived tenant takes the current
//!   turn, so the rotation reaches it within one start per tenant in it; on top of that come
//!   the deliveries fetched before it arrived and not started yet, and the starts of other
//!   workers while its own delivery waits in a worker's buffer for a slot (one task's time):
//!   at most the workers' slots plus one buffered delivery each. The bound is therefore
//!   `active tenants + workers x (concurrency + 1)`, against the hundreds or thousands a FIFO
//!   queue would start first (the backlog ahead of it, shown in the notes). A kill that
//!   strands its fetched delivery delays it until the reclaim: then the bound is in time
//!   (the recoverer's idle bound plus 2 s) rather than in starts, and the note says so.
//! * The weights and the level order inside a tenant are reported in the notes (gold's starts
//!   per start of big while both had work; each initial tenant's levels by median start).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use chronos::fred::interfaces::HashesInterface;
use chronos::prelude::*;
use chronos::{Inspect, Maintain, QueueName};
use chronos_broker::{TenantChange, TenantPage, Tenants};
use rand::Rng;

use crate::books;
use crate::procs::{attempt_keys, now_us, spawn_worker, Proc, TenantJob, WorkerOpts, WORK_QUEUE};
use crate::report::Row;

const WORKERS: usize = 4;
const CONCURRENCY: usize = 8;
const KILL_EVERY: Duration = Duration::from_secs(2);
const RECOVER_MIN_IDLE: Duration = Duration::from_secs(2);
/// How often the loop samples the broker's tenant counts (and checks for waves and kills).
const TICK: Duration = Duration::from_millis(100);
const GOLD_WEIGHT: u32 = 3;
const CAP: u32 = 2;

/// The load of one run.
struct Plan {
    big: usize,
    gold: usize,
    capped: usize,
    /// Small tenants, and tasks each.
    small: usize,
    small_tasks: usize,
    /// Small tenants arrive in this many waves, the first after `first_wave`, then one every
    /// `wave_every`.
    waves: usize,
    first_wave: Duration,
    wave_every: Duration,
    sleep_ms: u64,
    /// Give up after this long (the books then say what is left).
    limit: Duration,
}

impl Plan {
    fn new(short: bool) -> Self {
        if short {
            // ~3k tasks of 100 ms on 4 x 8 slots: about ten seconds of work, five kills; the
            // capped tenant alone needs 4 s at its cap.
            Plan {
                big: 2_000,
                gold: 800,
                capped: 80,
                small: 12,
                small_tasks: 10,
                waves: 4,
                first_wave: Duration::from_millis(1_000),
                wave_every: Duration::from_secs(2),
                sleep_ms: 100,
                limit: Duration::from_secs(120),
            }
        } else {
            Plan {
                big: 60_000,
                gold: 20_000,
                capped: 3_000,
                small: 40,
                small_tasks: 25,
                waves: 10,
                first_wave: Duration::from_millis(1_000),
                wave_every: Duration::from_secs(3),
                sleep_ms: 5,
                limit: Duration::from_secs(1_800),
            }
        }
    }

    fn tasks(&self) -> usize {
        self.big + self.gold + self.capped + self.small * self.small_tasks
    }
}

/// A small tenant's arrival.
struct Arrival {
    tenant: String,
    /// Just before its enqueue call.
    at_us: i64,
    /// Tenants with tasks waiting then (the rotation's size, or more: capped ones wait too).
    active: usize,
    /// Tasks waiting in all tenants then: what a FIFO queue would start first.
    backlog: u64,
}

/// A SIGKILL: which process, when it was dead (after the kill was reaped), what it held.
struct Kill {
    pid: u32,
    at_us: i64,
    held: u64,
}

/// One attempt, by its records.
struct Attempt {
    tenant: String,
    task: String,
    pid: u32,
    start: i64,
    end: Option<i64>,
}

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let plan = Plan::new(short);
    let opts = WorkerOpts {
        concurrency: CONCURRENCY,
        recover_min_idle: RECOVER_MIN_IDLE,
    };
    let server = chronos_testkit::RedisServer::start().context("redis")?;
    let url = server.url();
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let queue = QueueName::new(WORK_QUEUE)?;
    broker
        .change_tenant_settings(
            &queue,
            Some("gold"),
            &TenantChange::new().weight(Some(GOLD_WEIGHT)),
        )
        .await?;
    broker
        .change_tenant_settings(
            &queue,
            Some("capped"),
            &TenantChange::new().concurrency(Some(CAP)),
        )
        .await?;
    let mut ids = Vec::new();
    for (tenant, n) in [
        ("big", plan.big),
        ("gold", plan.gold),
        ("capped", plan.capped),
    ] {
        ids.extend(enqueue(&broker, tenant, n, plan.sleep_ms).await?);
    }
    let mut notes = Vec::new();
    let (stats, page) = (
        broker.queue_stats(&queue).await?,
        broker.tenants(&queue, 100).await?,
    );
    if stats.pending < page.waiting {
        // Said once, because every drain check below must not trust the queue's counts alone.
        notes.push(format!(
            "queue_stats counts {} pending while the tenants hold {} waiting: the queue's \
             counts leave tenant tasks out",
            stats.pending, page.waiting
        ));
    }

    let mut fleet: Vec<Proc> = (0..WORKERS)
        .map(|_| spawn_worker(&url, ns, &opts))
        .collect::<Result<_>>()?;
    let mut rng = rand::thread_rng();
    let mut kills: Vec<Kill> = Vec::new();
    let mut arrivals: Vec<Arrival> = Vec::new();
    // The most each tenant held at once by the broker's own count, over all samples.
    let mut held_max: HashMap<String, u64> = HashMap::new();
    let mut samples = 0u64;
    let started = Instant::now();
    let mut next_kill = started + KILL_EVERY;
    let mut small_names = (0..plan.small).map(|i| format!("s{i:02}"));
    let per_wave = plan.small.div_ceil(plan.waves);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let page = broker.tenants(&queue, 1_000).await?;
        samples += 1;
        for t in &page.tenants {
            let m = held_max.entry(t.tenant.clone()).or_default();
            *m = (*m).max(t.running);
        }
        let waves_done = arrivals.len().div_ceil(per_wave.max(1));
        if arrivals.len() < plan.small
            && started.elapsed() >= plan.first_wave + plan.wave_every * waves_done as u32
        {
            for tenant in small_names.by_ref().take(per_wave) {
                arrivals.push(Arrival {
                    active: page.tenants.iter().filter(|t| t.waiting > 0).count(),
                    backlog: page.waiting,
                    at_us: now_us(),
                    tenant: tenant.clone(),
                });
                ids.extend(enqueue(&broker, &tenant, plan.small_tasks, plan.sleep_ms).await?);
            }
        }
        if Instant::now() >= next_kill {
            let i = rng.gen_range(0..fleet.len());
            let pid = fleet[i].pid();
            fleet[i].kill();
            let at_us = now_us();
            // What the dead consumer holds now (every lane, the tenant stream's too) is what
            // its death can run twice; nothing moves it before its lease has been idle for
            // recover_min_idle.
            let held = broker
                .consumers(&queue)
                .await?
                .into_iter()
                .find(|(name, _, _)| *name == fleet[i].id)
                .map(|(_, pending, _)| pending)
                .unwrap_or(0);
            kills.push(Kill { pid, at_us, held });
            fleet[i] = spawn_worker(&url, ns, &opts)?;
            next_kill += KILL_EVERY;
        }
        if arrivals.len() == plan.small && drained(&broker, &queue, &page).await? {
            break;
        }
        if started.elapsed() > plan.limit {
            break;
        }
    }
    let last_kill = kills.last().map(|k| k.at_us).unwrap_or(0);
    let drained_at = wait_drained(&broker, &queue, Duration::from_secs(60)).await?;
    let elapsed = started.elapsed();
    // Graceful stops: a handler still running past the shutdown timeout is cut short here, so
    // its attempt ends at the stop.
    let mut death: HashMap<u32, i64> = kills.iter().map(|k| (k.pid, k.at_us)).collect();
    for p in &mut fleet {
        let pid = p.pid();
        p.stop(Duration::from_secs(10));
        death.insert(pid, now_us());
    }

    let b = books::tasks(&broker, ns, &ids).await?;
    let bound: u64 = kills.iter().map(|k| k.held).sum();
    let page = broker.tenants(&queue, 1_000).await?;
    let attempts = attempts(&broker, ns).await?;
    let mut broken = b.broken(bound, 0);
    if page.waiting + page.running > 0 {
        let left: Vec<(String, u64, u64)> = page
            .tenants
            .iter()
            .filter(|t| t.waiting + t.running > 0)
            .map(|t| (t.tenant.clone(), t.waiting, t.running))
            .collect();
        broken.push(format!(
            "tenants still holding tasks (tenant, waiting, running): {left:?}"
        ));
    }
    if kills.len() < 3 {
        broken.push(format!("only {} kills: the run was too short", kills.len()));
    }

    // The cap, by the attempts' own records.
    let mut by_tenant: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for a in &attempts {
        let end = match a.end.or_else(|| death.get(&a.pid).copied()) {
            Some(e) => e,
            None => {
                broken.push(format!(
                    "attempt of {} (tenant {}) on pid {} has no end and its process neither \
                     died nor stopped",
                    a.task, a.tenant, a.pid
                ));
                continue;
            }
        };
        by_tenant
            .entry(a.tenant.as_str())
            .or_default()
            .push((a.start, end.max(a.start)));
    }
    let capped = by_tenant
        .get("capped")
        .map(|v| max_overlap(v))
        .unwrap_or_default();
    if capped.0 > CAP as usize {
        broken.push(format!(
            "tenant capped ran {} attempts at once (cap {CAP}) at {} us",
            capped.0, capped.1
        ));
    }
    let capped_held = held_max.get("capped").copied().unwrap_or(0);
    if capped_held > CAP as u64 {
        broken.push(format!(
            "the broker counted {capped_held} deliveries held by tenant capped (cap {CAP})"
        ));
    }
    let mut widest: Vec<(usize, &str)> = by_tenant
        .iter()
        .filter(|(t, _)| **t != "capped")
        .map(|(t, v)| (max_overlap(v).0, *t))
        .collect();
    widest.sort_unstable_by(|a, b| b.cmp(a));
    notes.push(format!(
        "cap: tenant capped ran at most {} attempts at once (cap {CAP}; {} attempts, killed ones \
         counted until the kill), held at most {capped_held} by the broker's count in {samples} \
         samples; uncapped tenants reached {:?}",
        capped.0,
        by_tenant.get("capped").map(Vec::len).unwrap_or(0),
        widest.iter().take(3).collect::<Vec<_>>()
    ));

    // Starvation.
    let mut starts: Vec<i64> = attempts.iter().map(|a| a.start).collect();
    starts.sort_unstable();
    let mut firsts: HashMap<&str, i64> = HashMap::new();
    for a in &attempts {
        let f = firsts.entry(a.tenant.as_str()).or_insert(a.start);
        *f = (*f).min(a.start);
    }
    let reclaim_bound = RECOVER_MIN_IDLE + Duration::from_secs(2);
    let (mut worst_starts, mut worst_ms, mut fifo_min) = (0usize, 0f64, u64::MAX);
    let mut delayed_by_kills = Vec::new();
    for a in &arrivals {
        let Some(&first) = firsts.get(a.tenant.as_str()) else {
            broken.push(format!("tenant {} never started a task", a.tenant));
            continue;
        };
        let before = starts.partition_point(|&s| s <= a.at_us);
        let until = starts.partition_point(|&s| s < first);
        let n = until.saturating_sub(before);
        let waited_ms = (first - a.at_us) as f64 / 1000.0;
        let bound = a.active + WORKERS * (CONCURRENCY + 1);
        worst_starts = worst_starts.max(n);
        worst_ms = worst_ms.max(waited_ms);
        fifo_min = fifo_min.min(a.backlog);
        if n > bound {
            let killed = kills.iter().any(|k| k.at_us > a.at_us && k.at_us < first);
            if killed && waited_ms <= reclaim_bound.as_secs_f64() * 1000.0 {
                delayed_by_kills.push(format!("{} ({n} starts, {waited_ms:.0} ms)", a.tenant));
            } else {
                broken.push(format!(
                    "tenant {} arrived beside {} active tenants and waited {n} starts \
                     ({waited_ms:.0} ms) for its first start: more than the bound {bound}",
                    a.tenant, a.active
                ));
            }
        }
    }
    notes.push(format!(
        "starvation: {} small tenants arrived in {} waves; the worst waited {worst_starts} \
         starts / {worst_ms:.0} ms for its first start (bound: active tenants + {} in flight; \
         a FIFO queue would have started at least {fifo_min} tasks first){}",
        arrivals.len(),
        plan.waves,
        WORKERS * (CONCURRENCY + 1),
        if delayed_by_kills.is_empty() {
            String::new()
        } else {
            format!(
                "; delayed by a kill that stranded the delivery, within the reclaim bound \
                 {reclaim_bound:?}: {delayed_by_kills:?}"
            )
        }
    ));
    notes.push(share_and_levels(&attempts));
    notes.push(format!(
        "{:.0} tasks/s through the storm ({:.1} s); duplicates {} <= held at kills {} ({:?})",
        plan.tasks() as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64(),
        b.duplicated,
        bound,
        kills.iter().map(|k| k.held).collect::<Vec<_>>()
    ));

    Ok(vec![Row {
        scenario: "tenant-storm".into(),
        load: format!("{} tasks, {} tenants", plan.tasks(), 3 + plan.small),
        faults: format!("{} SIGKILL / 2 s", kills.len()),
        lost: b.lost.len() as u64,
        duplicated: b.duplicated,
        max_in_flight: kills.iter().map(|k| k.held).max().unwrap_or(0),
        recovery: Some(Duration::from_micros((drained_at - last_kill).max(0) as u64)),
        broken,
        notes,
    }])
}

/// Enqueues `n` tasks of `tenant` with ids `<tenant>-<i>`, task `i` at level `i % 10`, in
/// batches; returns the ids.
async fn enqueue(
    broker: &RedisBroker,
    tenant: &str,
    n: usize,
    sleep_ms: u64,
) -> Result<Vec<String>> {
    let client = Client::new(broker.clone());
    let job = TenantJob {
        tenant: tenant.to_string(),
        sleep_ms,
    };
    let ids: Vec<String> = (0..n).map(|i| format!("{tenant}-{i}")).collect();
    for (c, chunk) in ids.chunks(1000).enumerate() {
        let results = client
            .enqueue_batch(chunk.iter().enumerate().map(|(j, id)| {
                let level = ((c * 1000 + j) % 10) as u8;
                let mut opts = EnqueueOptions::new().task_id(id.clone()).tenant(tenant);
                if let Ok(p) = Priority::level(level) {
                    opts = opts.priority(p);
                }
                (&job, opts)
            }))
            .await?;
        for r in results {
            r?;
        }
    }
    Ok(ids)
}

/// Nothing pending, running, delayed or retrying in the queue, and nothing waiting or held in
/// any tenant (the queue's counts alone may leave tenant tasks out).
async fn drained(broker: &RedisBroker, queue: &QueueName, page: &TenantPage) -> Result<bool> {
    let s = broker.queue_stats(queue).await?;
    Ok(s.pending + s.active + s.retry + s.scheduled == 0 && page.waiting + page.running == 0)
}

/// Waits until [`drained`], polling for up to `within`; returns when (unix us) that was first
/// seen, or when it gave up (the books then say what is left).
async fn wait_drained(broker: &RedisBroker, queue: &QueueName, within: Duration) -> Result<i64> {
    let start = Instant::now();
    loop {
        let page = broker.tenants(queue, 1).await?;
        if drained(broker, queue, &page).await? || start.elapsed() > within {
            return Ok(now_us());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every attempt recorded by the workers.
async fn attempts(broker: &RedisBroker, ns: &str) -> Result<Vec<Attempt>> {
    let (starts_key, ends_key) = attempt_keys(ns);
    let starts: HashMap<String, String> = broker.client().hgetall(starts_key).await?;
    let ends: HashMap<String, String> = broker.client().hgetall(ends_key).await?;
    let mut out = Vec::with_capacity(starts.len());
    for (token, v) in starts {
        let f: Vec<&str> = v.split(' ').collect();
        let [tenant, task, pid, start] = f.as_slice() else {
            bail!("attempt record {token} is malformed: {v:?}");
        };
        out.push(Attempt {
            tenant: tenant.to_string(),
            task: task.to_string(),
            pid: pid.parse()?,
            start: start.parse()?,
            end: ends.get(&token).map(|e| e.parse()).transpose()?,
        });
    }
    Ok(out)
}

/// The most intervals `[start, end)` open at once, and the first instant it was reached. An
/// end and a start at the same microsecond do not overlap (the end is recorded before the ack
/// that frees the slot, the start after the fetch that takes it).
fn max_overlap(intervals: &[(i64, i64)]) -> (usize, i64) {
    let mut events: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    events.sort_unstable();
    let (mut open, mut most, mut at) = (0i64, 0i64, 0i64);
    for (t, d) in events {
        open += i64::from(d);
        if open > most {
            most = open;
            at = t;
        }
    }
    (most.max(0) as usize, at)
}

/// Gold's starts per start of big while both had work, and each initial tenant's levels in
/// the order of their median first start. The window ends when nine in ten of gold's tasks
/// had started: its last starts are re-runs of killed attempts, which come back only after the
/// reclaim, seconds later, while big takes every turn.
fn share_and_levels(attempts: &[Attempt]) -> String {
    let mut gold_firsts: HashMap<&str, i64> = HashMap::new();
    for a in attempts.iter().filter(|a| a.tenant == "gold") {
        let f = gold_firsts.entry(a.task.as_str()).or_insert(a.start);
        *f = (*f).min(a.start);
    }
    let mut gold_firsts: Vec<i64> = gold_firsts.into_values().collect();
    gold_firsts.sort_unstable();
    let last_gold = gold_firsts
        .get((gold_firsts.len() * 9 / 10).saturating_sub(1))
        .copied()
        .unwrap_or(0);
    let count = |t: &str| {
        attempts
            .iter()
            .filter(|a| a.tenant == t && a.start <= last_gold)
            .count()
    };
    let (gold, big) = (count("gold"), count("big"));
    let mut levels_line = Vec::new();
    for t in ["big", "gold", "capped"] {
        // Each task's first attempt; the level is the task's index mod 10 (see `enqueue`).
        let mut first: HashMap<&str, i64> = HashMap::new();
        for a in attempts.iter().filter(|a| a.tenant == t) {
            let f = first.entry(a.task.as_str()).or_insert(a.start);
            *f = (*f).min(a.start);
        }
        let mut by_level: Vec<Vec<i64>> = vec![Vec::new(); 10];
        for (task, s) in first {
            if let Some(i) = task
                .rsplit('-')
                .next()
                .and_then(|i| i.parse::<usize>().ok())
            {
                by_level[i % 10].push(s);
            }
        }
        let mut medians: Vec<(i64, usize)> = by_level
            .iter_mut()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(l, v)| {
                v.sort_unstable();
                (v[v.len() / 2], l)
            })
            .collect();
        medians.sort_unstable();
        let order: Vec<String> = medians.iter().map(|(_, l)| l.to_string()).collect();
        levels_line.push(format!("{t} {}", order.join("")));
    }
    format!(
        "weights: gold (weight {GOLD_WEIGHT}) started {gold} to big's {big} until nine in ten of \
         its tasks had started ({:.2} per start of big); levels by median first start: {}",
        gold as f64 / big.max(1) as f64,
        levels_line.join(", ")
    )
}
