//! Rate limits: a queue that calls an outside API at most 5 times a second across every worker
//! process, at most 3 calls at once, and at most 1 per second per customer.
//!
//! `cargo run -p chronos-rs --example rate_limit` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server). Watch the start times: starts are spaced by the queue's rate, and
//! each customer's come one a second, every attempt the first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct SyncArgs {
    customer: String,
    n: u32,
}

impl TaskArgs for SyncArgs {
    const KIND: &'static str = "crm:sync";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::builder(url)
        .namespace(format!("rate-limit-example-{:x}", rand_suffix()))
        .connect()
        .await?;

    let began = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let counter = done.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, task: Task<SyncArgs>| {
        let counter = counter.clone();
        async move {
            println!(
                "{:>6.2}s  {} #{} (attempt {})",
                began.elapsed().as_secs_f64(),
                task.args.customer,
                task.args.n,
                ctx.attempt()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })?;
    // Every server of the `crm` queue gets the same limits: they are counted in Redis, for the
    // whole cluster.
    let limit = QueueLimit::new()
        .rate(5, Duration::from_secs(1))
        .concurrency(3)
        .per_key_rate(1, Duration::from_secs(1));
    let config = ServerConfig::default()
        .queues([("crm", 1)])
        .concurrency(10)
        .limit("crm", limit);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    let client = Client::new(broker);
    let mut total = 0;
    for (customer, n) in [("acme", 4), ("globex", 4), ("initech", 4)] {
        for i in 0..n {
            let args = SyncArgs {
                customer: customer.into(),
                n: i,
            };
            // The rate key names whose budget the task spends.
            let opts = EnqueueOptions::new().queue("crm").rate_key(customer);
            client.enqueue(&args, opts).await?;
            total += 1;
        }
    }

    let deadline = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "{} of {total} tasks ran in {:.1}s",
        done.load(Ordering::SeqCst),
        began.elapsed().as_secs_f64()
    );
    server.shutdown().await;
    Ok(())
}

/// A suffix for the example's own namespace, so runs against a shared Redis do not mix.
fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
