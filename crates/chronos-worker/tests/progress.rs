//! `Context::progress` against a real Redis: a producer reads a running task's progress, a
//! burst of reports costs a few writes (coalesced), the last value is stored before the task is
//! settled, and a value that cannot be reported is a typed error that leaves the task running.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, Inspect, MAX_PROGRESS_BYTES};
use chronos_worker::testing::{run_handler, TestContext};
use chronos_worker::{Context, Mux, ProgressError, Server, ServerConfig, Task, TaskError};
use common::faulty::Faulty;
use common::{broker, eventually, fast_config, q, Job};

/// Reports this many values in a burst of about half a second.
const BURST: u32 = 2_000;

#[tokio::test]
async fn progress_is_read_live_coalesced_and_its_last_value_kept() {
    let b = broker().await;
    let faulty = Faulty::new(b.clone());
    let gate = Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let g = g.clone();
        async move {
            ctx.percent(50.0, "half way")?;
            g.notified().await;
            for i in 0..BURST {
                ctx.progress(&serde_json::json!({ "done": i, "of": BURST }))?;
                if i % 20 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            ctx.percent(100.0, "done")?;
            Ok::<(), TaskError>(())
        }
    })
    .expect("register");
    // The heartbeat (which carries progress too) stays out of the count.
    let config = ServerConfig {
        heartbeat_interval: Duration::from_secs(10),
        recover_min_idle: Duration::from_secs(30),
        ..fast_config()
    };
    let server = Server::new(faulty.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let info = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(10),
        "progress while running",
        || async {
            client
                .progress("default", &info.id)
                .await
                .expect("read")
                .is_some_and(|p| p.percent() == Some(50.0) && p.note() == Some("half way"))
        },
    )
    .await;
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("running");
    assert_eq!(
        rec.progress.and_then(|p| p.percent()),
        Some(50.0),
        "the inspector reads it"
    );
    let before = faulty.switches.progress_reports.load(Ordering::SeqCst);
    gate.notify_one();
    eventually(Duration::from_secs(20), "finished", || async {
        server.stats().succeeded == 1
    })
    .await;
    // The last report reached the store before the task was acked.
    let last = client
        .progress("default", &info.id)
        .await
        .expect("read")
        .expect("kept after the end");
    assert_eq!((last.percent(), last.note()), (Some(100.0), Some("done")));
    let writes = faulty.switches.progress_reports.load(Ordering::SeqCst) - before;
    // About one write per 250 ms of the burst, plus the last value's: far fewer than one per
    // report (2,002), with room for a slow machine.
    assert!(
        (1..=60).contains(&writes),
        "{writes} writes for {BURST} reports"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_value_that_cannot_be_reported_is_a_typed_error_and_the_task_goes_on() {
    let handler = |ctx: Context, _t: Task<Job>| async move {
        // JSON object keys must be strings.
        let by_pair: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let encode = ctx.progress(&by_pair).expect_err("not JSON");
        assert!(matches!(encode, ProgressError::Encode(_)), "{encode}");
        let big = "x".repeat(MAX_PROGRESS_BYTES);
        let size = ctx.progress(&big).expect_err("too large");
        assert!(
            matches!(size, ProgressError::TooLarge { max, .. } if max == MAX_PROGRESS_BYTES),
            "{size}"
        );
        // Out of range, or not a number: reported, as a clamped value.
        ctx.percent(f64::NAN, "nan")?;
        ctx.percent(250.0, "over")?;
        Ok::<u32, TaskError>(7)
    };
    let out = run_handler(&handler, TestContext::new(), Job { n: 1, sleep_ms: 0 }).await;
    assert_eq!(out.expect("ran to its end"), 7);
}
