use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use chronos::{Client, EnqueueOptions};

use crate::cost;
use crate::fixture::{connect, fill, flush, payload, used_memory};
use crate::memory::{self, Kept};
use crate::peers::{field, Peers};
use crate::report::{median, row};

const N: usize = 100_000;
const PRODUCERS: usize = 50;
const RUNS: usize = 3;

/// Enqueue throughput (single with 50 producers, batches of 1000) and Redis bytes per pending,
/// retained completed and archived task.
pub(crate) async fn run(peers: &Peers) -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!("== enqueue: {N} tasks, 100-byte payload, median of {RUNS} runs, redis at {url}");

    let mut single = Vec::new();
    let mut batch = Vec::new();
    let (mut single_cost, mut batch_cost) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let client = connect(&url, &format!("bench-s{run}")).await?;
        let redis = client.broker().client();
        let s0 = cost::snap(redis).await?;
        single.push(single_c50(&client).await?);
        single_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
        let client = connect(&url, &format!("bench-b{run}")).await?;
        let redis = client.broker().client();
        let s0 = cost::snap(redis).await?;
        batch.push(batched(&client).await?);
        batch_cost.push(cost::delta(&s0, &cost::snap(redis).await?, N as f64));
        flush(&client).await?;
    }
    let bytes = bytes_per_task(&url).await?;
    let retained = memory::bytes_per_task(&url, Kept::Retained, N).await?;
    let archived = memory::bytes_per_task(&url, Kept::Archived, N).await?;

    let peer = peers.bullmq(
        &url,
        &["enqueue", "--n", &N.to_string(), "--payload", "100"],
    );
    let peer = peer.as_deref().unwrap_or(&[]);
    row(
        "enqueue single, 50 producers (tasks/s)",
        median(&single),
        field(peer, &["single_c50"], "tasks_per_s"),
        "tasks/s",
    );
    row(
        "enqueue batch of 1000 (tasks/s)",
        median(&batch),
        field(peer, &["bulk"], "tasks_per_s"),
        "tasks/s",
    );
    row(
        "redis bytes per pending task",
        bytes,
        field(peer, &["bytes_per_task"], "value"),
        "bytes",
    );
    row(
        "redis bytes per retained completed task",
        retained,
        field(peer, &["bytes_per_completed"], "value"),
        "bytes",
    );
    row(
        "redis bytes per archived (failed) task",
        archived,
        field(peer, &["bytes_per_failed"], "value"),
        "bytes",
    );
    println!("   runs: single {single:.0?} batch {batch:.0?}");
    cost::rows(
        "enqueue single",
        &cost::median(&single_cost),
        cost::peer(peer, &["single_c50"]),
    );
    cost::rows(
        "enqueue batch",
        &cost::median(&batch_cost),
        cost::peer(peer, &["bulk"]),
    );
    Ok(())
}

async fn single_c50(client: &Client) -> Result<f64> {
    let client = Arc::new(client.clone());
    let args = Arc::new(payload());
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..PRODUCERS {
        let (client, args) = (client.clone(), args.clone());
        handles.push(tokio::spawn(async move {
            for _ in 0..N / PRODUCERS {
                client.enqueue(&*args, EnqueueOptions::new()).await?;
            }
            Ok::<_, chronos::BrokerError>(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N as f64 / start.elapsed().as_secs_f64())
}

async fn batched(client: &Client) -> Result<f64> {
    let start = Instant::now();
    fill(client, N, &EnqueueOptions::new()).await?;
    Ok(N as f64 / start.elapsed().as_secs_f64())
}

/// INFO memory `used_memory` before and after 100k pending tasks, per task.
async fn bytes_per_task(url: &str) -> Result<f64> {
    let client = connect(url, "bench-mem").await?;
    flush(&client).await?;
    // Register the queue first, so its fixed cost (stream, group, set member) is not counted.
    client.enqueue(&payload(), EnqueueOptions::new()).await?;
    let before = used_memory(&client).await?;
    batched(&client).await?;
    let after = used_memory(&client).await?;
    flush(&client).await?;
    Ok((after - before) / N as f64)
}
