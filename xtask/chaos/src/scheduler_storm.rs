//! Scheduler storm: three scheduler processes with a 1 s schedule; every 10 s the leader is
//! either SIGKILLed (and a new process started in its place) or SIGSTOPped past its lease and
//! then continued, alternately. Books: every trigger second of the run's window enqueued
//! exactly once.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;

use crate::books;
use crate::procs::{leader, leading, spawn_scheduler, Proc};
use crate::report::Row;

const SCHEDULERS: usize = 3;
pub(crate) const TTL: Duration = Duration::from_secs(2);
const FAULT_EVERY: Duration = Duration::from_secs(10);

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    // Faults at 10 s, 20 s, ...: three in the short run, thirty in the full one.
    let length = if short {
        Duration::from_secs(36)
    } else {
        Duration::from_secs(306)
    };
    let server = chronos_testkit::RedisServer::start().context("redis")?;
    let url = server.url();
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let mut fleet: Vec<Proc> = (0..SCHEDULERS)
        .map(|_| spawn_scheduler(&url, ns, TTL, 0))
        .collect::<Result<_>>()?;
    leader(&broker, None, Duration::from_secs(10)).await?;
    // The first whole second after a leader exists opens the window.
    let from = books::now_secs() + 1;
    let started = Instant::now();
    let (mut kills, mut stops) = (0, 0);
    let mut failovers = Vec::new();
    let mut n: u32 = 0;
    // Faults on a fixed timeline (one every FAULT_EVERY from the start), however long each
    // failover takes.
    while FAULT_EVERY * (n + 1) < length {
        tokio::time::sleep_until((started + FAULT_EVERY * (n + 1)).into()).await;
        let (current, i) = leading(&broker, &fleet).await?;
        let t0 = Instant::now();
        // Alternating, starting with the first kind.
        if n & 1 == 0 {
            fleet[i].kill();
            kills += 1;
            leader(&broker, Some(&current), TTL * 5).await?;
            failovers.push(t0.elapsed());
            fleet[i] = spawn_scheduler(&url, ns, TTL, 0)?;
        } else {
            // Frozen mid-term (a long GC pause, a stalled VM) past its lease: a follower takes
            // over, and the old leader wakes up believing it still leads.
            fleet[i].signal("-STOP")?;
            stops += 1;
            leader(&broker, Some(&current), TTL * 5).await?;
            failovers.push(t0.elapsed());
            tokio::time::sleep((TTL + Duration::from_secs(1)).saturating_sub(t0.elapsed())).await;
            fleet[i].signal("-CONT")?;
        }
        n += 1;
    }
    tokio::time::sleep(length.saturating_sub(started.elapsed())).await;
    // The last whole second before the fleet stops closes it.
    let to = books::now_secs() - 1;
    for p in &mut fleet {
        p.stop(Duration::from_secs(5));
    }
    let b = books::triggers(&broker, (from, to)).await?;
    Ok(vec![Row {
        scenario: "scheduler-storm".into(),
        load: format!("1 s schedule, {SCHEDULERS} procs"),
        faults: format!("{kills} KILL + {stops} STOP / 10 s"),
        lost: b.missing.len() as u64,
        duplicated: b.duplicated,
        max_in_flight: 0,
        recovery: failovers.iter().max().copied(),
        broken: b.broken(),
        notes: vec![format!(
            "{} trigger seconds, window {}..={} ({} s); failovers {:.1?}",
            b.triggers,
            from,
            to,
            to - from + 1,
            failovers
        )],
    }])
}
