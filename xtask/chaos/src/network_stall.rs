//! Network stall: the traffic between Redis and some processes is held (connections kept open,
//! nothing cut) for longer than the worker lease (`recover_min_idle`) and the leader TTL, then
//! let go. Two schedulers and two of three workers each sit behind a proxy of their own; each
//! stall hits the proxy of the current scheduler leader, and with it a worker.
//!
//! While stalled, the worker's leases go idle and the other workers take its tasks over; the
//! leader cannot renew, a follower takes over and fences the queue. When the stall ends, the
//! held bytes arrive late: the old worker's records and acks of tasks already run elsewhere
//! (duplicates, bounded by what it held), the old leader's fire calls (refused by the fence).
//! Books: every task ran, duplicates within what the stalled worker held, every trigger once.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::{Maintain, QueueName};
use chronos_testkit::TcpProxy;

use crate::books;
use crate::procs::{leader, leading, spawn_scheduler, spawn_worker, Proc, WorkerOpts, WORK_QUEUE};
use crate::report::Row;
use crate::scheduler_storm::TTL;
use crate::worker_storm::enqueue;

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let (tasks, stalls) = if short { (1_500, 1) } else { (8_000, 3) };
    let opts = WorkerOpts {
        concurrency: 8,
        recover_min_idle: Duration::from_secs(2),
    };
    // Three times the longer of the lease and the leader TTL.
    let stall = opts.recover_min_idle.max(TTL) * 3;
    let server = chronos_testkit::RedisServer::start().context("redis")?;
    let url = server.url();
    let target = ([127, 0, 0, 1], server.port()).into();
    let proxies = [
        TcpProxy::start(target).await?,
        TcpProxy::start(target).await?,
    ];
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let schedulers: Vec<Proc> = proxies
        .iter()
        .map(|p| spawn_scheduler(&p.url(), ns, TTL, 0))
        .collect::<Result<_>>()?;
    leader(&broker, None, Duration::from_secs(10)).await?;
    let from = books::now_secs() + 1;
    let ids = enqueue(&broker, tasks, 100).await?;
    // Workers 0 and 1 behind the proxies, worker 2 direct.
    let mut workers: Vec<Proc> = vec![
        spawn_worker(&proxies[0].url(), ns, &opts)?,
        spawn_worker(&proxies[1].url(), ns, &opts)?,
        spawn_worker(&url, ns, &opts)?,
    ];
    let queue = QueueName::new(WORK_QUEUE)?;
    let mut held = Vec::new();
    let mut failovers = Vec::new();
    let mut recovered = Vec::new();
    for _ in 0..stalls {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (current, k) = leading(&broker, &schedulers).await?;
        proxies[k].stall(true);
        let t0 = Instant::now();
        // Requests already past the proxy are answered by Redis within moments (the replies
        // are held): read what the stalled worker holds once they have landed, well before
        // its lease can go idle.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let h = broker
            .consumers(&queue)
            .await?
            .into_iter()
            .find(|(name, _, _)| *name == workers[k].id)
            .map(|(_, pending, _)| pending)
            .unwrap_or(0);
        held.push(h);
        leader(&broker, Some(&current), TTL * 5).await?;
        failovers.push(t0.elapsed());
        tokio::time::sleep(stall.saturating_sub(t0.elapsed())).await;
        proxies[k].stall(false);
        let lifted = Instant::now();
        // Back in business when the stalled worker talks to its group again (its consumer's
        // idle time restarts with its next fetch or lease refresh).
        while lifted.elapsed() < Duration::from_secs(20) {
            let idle = broker
                .consumers(&queue)
                .await?
                .into_iter()
                .find(|(name, _, _)| *name == workers[k].id)
                .map(|(_, _, idle)| idle);
            if idle.is_some_and(|ms| u128::from(ms) < lifted.elapsed().as_millis()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        recovered.push(lifted.elapsed());
    }
    books::wait_drained(&broker, Duration::from_secs(60)).await?;
    // Let the schedulers fire a few more seconds after everything is flowing again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let to = books::now_secs() - 1;
    for p in &mut workers {
        p.stop(Duration::from_secs(10));
    }
    for mut p in schedulers {
        p.stop(Duration::from_secs(5));
    }
    let b = books::tasks(&broker, ns, &ids).await?;
    let t = books::triggers(&broker, (from, to)).await?;
    let bound: u64 = held.iter().sum();
    let mut broken = b.broken(bound, 0);
    broken.extend(t.broken());
    Ok(vec![Row {
        scenario: "network-stall".into(),
        load: format!("{tasks} tasks + 1 s sched"),
        faults: format!("{stalls} x {:.0} s stall", stall.as_secs_f64()),
        lost: b.lost.len() as u64 + t.missing.len() as u64,
        duplicated: b.duplicated + t.duplicated,
        max_in_flight: held.iter().copied().max().unwrap_or(0),
        recovery: recovered.iter().max().copied(),
        broken,
        notes: vec![format!(
            "task duplicates {} <= held by the stalled worker {bound} ({held:?}); {} trigger \
             seconds, window {from}..={to}, {} doubled; leader failover during the stall {:.1?}; stall end to the stalled worker working \
             again {:.1?}",
            b.duplicated, t.triggers, t.duplicated, failovers, recovered
        )],
    }])
}
