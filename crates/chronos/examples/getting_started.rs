//! The getting-started recipe: a task type, a handler, a server and a producer in one process.
//!
//! `cargo run -p chronos-rs --example getting_started` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server).

use std::time::Duration;

use chronos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct EmailArgs {
    user_id: String,
    body: String,
}

impl TaskArgs for EmailArgs {
    const KIND: &'static str = "email:send";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;

    let mut mux = Mux::new();
    mux.handle(|ctx: Context, task: Task<EmailArgs>| async move {
        println!(
            "[{}] sending to {}: {}",
            ctx.task_id(),
            task.args.user_id,
            task.args.body
        );
        Ok(())
    })?;
    let config = ServerConfig::default()
        .queues([("default", 1)])
        .concurrency(10);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    let client = Client::new(broker);
    let args = EmailArgs {
        user_id: "u1".into(),
        body: "hi".into(),
    };
    client.enqueue(&args, EnqueueOptions::new()).await?;
    client
        .enqueue(
            &args,
            EnqueueOptions::new().process_in(Duration::from_secs(1)),
        )
        .await?;

    tokio::time::sleep(Duration::from_secs(2)).await;
    server.shutdown().await;
    Ok(())
}
