//! The torture run of chronos-rs: a workload that mixes every feature users combine, operators
//! acting while it runs, idle gaps and bursts, and real faults, all drawn from one seed; real
//! worker and scheduler processes against a real `redis-server`; and a checker that holds
//! every task against a model. Run through `cargo xtask torture`.
//!
//! What it promises: when it prints no violation, then for every task it enqueued
//! * it reached the terminal state the model predicts from its behaviour, options and the
//!   operators' acknowledged actions (completed, dead letter with its reason, cancelled,
//!   deleted, archived, discarded), or is listed with why it may not (an enqueue that failed
//!   without an answer);
//! * no handler started after an operator's delete or archive, or a replace or edit of its
//!   payload, was acknowledged, and no operator removed a task whose handler was running or
//!   had succeeded;
//! * it ran no more often than its own retries, the operators' runs and the faults in flight
//!   on the process that ran it explain;
//! * tenant caps, the queue concurrency limit and the rates were never exceeded;
//! * it never waited more than [`check::BOUND_US`] while a server serving its queue had a free
//!   slot (where the model can be sure; see `check/liveness.rs`);
//! * while its queue's events were on, its events told its transitions and ended with a final
//!   one;
//! * the counters and history equal the journal's truth, and no key is left that retention
//!   does not keep (no pending delivery, tenant hold, permit, lock of a finished task).
//!
//! Each violation is printed with its seed, the task, its model history, its runs and events
//! and its Redis state; `--seed S` replays the same workload and fault schedule (the timing of
//! real processes still varies from run to run).
//!
//! Modules: [`gen`] draws the plan from the seed ([`rng`] is its generator, [`job`] what a
//! task carries), [`procs`] runs the processes (this binary in the hidden modes `__worker` and
//! `__scheduler`, writing [`journal`]s), [`ops`] is the producer and the operators, [`faults`]
//! injects faults, [`events`] reads the event streams, [`model`] records what was asked and
//! answered, [`observe`] reads Redis at the end, [`check`] judges, [`report`] prints, and
//! [`run`] plays one seed.

mod check;
mod events;
mod faults;
mod gen;
mod job;
mod journal;
mod model;
mod observe;
mod ops;
mod procs;
mod report;
mod rng;
mod run;

use std::time::Duration;

use anyhow::{bail, Context as _, Result};

/// The seed `--short` runs when none is given: fixed, so CI replays the same plan.
const SHORT_SEED: u64 = 1;
/// The load of a short run, and its drain limit: with setup and checks, under three minutes.
const SHORT_LOAD: Duration = Duration::from_secs(75);
const SHORT_DRAIN: Duration = Duration::from_secs(40);

/// What the command line asked for.
#[derive(Debug)]
struct Args {
    seeds: Vec<u64>,
    load: Duration,
    drain: Duration,
    short: bool,
    cluster: bool,
    show_plan: bool,
    /// Violations printed in full per kind and seed.
    show: usize,
}

fn usage() -> &'static str {
    "usage: cargo xtask torture [--short] [--seed S | --seeds A,B,C | --count N] [--minutes M] [--cluster] [--plan]\n\
     \x20 --short      one seed (1 unless given), 75 s of load: under 3 minutes in all\n\
     \x20 --seed S     replay seed S; --seeds for several, --count N for N seeds from the clock\n\
     \x20 --minutes M  minutes of load per seed (default 2; short: 1.25)\n\
     \x20 --cluster    against the testkit's Redis Cluster (no proxy faults, no restart)\n\
     \x20 --show N     print N violations of each kind in full per seed (default 3)\n\
     \x20 --plan       print the plan of each seed and exit"
}

fn parse(args: &[String]) -> Result<Args> {
    let mut seeds = Vec::new();
    let mut count = None;
    let mut minutes = None;
    let mut short = false;
    let mut cluster = false;
    let mut show_plan = false;
    let mut show = 3;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match a.as_str() {
            "--short" => short = true,
            "--cluster" => cluster = true,
            "--plan" => show_plan = true,
            "--seed" => seeds.push(value("--seed")?.parse().context("--seed")?),
            "--seeds" => {
                for s in value("--seeds")?.split(',') {
                    seeds.push(s.trim().parse().context("--seeds")?);
                }
            }
            "--show" => show = value("--show")?.parse().context("--show")?,
            "--count" => count = Some(value("--count")?.parse::<u64>().context("--count")?),
            "--minutes" => minutes = Some(value("--minutes")?.parse::<f64>().context("--minutes")?),
            "-h" | "--help" => bail!("{}", usage()),
            other => bail!("unknown argument {other:?}\n{}", usage()),
        }
    }
    if let Some(n) = count {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
        let mut r = rng::Rng::new(base);
        seeds.extend((0..n).map(|_| r.next_u64() % 1_000_000_000));
    }
    if seeds.is_empty() {
        seeds.push(SHORT_SEED);
    }
    let load = match minutes {
        Some(m) if m > 0.0 => Duration::from_secs_f64(m * 60.0),
        Some(_) => bail!("--minutes must be positive"),
        None if short => SHORT_LOAD,
        None => Duration::from_secs(120),
    };
    let drain = if short {
        SHORT_DRAIN
    } else {
        Duration::from_secs(90)
    };
    Ok(Args {
        seeds,
        load,
        drain,
        short,
        cluster,
        show_plan,
        show,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__worker") => return procs::worker_main(&args[1..]).await,
        Some("__scheduler") => return procs::scheduler_main(&args[1..]).await,
        _ => {}
    }
    let a = parse(&args)?;
    let load_ms = a.load.as_millis() as u64;
    if a.show_plan {
        for s in &a.seeds {
            let p = gen::plan(*s, load_ms, a.cluster);
            println!("{p:#?}");
        }
        return Ok(());
    }
    let mut outcomes = Vec::new();
    for seed in &a.seeds {
        let plan = gen::plan(*seed, load_ms, a.cluster);
        let idle = plan
            .phases
            .iter()
            .filter(|p| p.2 == gen::PhaseKind::Idle)
            .count();
        eprintln!(
            "== torture seed {seed}: {} tasks, {} operator actions, {} faults, {idle} idle gaps over {:.0} s; {} workers x {} slots; liveness bound {:.0} s",
            plan.task_count(),
            plan.ops(),
            plan.faults().count(),
            plan.load_ms as f64 / 1000.0,
            plan.workers,
            plan.concurrency,
            check::BOUND_US as f64 / 1e6
        );
        let result = tokio::select! {
            r = run::run(&plan, a.drain) => Some(r),
            _ = interrupted() => None,
        };
        let Some(result) = result else {
            eprintln!("torture: interrupted (seed {seed})");
            std::process::exit(130);
        };
        let o = result.with_context(|| format!("seed {seed} could not run"))?;
        eprintln!(
            "== seed {seed}: {} violations ({:.0} s)",
            o.violations.len(),
            o.elapsed.as_secs_f64()
        );
        outcomes.push(o);
    }
    let (short, minutes) = (a.short, a.load.as_secs_f64() / 60.0);
    let cluster = if a.cluster { " --cluster" } else { "" };
    report::print(&outcomes, a.show, &move |seed| {
        if short {
            format!("cargo xtask torture --short --seed {seed}{cluster}")
        } else {
            format!("cargo xtask torture --seed {seed} --minutes {minutes}{cluster}")
        }
    });
    if outcomes.iter().any(|o| !o.violations.is_empty()) {
        eprintln!("torture: violations found (see above, each with its seed)");
        std::process::exit(1);
    }
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
