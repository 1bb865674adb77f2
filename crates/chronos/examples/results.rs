//! A handler that returns a result, and a producer that waits for it.
//!
//! `cargo run -p chronos-rs --example results` (uses CHRONOS_REDIS_URL, else starts a throwaway
//! redis-server).

use std::time::Duration;

use chronos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct ResizeArgs {
    image: String,
    width: u32,
}

impl TaskArgs for ResizeArgs {
    const KIND: &'static str = "image:resize";
}

/// What the handler returns: any serde type.
#[derive(Debug, Serialize, Deserialize)]
struct Resized {
    url: String,
    bytes: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;

    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, task: Task<ResizeArgs>| async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(Resized {
            url: format!("{}@{}w", task.args.image, task.args.width),
            bytes: 1_000 * u64::from(task.args.width),
        })
    })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default())?
        .start()
        .await?;

    let client = Client::new(broker);
    // A result is kept as long as its task: ask for a retention.
    let info = client
        .enqueue(
            &ResizeArgs {
                image: "cat.png".into(),
                width: 320,
            },
            EnqueueOptions::new().retention(Duration::from_secs(3600)),
        )
        .await?;
    // Woken by Redis when the task finishes (re-read once a second in case the message was lost).
    let resized: Resized = client
        .wait(&info.queue, &info.id, Duration::from_secs(10))
        .await?;
    println!("{} -> {resized:?}", info.id);
    // Later, from anywhere: read it again while the task is retained.
    let again: Option<Resized> = client.result(&info.queue, &info.id).await?;
    println!("read again: {again:?}");

    server.shutdown().await;
    Ok(())
}
