use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::fred::interfaces::ClientLike;
use chronos::prelude::*;

use crate::cost;
use crate::fixture::Payload;

const QUEUES: [usize; 3] = [1, 10, 100];
const SETTLE: Duration = Duration::from_secs(3);
const WINDOW: Duration = Duration::from_secs(10);

/// Redis commands per second of one idle worker server (default config, no tasks) serving 1, 10
/// and 100 queues: the price of polling, heartbeats and recovery when nothing happens.
pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== idle: one worker server, default config, no tasks; {}s settle, {}s window, redis at {url}",
        SETTLE.as_secs(),
        WINDOW.as_secs()
    );
    for n in QUEUES {
        let broker = RedisBroker::builder(&url)
            .namespace(format!("idle-{n}"))
            .connect()
            .await?;
        let mut mux = Mux::new();
        mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?;
        let config = ServerConfig::default().queues((0..n).map(|i| (format!("q{i}"), 1)));
        let worker = Server::new(broker.clone(), mux, config)?.start().await?;
        tokio::time::sleep(SETTLE).await;
        let s0 = cost::snap(broker.client()).await?;
        let start = Instant::now();
        tokio::time::sleep(WINDOW).await;
        let after = cost::snap(broker.client()).await?;
        let secs = start.elapsed().as_secs_f64();
        worker.shutdown().await;
        let _: () = broker.client().flushall(false).await?;
        let c = cost::delta(&s0, &after, secs);
        println!(
            "{:<44} {:>12.1} {:<8} redis cpu {:>8.1} ms/s",
            format!("idle server, {n} queue(s) (calls/s)"),
            c.calls,
            "calls/s",
            c.cpu_us / 1000.0
        );
        println!("   top: {}", cost::top(&c));
    }
    Ok(())
}
