//! A three-step chain: each step reads the previous step's result, and the producer reads the
//! chain's status and final result.
//!
//! `cargo run -p chronos-rs --example chain` (uses CHRONOS_REDIS_URL, else starts a throwaway
//! redis-server).

use std::time::Duration;

use chronos::prelude::*;
use chronos::ChainStatus;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Add {
    n: u64,
}

impl TaskArgs for Add {
    const KIND: &'static str = "example:add";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;

    let mut mux = Mux::new();
    // Each step adds its number to what the previous step returned.
    mux.handle(|ctx: Context, task: Task<Add>| async move {
        let before: u64 = ctx.parent_result()?.unwrap_or(0);
        let step = ctx.chain().map(|c| c.step).unwrap_or(0);
        println!("step {step}: {before} + {}", task.args.n);
        Ok(before + task.args.n)
    })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default())?
        .start()
        .await?;

    let client = Client::new(broker.clone());
    let chain = Chain::new()
        .then(&Add { n: 1 }, EnqueueOptions::new())
        .then(&Add { n: 10 }, EnqueueOptions::new())
        .then(&Add { n: 100 }, EnqueueOptions::new());
    let info = client.enqueue_chain(chain).await?;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match client.chain_status(&info).await? {
            status @ ChainStatus::Succeeded { .. } => {
                let total: Option<u64> = status.result().transpose()?;
                println!("chain {} done: {total:?}", info.id);
                break;
            }
            ChainStatus::Failed { step, error } => anyhow::bail!("step {step} failed: {error}"),
            _ if tokio::time::Instant::now() > deadline => anyhow::bail!("chain timed out"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    server.shutdown().await;
    Ok(())
}
