//! A scheduler process for fault tests: one 1 s interval schedule (id `tick`, queue `ticks`) in
//! namespace `$CHRONOS_NS` on `$CHRONOS_REDIS_URL`, leader TTL `$CHRONOS_TTL_MS`.
//! `$CHRONOS_SCHEDULE_IDS` (optional, comma-separated, may be empty) replaces `tick` by 1 s
//! schedules of those ids (same queue, the id as the task's note), so processes of one test can
//! register different sets, as two versions do during a rolling deploy. Stops
//! gracefully (resigning) on SIGINT or SIGTERM; the tests also SIGKILL and SIGSTOP it.
//! `$CHRONOS_CLOCK_OFFSET_MS` (optional, may be negative) sets its wall clock that far off the
//! system's, as on a host whose clock is skewed.

use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::{Clock, SystemClock};
use chronos_tests::Tick;
use tokio::signal::unix::{signal, SignalKind};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let ttl: u64 = std::env::var("CHRONOS_TTL_MS")?.parse()?;
    let offset_ms: i64 = match std::env::var("CHRONOS_CLOCK_OFFSET_MS") {
        Ok(v) => v.parse()?,
        Err(_) => 0,
    };
    let broker = RedisBroker::builder(url).namespace(ns).connect().await?;
    let config = SchedulerConfig {
        leader_ttl: Duration::from_millis(ttl),
        instance_id: Some(format!("pid-{}", std::process::id())),
        clock: Arc::new(OffsetClock(offset_ms)),
        ..SchedulerConfig::default()
    };
    let mut scheduler = Scheduler::new(broker, config);
    let ids = std::env::var("CHRONOS_SCHEDULE_IDS").unwrap_or_else(|_| "tick".into());
    for id in ids.split(',').filter(|id| !id.is_empty()) {
        let opts = ScheduleOptions::new().id(id).queue("ticks");
        scheduler.register_interval(Duration::from_secs(1), &Tick { note: id.into() }, opts)?;
    }
    let handle = scheduler.start().await?;
    println!("ready {}", handle.instance_id());
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    handle.shutdown().await;
    Ok(())
}

/// The system clock shifted by a fixed offset (ms): a host whose clock is off by that much.
#[derive(Debug)]
struct OffsetClock(i64);

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.0)
    }
}
