//! Schedules changed at run time: a scheduler runs with nothing registered in code, and an
//! operator (here the same program; usually an admin API or `chronos schedule add`) adds,
//! pauses, updates, runs and removes a schedule while it runs.
//!
//! `cargo run -p chronos-rs --example runtime_schedules` (uses CHRONOS_REDIS_URL, else starts
//! a throwaway redis-server).

use std::time::Duration;

use chronos::prelude::*;
use chronos::{Change, NewSchedule, RuntimeSchedules, Spec};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Digest {
    team: String,
}
impl TaskArgs for Digest {
    const KIND: &'static str = "mail:digest";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;

    // Every instance runs a scheduler; it watches the runtime schedules and the leader fires
    // them exactly like schedules registered in code.
    let scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default())
        .start()
        .await?;
    let mut mux = Mux::new();
    mux.handle(|ctx: Context, t: Task<Digest>| async move {
        println!("digest for {} ({})", t.args.team, ctx.task_id());
        Ok(())
    })?;
    let server = Server::new(
        broker.clone(),
        mux,
        ServerConfig::default().queues([("mail", 1)]),
    )?
    .start()
    .await?;

    // The operator's side. A typed schedule is validated like `register_interval`: a bad
    // interval, cron expression, zone or queue is an error here, and nothing is stored.
    let schedules = RuntimeSchedules::new(broker.clone());
    let every2 = NewSchedule::interval(
        "ops-digest",
        Duration::from_secs(2),
        &Digest { team: "ops".into() },
        ScheduleOptions::new().queue("mail").max_retry(3),
    )?;
    assert_eq!(schedules.add(every2.clone()).await?, Change::Done);
    // Adding the same definition again is a no-op, so a retried request is harmless.
    assert_eq!(schedules.add(every2).await?, Change::Unchanged);
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Run once now, whatever the spec: once per request id, even if the call is repeated.
    let run = schedules.run_now("ops-digest", Some("deploy-42")).await?;
    println!("ran now: {} ({:?})", run.task_id, run.outcome);

    // Pause, then switch it to a cron spec in a zone (what a CLI or an HTTP API has: a kind
    // and a JSON payload); it stays paused until resumed.
    schedules.pause("ops-digest").await?;
    let weekly = NewSchedule::raw(
        "ops-digest",
        Digest::KIND,
        &serde_json::json!({ "team": "ops" }),
        Spec::cron("0 9 * * MON", "Europe/Berlin")?,
        ScheduleOptions::new().queue("mail"),
    )?;
    schedules.update(weekly).await?;
    schedules.resume("ops-digest").await?;

    for e in chronos::list_schedules(&broker, &SchedulerConfig::default()).await? {
        println!(
            "schedule {} [{}] source {} paused {}",
            e.id,
            e.spec,
            e.source.as_str(),
            e.paused
        );
    }
    schedules.remove("ops-digest").await?;

    scheduler.shutdown().await;
    server.shutdown().await;
    Ok(())
}
