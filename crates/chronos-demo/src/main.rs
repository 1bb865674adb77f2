//! The whole system in one process: a worker pool on three weighted queues, a producer, and the
//! cluster scheduler firing a 1 s interval schedule, with a live progress line, until Ctrl-C,
//! SIGTERM (or `--seconds N`), then a graceful shutdown.
//!
//! `cargo xtask demo [--seconds N] [--rate TASKS_PER_S] [--role all|worker|scheduler|producer]
//! [--grace SECS] [--console ADDR|off]`. Role `all` also serves the web console (`chronos dash`)
//! on 127.0.0.1:8080, or a free port when that one is taken. Uses CHRONOS_REDIS_URL when set,
//! otherwise (role `all` only) starts a throwaway redis-server. The roles other than `all` run one part each, as the containers of
//! `deploy/` do; they meet in the Redis of CHRONOS_REDIS_URL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos::prelude::*;

use crate::args::{parse_args, Role, HELP};

mod args;
mod console;
mod panics;
mod producer;
mod redis;
mod scheduler;
mod stop;
// The CLI's tables, so the demo's closing table is the one `chronos queue ls` prints.
#[allow(dead_code)]
#[path = "../../chronos-cli/src/table.rs"]
mod table;
mod tasks;
mod worker;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(args) = parse_args(std::env::args().skip(1))? else {
        print!("{HELP}");
        return Ok(());
    };
    let role = args.role;
    panics::install_hook();
    // Keeps a throwaway server alive for the run.
    let (url, _redis) = redis::url(role)?;
    if role == Role::All {
        println!(
            "chronos demo: redis at {}, {} tasks/s, Ctrl-C to stop",
            redis::redact(&url),
            args.rate
        );
    } else {
        println!(
            "chronos demo, role {}: redis at {}, Ctrl-C or SIGTERM to stop",
            role.name(),
            redis::redact(&url)
        );
    }
    let broker = RedisBroker::builder(&url)
        .namespace("chronos-demo")
        .connect()
        .await?;

    // The critical queue keeps an event stream, for the console's events tab and
    // `chronos events tail critical`.
    if role.produces() {
        chronos::Events::set_events(&broker, &chronos::QueueName::new("critical")?, true).await?;
    }

    let console = match (&args.console, role) {
        (Some(addr), Role::All) => Some(console::serve(&broker, &url, addr).await?),
        _ => None,
    };

    // Counts the runs of the scheduled task in this process (the worker side of it).
    let reconciled = Arc::new(AtomicU64::new(0));
    let server = if role.works() {
        Some(worker::start(&broker, args.grace, reconciled.clone()).await?)
    } else {
        None
    };

    let scheduler = if role.schedules() {
        Some(scheduler::start(&broker).await?)
    } else {
        None
    };

    let enqueued = Arc::new(AtomicU64::new(0));
    let stop = stop::tokio_stop(args.seconds);
    let producer = role.produces().then(|| {
        tokio::spawn(producer::produce(
            Client::new(broker.clone()),
            args.rate,
            enqueued.clone(),
            stop.clone(),
        ))
    });
    if role == Role::Producer {
        println!("producing {} tasks/s", args.rate);
    }

    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut was_leader = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait() => break,
        }
        let secs = started.elapsed().as_secs();
        let leader = scheduler.as_ref().is_some_and(|s| s.is_leader());
        match (&server, role) {
            (Some(server), _) => {
                let s = server.stats();
                let rate = (s.succeeded - last.1) as f64 / last.0.elapsed().as_secs_f64();
                last = (Instant::now(), s.succeeded);
                if role == Role::All {
                    println!(
                        "[{:>4}s] enqueued {:>7}  done {:>7}  retried {:>5}  dead {:>4}  panics {:>4}  running {:>3}  {:>7.1} tasks/s  scheduled runs {:>3}{}",
                        secs,
                        enqueued.load(Ordering::Relaxed),
                        s.succeeded,
                        s.failed - s.dead.min(s.failed),
                        s.dead,
                        panics::PANICS.load(Ordering::Relaxed),
                        s.running,
                        rate,
                        reconciled.load(Ordering::Relaxed),
                        if leader { " (leader)" } else { "" },
                    );
                } else {
                    println!(
                        "[{:>4}s] done {:>7}  retried {:>5}  dead {:>4}  panics {:>4}  running {:>3}  {:>7.1} tasks/s  scheduled runs {:>3}",
                        secs,
                        s.succeeded,
                        s.failed - s.dead.min(s.failed),
                        s.dead,
                        panics::PANICS.load(Ordering::Relaxed),
                        s.running,
                        rate,
                        reconciled.load(Ordering::Relaxed),
                    );
                }
            }
            // Leadership changes are the news of a lone scheduler; a line per second of
            // "still following" would bury them.
            (None, Role::Scheduler) => {
                if was_leader != Some(leader) {
                    was_leader = Some(leader);
                    let what = if leader {
                        "leader: firing the reconcile schedule every second"
                    } else {
                        "follower: another instance fires the schedules"
                    };
                    println!("[{secs:>4}s] {what}");
                }
            }
            (None, _) => println!(
                "[{:>4}s] enqueued {:>7}",
                secs,
                enqueued.load(Ordering::Relaxed)
            ),
        }
    }
    let grace = args.grace.as_secs_f64();
    match role {
        Role::All => println!(
            "stopping: producer first, then a graceful server shutdown (running tasks get up to {grace} s)"
        ),
        Role::Worker => println!(
            "stopping: no new fetches; running tasks get up to {grace} s to finish, the rest are retried elsewhere"
        ),
        Role::Scheduler => println!("stopping: resigning the leadership if held"),
        Role::Producer => println!("stopping"),
    }
    if let Some(producer) = producer {
        producer.await??;
    }
    if let Some(scheduler) = scheduler {
        scheduler.shutdown().await;
    }
    if let Some(server) = server {
        server.shutdown().await;
    }
    if let Some(stop) = console {
        let _ = stop.send(());
    }
    if role == Role::All {
        // The same table as `chronos stats` prints.
        let queues = chronos_admin::Admin::new(broker.clone()).queues().await?;
        print!("{}", table::queue_table(&queues, None));
    } else {
        println!("stopped");
    }
    Ok(())
}
