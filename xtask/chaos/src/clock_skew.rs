//! Clock skew: three scheduler processes whose clocks differ by seconds (-2 s, 0, +2 s, through
//! the scheduler's `Clock` seam); every 5 s the leader is stopped gracefully (it resigns) or
//! SIGKILLed, alternately, and started again with the same skew, so leadership keeps moving
//! between early and late clocks. Redis decides what it already decides (the lock's expiry,
//! first registrations). Books: every trigger second of the window enqueued exactly once: a
//! late leader waits for its clock to pass the last fired trigger, an early one catches up.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;

use crate::books;
use crate::procs::{leader, leading, spawn_scheduler, Proc};
use crate::report::Row;
use crate::scheduler_storm::TTL;

const OFFSETS_MS: [i64; 3] = [-2_000, 0, 2_000];
const FAULT_EVERY: Duration = Duration::from_secs(5);

pub(crate) async fn run(short: bool) -> Result<Vec<Row>> {
    let length = Duration::from_secs(if short { 30 } else { 180 });
    let server = chronos_testkit::RedisServer::start().context("redis")?;
    let url = server.url();
    let ns = "chaos";
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let mut fleet: Vec<Proc> = OFFSETS_MS
        .iter()
        .map(|&o| spawn_scheduler(&url, ns, TTL, o))
        .collect::<Result<_>>()?;
    leader(&broker, None, Duration::from_secs(10)).await?;
    // A leader's triggers may come up to the largest skew early or late: the window starts and
    // ends that far inside the run.
    let skew_ms = OFFSETS_MS.iter().map(|o| o.abs()).max().unwrap_or(0);
    let skew = skew_ms / 1000 + 1;
    let from = books::now_secs() + skew;
    let started = Instant::now();
    let (mut terms, mut kills) = (0, 0);
    let mut leaders = Vec::new();
    let mut failovers = Vec::new();
    let mut n: u32 = 0;
    // Faults on a fixed timeline (one every FAULT_EVERY from the start), however long each
    // failover takes.
    while FAULT_EVERY * (n + 1) < length {
        tokio::time::sleep_until((started + FAULT_EVERY * (n + 1)).into()).await;
        let (current, i) = leading(&broker, &fleet).await?;
        leaders.push(fleet[i].offset_ms);
        let t0 = Instant::now();
        // Alternating, starting with the first kind.
        if n & 1 == 0 {
            fleet[i].stop(Duration::from_secs(5));
            terms += 1;
        } else {
            fleet[i].kill();
            kills += 1;
        }
        leader(&broker, Some(&current), TTL * 5).await?;
        failovers.push(t0.elapsed());
        let offset = fleet[i].offset_ms;
        fleet[i] = spawn_scheduler(&url, ns, TTL, offset)?;
        n += 1;
    }
    tokio::time::sleep(length.saturating_sub(started.elapsed())).await;
    let to = books::now_secs() - skew;
    for p in &mut fleet {
        p.stop(Duration::from_secs(5));
    }
    let b = books::triggers(&broker, (from, to)).await?;
    Ok(vec![Row {
        scenario: "clock-skew".into(),
        load: "1 s schedule, 3 procs".into(),
        faults: format!("{terms} TERM + {kills} KILL, skew {skew_ms} ms"),
        lost: b.missing.len() as u64,
        duplicated: b.duplicated,
        max_in_flight: 0,
        recovery: failovers.iter().max().copied(),
        broken: b.broken(),
        notes: vec![format!(
            "{} trigger seconds, window {from}..={to}; clock offsets of the leaders faulted \
             (ms) {leaders:?}; failovers {:.1?}",
            b.triggers, failovers
        )],
    }])
}
