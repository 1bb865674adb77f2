//! A task's attempt history as a server writes it: each attempt's row names the server that ran
//! it and how long its handler ran, measured by the worker.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{AttemptOutcome, AttemptRow, Client, EnqueueOptions, Inspect, RedisBroker};
use chronos_worker::{
    Context, LogCapture, Mux, Server, ServerConfig, ServerHandle, Task, TaskError, TaskLogs,
};
use common::{broker, eventually, fast_config, q, Job};

/// Runs one retained task through a server with `mux` and `config` until it succeeded; its
/// attempt rows, and the server (still running).
async fn one_retained_run(
    b: &RedisBroker,
    mux: Mux,
    config: ServerConfig,
) -> (Vec<AttemptRow>, ServerHandle) {
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let info = Client::new(b.clone())
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new().retention(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "succeeded", || async {
        server.stats().succeeded == 1
    })
    .await;
    let rows = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("retained")
        .attempts;
    (rows, server)
}

#[tokio::test]
async fn a_retried_then_retained_task_shows_both_attempts_with_worker_and_duration() {
    let b = broker().await;
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(60)).await;
            if ctx.attempt() == 1 {
                return Err(TaskError::retry("upstream 503"));
            }
            Ok(())
        }
    })
    .expect("register");
    let (rows, server) = one_retained_run(&b, mux, fast_config()).await;
    let seen: Vec<(u32, AttemptOutcome)> = rows.iter().map(|r| (r.attempt, r.outcome)).collect();
    assert_eq!(
        seen,
        vec![(1, AttemptOutcome::Retried), (2, AttemptOutcome::Succeeded)]
    );
    for r in &rows {
        assert_eq!(r.worker.as_deref(), Some(server.id()));
        let ran = r.ran_ms.expect("the worker says how long it ran");
        assert!((60..10_000).contains(&ran), "{ran} ms");
    }
    assert_eq!(rows[0].error.as_deref(), Some("upstream 503"));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn an_attempts_own_lines_and_tracing_events_are_kept_redacted_with_it() {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(LogCapture::new(tracing::Level::INFO));
    // The test's runtime runs every task on this thread, so the default subscriber is theirs.
    let _guard = tracing::subscriber::set_default(subscriber);
    let b = broker().await;
    let mut mux = Mux::new();
    mux.handle(|ctx: Context, _t: Task<Job>| async move {
        ctx.log(format!(
            "calling upstream with token=s3cr3t (attempt {})",
            ctx.attempt()
        ));
        tracing::warn!(status = 503, "upstream busy");
        tracing::debug!("not kept: below the level");
        if ctx.attempt() == 1 {
            return Err(TaskError::retry("upstream 503"));
        }
        Ok(())
    })
    .expect("register");
    let config = fast_config()
        .task_logs(TaskLogs::default().redact(|s| s.replace("token=s3cr3t", "token=[redacted]")));
    let (rows, server) = one_retained_run(&b, mux, config).await;
    assert_eq!(rows.len(), 2);
    for (i, r) in rows.iter().enumerate() {
        let logs = r.logs.as_deref().expect("lines kept");
        let lines: Vec<&str> = logs.lines().collect();
        assert_eq!(lines.len(), 2, "{logs}");
        assert!(
            lines[0].contains(&format!(
                "LOG calling upstream with token=[redacted] (attempt {})",
                i + 1
            )),
            "{logs}"
        );
        assert!(
            lines[1].contains("WARN") && lines[1].contains("upstream busy status=503"),
            "{logs}"
        );
        assert!(!logs.contains("s3cr3t"));
    }
    server.shutdown().await;
}
