//! Deduplication end to end, with a real worker server: a burst of debounced enqueues runs once
//! with the last payload; a throttled key runs once per window however often it is enqueued,
//! even while its first task runs and after it finished.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{Client, Dedup, DedupMode, EnqueueOptions, EnqueueOutcome};
use chronos_worker::{Context, Mux, Server, Task};
use common::{broker, eventually, fast_config, Job};

#[tokio::test]
async fn a_burst_of_debounced_enqueues_runs_once_with_the_last_payload_and_throttle_once_per_window(
) {
    let b = broker().await;
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r = ran.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, t: Task<Job>| {
        let r = r.clone();
        async move {
            r.lock().expect("lock").push(t.args.n);
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let debounce = Dedup::key("reindex:42").mode(DedupMode::Debounce {
        delay: Duration::from_millis(300),
        max_wait: Duration::from_secs(5),
    });
    let mut outcomes = Vec::new();
    for n in 1..=10 {
        let info = client
            .enqueue(
                &Job { n, sleep_ms: 0 },
                EnqueueOptions::new().dedup(debounce.clone()),
            )
            .await
            .expect("enqueue");
        outcomes.push(info.outcome);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(outcomes[0], EnqueueOutcome::Created);
    assert!(outcomes[1..].iter().all(|o| *o == EnqueueOutcome::Extended));
    eventually(Duration::from_secs(5), "the debounced task ran", || async {
        server.stats().succeeded == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        ran.lock().expect("lock").clone(),
        vec![10],
        "once, the last payload"
    );

    // Throttle: enqueued every 50 ms for 600 ms with a 2 s window: one run.
    let throttle = Dedup::key("sync:acme").mode(DedupMode::Throttle {
        window: Duration::from_secs(2),
    });
    for n in 100..112 {
        client
            .enqueue(
                &Job { n, sleep_ms: 0 },
                EnqueueOptions::new().dedup(throttle.clone()),
            )
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eventually(Duration::from_secs(5), "the throttled task ran", || async {
        server.stats().succeeded == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ran.lock().expect("lock").clone(), vec![10, 100]);
    server.shutdown().await;
}
