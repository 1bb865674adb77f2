//! A worker process for the rate-limit tests: serves queue `limited` of namespace `$CHRONOS_NS`
//! on `$CHRONOS_REDIS_URL` under the limits of `$LIMIT_RATE` (`<n>/<period ms>`) and
//! `$LIMIT_CONCURRENCY` (`<n>`). Every run of a [`Work`] task records, in one script call at its
//! start, the Redis time and this process' id in the list `<ns>:starts`, and the number of runs
//! active at once in `<ns>:active` (its high-water mark in `<ns>:active:max`).

use std::time::Duration;

use anyhow::Context as _;
use chronos::fred::interfaces::{KeysInterface, LuaInterface};
use chronos::prelude::*;
use chronos_tests::Work;

const START: &str = "local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('RPUSH', KEYS[1], ms .. ':' .. ARGV[1])
local a = redis.call('INCR', KEYS[2])
if a > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], a) end
return ms";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHRONOS_REDIS_URL")?;
    let ns = std::env::var("CHRONOS_NS")?;
    let mut limit = QueueLimit::new();
    if let Ok(rate) = std::env::var("LIMIT_RATE") {
        let (n, ms) = rate
            .split_once('/')
            .context("LIMIT_RATE is <n>/<period ms>")?;
        limit = limit.rate(n.parse()?, Duration::from_millis(ms.parse()?));
    }
    if let Ok(n) = std::env::var("LIMIT_CONCURRENCY") {
        limit = limit.concurrency(n.parse()?);
    }
    let broker = RedisBroker::builder(url)
        .namespace(ns.clone())
        .connect()
        .await?;
    let redis = broker.client().clone();
    let pid = std::process::id().to_string();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, task: Task<Work>| {
        let (redis, ns, pid) = (redis.clone(), ns.clone(), pid.clone());
        async move {
            let keys = vec![
                format!("{ns}:starts"),
                format!("{ns}:active"),
                format!("{ns}:active:max"),
            ];
            let _: i64 = redis.eval(START, keys, vec![pid]).await?;
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
            let _: i64 = redis.decr(format!("{ns}:active")).await?;
            Ok(())
        }
    })?;
    let config = ServerConfig {
        heartbeat_interval: Duration::from_millis(500),
        recover_min_idle: Duration::from_secs(3),
        ..ServerConfig::default()
    }
    .queues([("limited", 1)])
    .limit("limited", limit);
    let server = Server::new(broker, mux, config)?.start().await?;
    println!("ready {}", server.id());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
