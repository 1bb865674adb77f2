//! A group of 20 members whose callback runs once, when all have finished, and reads the counts
//! and the collected results.
//!
//! `cargo run -p chronos-rs --example group` (uses CHRONOS_REDIS_URL, else starts a throwaway
//! redis-server).

use std::time::Duration;

use chronos::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Serialize, Deserialize)]
struct Square {
    n: u64,
}

impl TaskArgs for Square {
    const KIND: &'static str = "example:square";
}

#[derive(Serialize, Deserialize)]
struct Summarize;

impl TaskArgs for Summarize {
    const KIND: &'static str = "example:summarize";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::connect(url).await?;
    let client = Client::new(broker.clone());

    let (done_tx, mut done_rx) = mpsc::channel(1);
    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, task: Task<Square>| async move {
        if task.args.n == 13 {
            return Err(TaskError::skip_retry("unlucky"));
        }
        Ok(task.args.n * task.args.n)
    })?;
    let reader = client.clone();
    mux.handle(move |ctx: Context, _task: Task<Summarize>| {
        let (reader, done_tx) = (reader.clone(), done_tx.clone());
        async move {
            let Some(group) = ctx.group() else {
                return Err(TaskError::skip_retry("not a group callback"));
            };
            let info = group.info()?;
            let (mut sum, mut cursor) = (0u64, 0);
            loop {
                let page = reader.group_results(&info, cursor, 1000).await?;
                for m in &page.members {
                    sum += m.decode::<u64>().transpose()?.unwrap_or(0);
                }
                match page.next {
                    Some(next) => cursor = next,
                    None => break,
                }
            }
            println!(
                "group {}: {} ok, {} failed, sum of squares {sum}",
                group.id, group.succeeded, group.failed
            );
            let _ = done_tx.send(()).await;
            Ok(())
        }
    })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default())?
        .start()
        .await?;

    let group = Group::new(&Summarize, EnqueueOptions::new())
        .members((0..20).map(|n| (Square { n }, EnqueueOptions::new())))
        .collect_results();
    client.enqueue_group(group).await?;

    tokio::time::timeout(Duration::from_secs(10), done_rx.recv()).await?;
    server.shutdown().await;
    Ok(())
}
