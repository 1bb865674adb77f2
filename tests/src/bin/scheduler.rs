//! A scheduler process for fault tests: one 1 s interval schedule (id `tick`, queue `ticks`) in
//! namespace `$CHRONOS_NS` on `$CHRONOS_REDIS_URL`, leader TTL `$CHRONOS_TTL_MS`. Stops
//! gracefully (resigning) on SIGINT or SIGTERM; the tests also SIGKILL and SIGSTOP it.

use std::time::Duration;

use chronos::prelude::*;
use chronos_tests::Tick;
use tokio::signal::unix::{signal, SignalKind};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let ttl: u64 = std::env::var("CHRONOS_TTL_MS")?.parse()?;
    let broker = RedisBroker::builder(url).namespace(ns).connect().await?;
    let config = SchedulerConfig {
        leader_ttl: Duration::from_millis(ttl),
        instance_id: Some(format!("pid-{}", std::process::id())),
        ..SchedulerConfig::default()
    };
    let mut scheduler = Scheduler::new(broker, config);
    let opts = ScheduleOptions::new().id("tick").queue("ticks");
    scheduler.register_interval(
        Duration::from_secs(1),
        &Tick {
            note: "tick".into(),
        },
        opts,
    )?;
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
