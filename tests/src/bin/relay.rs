//! An event relay for fault tests: consumer `$RELAY_CONSUMER` of group `relay` on the events of
//! queue `default` (namespace `$CHRONOS_NS`, Redis `$CHRONOS_REDIS_URL`). For each event it
//! appends `<event id> <task id> <type>` to `$RELAY_OUT` (its side effect, flushed), then acks.
//! With `$RELAY_DIE_AFTER=n` it sends itself SIGKILL right after the n-th line and before that
//! event's ack: the point where a relay that loses nothing must let another consumer send the
//! event again. `$RELAY_CLAIM_MS` is how long another consumer's unacked events wait before
//! this one takes them over.

use std::io::Write;
use std::time::Duration;

use chronos::prelude::*;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let consumer = std::env::var("RELAY_CONSUMER")?;
    let out = std::env::var("RELAY_OUT")?;
    let die_after: Option<usize> = std::env::var("RELAY_DIE_AFTER")
        .ok()
        .and_then(|v| v.parse().ok());
    let claim = Duration::from_millis(
        std::env::var("RELAY_CLAIM_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500),
    );
    let broker = RedisBroker::builder(url).namespace(ns).connect().await?;
    let client = Client::new(broker);
    let mut events = client
        .event_group("default", "relay", &consumer, claim)
        .await?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)?;
    println!("ready {consumer}");
    let mut sent = 0;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                eprintln!("relay read: {e}");
                continue;
            }
        };
        writeln!(
            file,
            "{} {} {}",
            event.id,
            event.task_id,
            event.event.name()
        )?;
        file.flush()?;
        sent += 1;
        if die_after == Some(sent) {
            // kill(1) on itself: a real SIGKILL at a chosen point, without unsafe code.
            std::process::Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status()?;
            std::thread::sleep(Duration::from_secs(60));
        }
        events.ack(&event).await?;
    }
    Ok(())
}
