//! A worker process for fault tests: serves the `default` queue of namespace `$CHRONOS_NS` on
//! `$CHRONOS_REDIS_URL`, recording every run of a [`Work`] task before working on it, and how
//! many run at once (`live_key`, the most in `most_live_key`). The tests kill it with SIGKILL
//! mid-task.

use std::time::Duration;

use chronos::fred::interfaces::{KeysInterface, SortedSetsInterface};
use chronos::fred::types::sorted_sets::Ordering;
use chronos::prelude::*;
use chronos_tests::{live_key, most_live_key, runs_key, Work};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let broker = RedisBroker::builder(url)
        .namespace(ns.clone())
        .connect()
        .await?;
    let redis = broker.client().clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, task: Task<Work>| {
        let (redis, ns) = (redis.clone(), ns.clone());
        async move {
            let _: i64 = redis.incr(runs_key(&ns, ctx.task_id())).await?;
            // How many run at once, and the most ever: what a tenant's cap bounds.
            let live: i64 = redis.incr(live_key(&ns)).await?;
            let _: i64 = redis
                .zadd(
                    most_live_key(&ns),
                    None,
                    Some(Ordering::GreaterThan),
                    false,
                    false,
                    (live as f64, "most"),
                )
                .await?;
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
            let _: i64 = redis.decr(live_key(&ns)).await?;
            Ok(())
        }
    })?;
    let config = ServerConfig {
        heartbeat_interval: Duration::from_millis(200),
        recover_min_idle: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let server = Server::new(broker, mux, config)?.start().await?;
    println!("ready {}", server.id());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
