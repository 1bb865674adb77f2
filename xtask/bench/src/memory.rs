//! Redis bytes per settled task that is kept: completed with a retention, and dead-lettered
//! (archived). Measured as bytes per pending task are: `used_memory` before and after N tasks on
//! a flushed Redis, after the queue's fixed cost (a first task through the same path) is paid.
//!
//! The tasks go through the normal path: enqueued with options, run by a [`Server`] whose handler
//! succeeds (retained) or fails with no retries left (archived), so the figure is what an
//! application keeps, not what an operator action would leave.

use std::time::Duration;

use anyhow::Result;
use chronos::prelude::*;
use chronos::{ServerHandle, ServerStats};

use crate::fixture::{connect, fill, flush, payload, used_memory, Payload};

/// How long a completed task is kept: longer than the bench, so nothing expires in between.
const RETENTION: Duration = Duration::from_secs(3600);
/// What the failing handler says; BullMQ's processor throws the same message.
const FAILURE: &str = "boom";

/// Which settled state to fill Redis with.
#[derive(Clone, Copy)]
pub(crate) enum Kept {
    /// Completed, retained for [`RETENTION`].
    Retained,
    /// Failed with `max_retry` 0, so dead-lettered into the archive.
    Archived,
}

/// Bytes per kept task: `used_memory` delta over `n` tasks settled as `kept`, divided by `n`.
pub(crate) async fn bytes_per_task(url: &str, kept: Kept, n: usize) -> Result<f64> {
    let client = connect(url, "bench-kept").await?;
    flush(&client).await?;
    let opts = match kept {
        Kept::Retained => EnqueueOptions::new().retention(RETENTION),
        Kept::Archived => EnqueueOptions::new().max_retry(0),
    };
    let mut mux = Mux::new();
    match kept {
        Kept::Retained => mux.handle(|_ctx: Context, _t: Task<Payload>| async { Ok(()) })?,
        Kept::Archived => mux.handle(|_ctx: Context, _t: Task<Payload>| async {
            Err::<(), _>(TaskError::retry(FAILURE))
        })?,
    };
    // The archive must hold every task (its default cap is 10 000 per queue), and no janitor
    // pass may trim it while the figure is taken.
    let config = ServerConfig::default()
        .concurrency(64)
        .archive_max(n as u64 * 2)
        .janitor_interval(Duration::from_secs(3600));
    let server = Server::new(client.broker().clone(), mux, config)?
        .start()
        .await?;
    let settled = |s: ServerStats| match kept {
        Kept::Retained => s.succeeded,
        Kept::Archived => s.dead,
    };
    // The queue's fixed cost (its retained or archived index, the server's consumer) is paid
    // by a first task, as bytes per pending task registers its queue first.
    client.enqueue(&payload(), opts.clone()).await?;
    wait(&server, settled, 1).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = used_memory(&client).await?;
    fill(&client, n, &opts).await?;
    wait(&server, settled, n as u64 + 1).await?;
    // Shutting down flushes the last acks; the server's own record it removes is a few
    // hundred bytes, nothing per task.
    server.shutdown().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = used_memory(&client).await?;
    flush(&client).await?;
    Ok((after - before) / n as f64)
}

/// Waits until `settled(stats)` reaches `n`, for at most five minutes.
async fn wait(server: &ServerHandle, settled: impl Fn(ServerStats) -> u64, n: u64) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while settled(server.stats()) < n {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} tasks settled in 5 minutes ({:?})",
            settled(server.stats()),
            server.stats()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}
