//! A task's attempt history as a server writes it: each attempt's row names the server that ran
//! it and how long its handler ran, measured by the worker.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{AttemptOutcome, Client, EnqueueOptions, Inspect};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

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
    let server = Server::new(b.clone(), mux, fast_config())
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
