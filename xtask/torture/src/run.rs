//! One run of one seed: start Redis (append-only, fsync always), the worker and scheduler
//! processes and the proxies; play the plan's timeline (enqueues, operators, faults); drain;
//! stop everything gracefully; read what happened and check it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::{
    Change, Events as _, NewSchedule, QueueName, RuntimeSchedules, TenantChange, Tenants as _,
};
use chronos_testkit::{RedisCluster, RedisServer, TcpProxy};

use crate::check::{self, Observed, Violation};
use crate::events;
use crate::faults::{self, lock};
use crate::gen::{Plan, What};
use crate::job::{queue, Tick};
use crate::journal::{self, now_us};
use crate::model::{Life, Model};
use crate::observe;
use crate::ops::Hands;
use crate::procs::{spawn_scheduler, spawn_worker, Backend, Fleet, Slot, WorkerSetup};

/// The namespace of every run (each run has a Redis of its own).
const NS: &str = "tq";
/// The runtime schedule's id.
const SCHEDULE: &str = "tt-tick";
/// Queues whose events are on from the start.
const EVENT_QUEUES: [&str; 4] = [queue::PLAIN, queue::TENANT, queue::FLOW, queue::BLOCK];

/// What a run did and found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) seed: u64,
    pub(crate) tasks: usize,
    pub(crate) runs: usize,
    pub(crate) faults: usize,
    pub(crate) ops: usize,
    pub(crate) events: usize,
    pub(crate) elapsed: Duration,
    /// The longest the drain took after the load.
    pub(crate) drain: Duration,
    /// The faults injected, one line each (when, what, which processes, until when).
    pub(crate) fault_lines: Vec<String>,
    pub(crate) violations: Vec<Violation>,
}

/// Plays `plan` and checks it; `drain_limit` bounds the wait for the queues to empty.
pub(crate) async fn run(plan: &Plan, drain_limit: Duration) -> Result<Outcome> {
    let started = Instant::now();
    let redis = if plan.cluster {
        Backend::Cluster(RedisCluster::start().context("start the redis cluster")?)
    } else {
        Backend::Standalone(
            RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
                .context("start redis")?,
        )
    };
    let url = redis.url();
    let broker = RedisBroker::builder(url.as_str())
        .namespace(NS)
        .connect()
        .await?;
    let model = Arc::new(Mutex::new(Model {
        concurrency: plan.concurrency,
        ..Model::default()
    }));
    setup(&broker, plan, &model).await?;

    let dir = tempfile::Builder::new()
        .prefix("chronos-torture-")
        .tempdir()?;
    // Proxies in front of a standalone server only (a cluster's clients follow redirects to
    // the nodes themselves).
    let target: Option<std::net::SocketAddr> = match &redis {
        Backend::Standalone(s) => Some(([127, 0, 0, 1], s.port()).into()),
        Backend::Cluster(_) => None,
    };
    let producer = match target {
        Some(t) => Some(TcpProxy::start(t).await?),
        None => None,
    };
    let setup = WorkerSetup {
        url: url.clone(),
        ns: NS.into(),
        journal: dir.path().to_path_buf(),
        concurrency: plan.concurrency,
        limits: plan.limits,
    };
    let mut slots = Vec::new();
    for i in 0..plan.workers {
        let proxy = match target {
            Some(t) => Some(TcpProxy::start(t).await?),
            None => None,
        };
        let mut s = setup.clone();
        if let Some(p) = &proxy {
            s.url = p.url();
        }
        let proc = tokio::task::spawn_blocking(move || spawn_worker(&s)).await??;
        lock(&model).lives.push(Life {
            slot: i,
            pid: proc.pid(),
            born_us: now_us(),
            died_us: None,
        });
        slots.push(Slot { proc, proxy });
    }
    let schedulers = (0..plan.schedulers)
        .map(|_| spawn_scheduler(&url, NS))
        .collect::<Result<Vec<_>>>()?;
    let client_broker = RedisBroker::builder(producer.as_ref().map_or(url.clone(), |p| p.url()))
        .namespace(NS)
        .connect()
        .await?;
    let nodes = redis.node_urls();
    let fleet = Arc::new(Mutex::new(Fleet {
        redis,
        workers: slots,
        schedulers,
        producer,
        setup,
    }));
    let hands = Hands {
        client: Client::new(client_broker),
        broker: broker.clone(),
        model: model.clone(),
    };
    let stop_events = Arc::new(AtomicBool::new(false));
    let readers = events::start(broker.clone(), &EVENT_QUEUES, stop_events.clone());

    // The load.
    let t0 = Instant::now();
    lock(&model).t0_us = now_us();
    let mut pending = Vec::new();
    pending.push(tokio::spawn(runtime_schedule(
        broker.clone(),
        model.clone(),
        t0,
        plan.schedule_window,
    )));
    for step in &plan.steps {
        let at = t0 + Duration::from_millis(step.at_ms);
        tokio::time::sleep_until(at.into()).await;
        let h = hands.clone();
        let what = step.what.clone();
        let (fleet, model, broker) = (fleet.clone(), model.clone(), broker.clone());
        pending.push(tokio::spawn(async move {
            match what {
                What::Enqueue(s) => h.enqueue(s, false).await,
                What::Resend(s) => h.enqueue(s, true).await,
                What::Chain(m) => h.chain(m).await,
                What::Group { callback, members } => h.group(callback, members).await,
                What::Op(op) => h.operate(op).await,
                What::Fault(fault) => faults::inject(fleet, model, broker, fault).await,
            }
        }));
    }
    let mut errors = Vec::new();
    for p in pending {
        match p.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(format!("{e:#}")),
            Err(e) => errors.push(format!("task panicked: {e}")),
        }
    }
    let load_end = Instant::now();
    drain(&broker, drain_limit).await;
    let drain_took = load_end.elapsed();
    let end_us = now_us();

    // Stop everything; the end of each process's life is now.
    {
        let f = fleet.clone();
        tokio::task::spawn_blocking(move || lock(&f).stop_all()).await?;
        let stopped = now_us();
        for l in lock(&model).lives.iter_mut() {
            l.died_us.get_or_insert(stopped);
        }
    }
    stop_events.store(true, Ordering::Relaxed);
    let mut collected = events::Collected::default();
    for r in readers {
        let (name, evs) = r.await?;
        collected.by_queue.insert(name, evs);
    }
    let events_seen = collected.by_queue.values().map(Vec::len).sum();

    let journal = journal::read(dir.path())?;
    let mut model = std::mem::take(&mut *lock(&model));
    model.settle_races(&journal.runs);
    let records = observe::records(&broker, &model).await?;
    let (books, kept) = observe::books(&broker).await?;
    let keys = observe::keys(&nodes, NS).await?;
    let runs = journal.runs.len();
    let obs = Observed {
        journal,
        events: collected,
        records,
        books,
        keys,
        kept,
        end_us,
    };
    let mut violations = check::all(plan, &model, &obs);
    for e in errors {
        violations.push(Violation {
            kind: "harness-error",
            queue: None,
            task: None,
            detail: e,
            history: Vec::new(),
            redis: Vec::new(),
        });
    }
    // The Redis state of the first few tasks of each kind of violation.
    let mut per_kind: std::collections::HashMap<&str, usize> = Default::default();
    for v in &mut violations {
        let n = per_kind.entry(v.kind).or_default();
        *n += 1;
        if *n > 3 {
            continue;
        }
        if let (Some(q), Some(id)) = (&v.queue, &v.task) {
            v.redis = observe::task_state(&broker, NS, q, id).await;
        }
    }
    drop(fleet);
    let fault_lines = model
        .faults
        .iter()
        .map(|x| {
            format!(
                "{} {:?} pids {:?}, effect until {}",
                model.rel(x.from_us),
                x.fault,
                x.pids,
                model.rel(x.to_us)
            )
        })
        .collect();
    Ok(Outcome {
        fault_lines,
        seed: plan.seed,
        tasks: model.tasks.len(),
        runs,
        faults: model.faults.len(),
        ops: model.ops.len(),
        events: events_seen,
        elapsed: started.elapsed(),
        drain: drain_took,
        violations,
    })
}

/// Tenant settings and events, before any worker starts.
async fn setup(broker: &RedisBroker, plan: &Plan, model: &Mutex<Model>) -> Result<()> {
    let tq = QueueName::new(queue::TENANT)?;
    for t in &plan.tenants {
        broker
            .change_tenant_settings(
                &tq,
                Some(&t.name),
                &TenantChange::new()
                    .weight(Some(t.weight))
                    .concurrency(t.cap)
                    .backlog(t.backlog),
            )
            .await?;
        lock(model)
            .caps
            .entry(t.name.clone())
            .or_default()
            .push((0, t.cap));
    }
    lock(model)
        .limit_concurrency
        .push((0, plan.limits.concurrency));
    for q in EVENT_QUEUES {
        broker.set_events(&QueueName::new(q)?, true).await?;
        lock(model).open_window(q, None, "events on");
    }
    // Every queue exists before the load (so that the key check finds each one's structure).
    Ok(())
}

/// Adds the runtime schedule at the window's start and removes it at its end.
async fn runtime_schedule(
    broker: RedisBroker,
    model: Arc<Mutex<Model>>,
    t0: Instant,
    (from, to): (u64, u64),
) -> Result<()> {
    let schedules = RuntimeSchedules::new(broker);
    tokio::time::sleep_until((t0 + Duration::from_millis(from)).into()).await;
    let s = NewSchedule::interval(
        SCHEDULE,
        Duration::from_secs(1),
        &Tick {},
        ScheduleOptions::new().queue(queue::TICK),
    )?;
    let added = add_until_done(&schedules, s).await?;
    lock(&model).schedule = Some((added, None));
    tokio::time::sleep_until((t0 + Duration::from_millis(to)).into()).await;
    for _ in 0..40 {
        if schedules.remove(SCHEDULE).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let removed = now_us();
    if let Some(s) = lock(&model).schedule.as_mut() {
        s.1 = Some(removed);
    }
    Ok(())
}

/// Adds a schedule, trying again while Redis is away (a restart may be under way).
async fn add_until_done(schedules: &RuntimeSchedules<RedisBroker>, s: NewSchedule) -> Result<i64> {
    let mut last = None;
    for _ in 0..40 {
        match schedules.add(s.clone()).await {
            Ok(Change::Done | Change::Unchanged) => return Ok(now_us()),
            Ok(other) => return Err(anyhow::anyhow!("schedule add answered {other:?}")),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(anyhow::anyhow!("could not add the schedule: {last:?}"))
}

/// Waits until no queue holds a task waiting or running (for a second in a row), or `limit`.
async fn drain(broker: &RedisBroker, limit: Duration) {
    let start = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    while start.elapsed() < limit {
        let mut busy = false;
        for (name, _) in queue::ALL {
            let Ok(q) = QueueName::new(name) else {
                continue;
            };
            match broker.queue_stats(&q).await {
                Ok(s) if s.pending + s.active + s.scheduled + s.retry == 0 => {}
                _ => busy = true,
            }
            if name == queue::TENANT {
                match broker.tenants(&q, 1).await {
                    Ok(p) if p.waiting + p.running == 0 => {}
                    _ => busy = true,
                }
            }
        }
        if busy {
            quiet_since = None;
        } else if quiet_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
