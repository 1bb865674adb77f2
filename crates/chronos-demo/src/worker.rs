//! The worker pool: weighted queues, a rate-limited partner queue, and handlers that fail,
//! panic or dead-letter now and then on purpose.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::ServerHandle;

use crate::panics::DELIBERATE_PANIC;
use crate::tasks::{
    BuildReport, ChargeCard, Digest, ImportDone, ImportFile, Reconcile, SendEmail, SyncCrm,
};

/// Starts the worker pool; `reconciled` counts the runs of the scheduled task here.
pub(crate) async fn start(
    broker: &RedisBroker,
    grace: Duration,
    reconciled: Arc<AtomicU64>,
) -> anyhow::Result<ServerHandle> {
    let server = Server::new(broker.clone(), mux(reconciled)?, {
        ServerConfig {
            concurrency: 32,
            shutdown_timeout: grace,
            retry_delay: Arc::new(|retried, _| Duration::from_millis(500 * u64::from(retried))),
            ..ServerConfig::default()
        }
        .queues([("critical", 6), ("default", 3), ("partner", 2), ("low", 1)])
        .limit(
            "partner",
            QueueLimit::new()
                .rate(40, Duration::from_secs(1))
                .per_key_rate(4, Duration::from_secs(1)),
        )
    })?
    .start()
    .await?;
    Ok(server)
}

/// The handlers of the demo's task kinds.
fn mux(reconciled: Arc<AtomicU64>) -> anyhow::Result<Mux> {
    let mut mux = Mux::new();
    // Emails: quick, and one in twenty fails once (a flaky SMTP relay) and is retried.
    mux.handle(|ctx: Context, t: Task<SendEmail>| async move {
        tokio::time::sleep(Duration::from_millis(2 + t.args.n % 8)).await;
        if t.args.n % 20 == 5 && ctx.attempt() == 1 {
            return Err(TaskError::retry(format!("relay refused {}", t.args.to)));
        }
        Ok(())
    })?;
    // Reports: slow, in three steps whose progress the console's task page shows; one in fifty
    // has bad input and is dead-lettered at once.
    mux.handle(|ctx: Context, t: Task<BuildReport>| async move {
        if t.args.n % 50 == 0 {
            return Err(TaskError::skip_retry("report template missing"));
        }
        for (i, step) in ["querying", "rendering", "uploading"].iter().enumerate() {
            ctx.percent(100.0 * i as f64 / 3.0, *step)?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ctx.percent(100.0, "done")?;
        Ok(())
    })?;
    // Payments: one in a hundred panics on its first attempt; the panic is caught and retried.
    mux.handle(|ctx: Context, t: Task<ChargeCard>| async move {
        if t.args.n % 100 == 1 && ctx.attempt() == 1 {
            panic!("{DELIBERATE_PANIC} for charge {}", t.args.cents);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    })?;
    mux.handle(|_ctx: Context, _t: Task<SyncCrm>| async move {
        tokio::time::sleep(Duration::from_millis(3)).await;
        Ok(())
    })?;
    // Import files return the rows they read; one file in ten of a batch is corrupt.
    mux.handle(|_ctx: Context, t: Task<ImportFile>| async move {
        if t.args.file % 10 == 7 {
            return Err(TaskError::skip_retry("corrupt file"));
        }
        Ok(100 * (t.args.file + 1))
    })?;
    mux.handle(|ctx: Context, t: Task<ImportDone>| async move {
        if let Some(g) = ctx.group() {
            println!(
                "import batch {}: {} files read, {} failed (group callback, run once)",
                t.args.batch, g.succeeded, g.failed
            );
        }
        Ok(())
    })?;
    mux.handle(|_ctx: Context, _t: Task<Digest>| async move { Ok(()) })?;
    // Fired every second by the scheduler.
    mux.handle(move |_ctx: Context, _t: Task<Reconcile>| {
        let r = reconciled.clone();
        async move {
            r.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    })?;
    Ok(mux)
}
