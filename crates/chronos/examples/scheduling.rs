//! The scheduling recipes: an interval and a cron schedule, with the scheduler and a worker
//! server in one process. Run several copies at once: exactly one leads and each trigger is
//! enqueued once across all of them.
//!
//! `cargo run -p chronos-rs --example scheduling` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server).

use std::time::Duration;

use chronos::prelude::*;
use chronos::{MisfirePolicy, OverlapPolicy};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Heartbeat {
    service: String,
}
impl TaskArgs for Heartbeat {
    const KIND: &'static str = "ops:heartbeat";
}

#[derive(Serialize, Deserialize)]
struct NightlyReport {
    region: String,
}
impl TaskArgs for NightlyReport {
    const KIND: &'static str = "report:nightly";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;

    // Every instance registers the same schedules. An id derives from kind, spec, zone and
    // queue (not the payload, so a deploy that changes the payload keeps the schedule's state);
    // naming it yourself keeps it stable even when the spec changes.
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    scheduler.register_interval(
        Duration::from_secs(2),
        &Heartbeat {
            service: "billing".into(),
        },
        ScheduleOptions::new()
            .id("billing-heartbeat")
            .overlap(OverlapPolicy::Forbid)
            // Every fired task takes these enqueue options; a heartbeat older than 10 s is
            // pointless, and a failed one is dropped rather than archived.
            .enqueue(EnqueueOptions::new().max_retry(1).header("team", "billing"))
            .deadline_after(Duration::from_secs(10))
            .discard_on_dead_letter(),
    )?;
    scheduler.register_cron(
        "30 2 * * *",
        &NightlyReport {
            region: "eu".into(),
        },
        ScheduleOptions::new()
            .zone("Europe/Berlin")
            .misfire(MisfirePolicy::FireLatest) // after an outage, one run covers the backlog
            .queue("reports"),
    )?;
    let scheduler = scheduler.start().await?;

    // The scheduler only enqueues; a server runs the tasks.
    let mut mux = Mux::new();
    mux.handle(|ctx: Context, t: Task<Heartbeat>| async move {
        println!("heartbeat of {} ({})", t.args.service, ctx.task_id());
        Ok(())
    })?;
    mux.handle(|_ctx: Context, t: Task<NightlyReport>| async move {
        println!("nightly report for {}", t.args.region);
        Ok(())
    })?;
    let config = ServerConfig::default().queues([("default", 1), ("reports", 1)]);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    tokio::time::sleep(Duration::from_secs(7)).await;
    for entry in chronos::list_schedules(&broker, &SchedulerConfig::default()).await? {
        println!(
            "schedule {} [{} {}] next {:?} last {:?}",
            entry.id, entry.spec, entry.zone, entry.next_run_ms, entry.last_fired_ms
        );
    }
    // Hand the leadership over before a deploy; the call returns once the lock is released.
    if scheduler.resign_leadership().await? {
        println!("resigned; another instance leads now");
    }
    scheduler.shutdown().await;
    server.shutdown().await;
    Ok(())
}
