//! A worker process for fault tests: serves the `default` queue of namespace `$CHRONOS_NS` on
//! `$CHRONOS_REDIS_URL`, recording every run of a [`Work`] task before working on it. The tests
//! kill it with SIGKILL mid-task.

use std::time::Duration;

use chronos::fred::interfaces::KeysInterface;
use chronos::prelude::*;
use chronos_tests::{runs_key, Work};

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
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
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
