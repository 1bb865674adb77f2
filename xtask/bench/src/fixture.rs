//! What the enqueue and memory figures share: the bench's payload, a client on a namespace,
//! filling and flushing Redis, and reading its memory. Apart from both, so neither reaches into
//! the other.

use anyhow::{Context, Result};
use chronos::fred::prelude::*;
use chronos::fred::types::InfoKind;
use chronos::{Client, EnqueueOptions, RedisBroker, TaskArgs};
use serde::{Deserialize, Serialize};

/// Tasks per batch enqueue.
pub(crate) const BATCH: usize = 1000;

/// A task with a 100-byte payload body, as in the peers' runs.
#[derive(Serialize, Deserialize)]
pub(crate) struct Payload {
    pub(crate) body: String,
}

impl TaskArgs for Payload {
    const KIND: &'static str = "bench";
}

/// The payload every bench task carries.
pub(crate) fn payload() -> Payload {
    Payload {
        body: "x".repeat(100),
    }
}

/// A client on namespace `ns`.
pub(crate) async fn connect(url: &str, ns: &str) -> Result<Client> {
    Ok(Client::new(
        RedisBroker::builder(url).namespace(ns).connect().await?,
    ))
}

/// Empties the whole Redis: every figure starts from nothing.
pub(crate) async fn flush(client: &Client) -> Result<()> {
    let _: () = client.broker().client().flushall(false).await?;
    Ok(())
}

/// Enqueues `n` payload tasks with `opts`, in batches of [`BATCH`].
pub(crate) async fn fill(client: &Client, n: usize, opts: &EnqueueOptions) -> Result<()> {
    let args = payload();
    for _ in 0..n / BATCH {
        let results = client
            .enqueue_batch((0..BATCH).map(|_| (&args, opts.clone())))
            .await?;
        anyhow::ensure!(
            results.iter().all(|r| r.is_ok()),
            "batch enqueue refused a task"
        );
    }
    Ok(())
}

/// INFO memory `used_memory`, in bytes.
pub(crate) async fn used_memory(client: &Client) -> Result<f64> {
    let info: String = client
        .broker()
        .client()
        .info(Some(InfoKind::Memory))
        .await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("used_memory missing from INFO")
}
