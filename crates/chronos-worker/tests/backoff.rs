//! `TaskError::rate_limited` against a real Redis: a rate-limited handler blocks its rate key
//! (or its whole queue) on every server until the block's end; the blocked tasks wait without
//! running, other keys keep running, and the task itself runs again on the same attempt.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{now_ms, Client, EnqueueOptions};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

/// One handler run: task number, attempt, who ran it, when (unix ms; the test's Redis runs on
/// this host, so its clock is this one).
type Run = (u32, u32, &'static str, i64);

fn recording_mux(
    runs: Arc<Mutex<Vec<Run>>>,
    server: &'static str,
    first: impl Fn() -> TaskError + Send + Sync + 'static,
) -> Mux {
    let first = Arc::new(first);
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let runs = runs.clone();
        let first = first.clone();
        async move {
            let again = {
                let mut r = runs.lock().expect("lock");
                let again = r.iter().any(|(n, ..)| *n == t.args.n);
                r.push((t.args.n, ctx.attempt(), server, now_ms()));
                again
            };
            // Task 0 is rate limited on its first run.
            if t.args.n == 0 && !again {
                return Err(first());
            }
            Ok(())
        }
    })
    .expect("register");
    mux
}

#[tokio::test]
async fn a_rate_limited_key_holds_its_tasks_until_the_end_while_other_keys_run() {
    let b = broker().await;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mux = recording_mux(runs.clone(), "a", || {
        TaskError::rate_limited(Duration::from_millis(1500))
    });
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let job = |n| Job { n, sleep_ms: 0 };
    // max_retry 0: a rate limit that spent an attempt would dead-letter the task at once.
    client
        .enqueue(&job(0), EnqueueOptions::new().rate_key("k").max_retry(0))
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(5),
        "the first run blocked key k",
        || async { server.stats().throttled == 1 },
    )
    .await;
    let blocks = b.queue_blocks(&q("default"), 10).await.expect("blocks");
    let until = blocks.keys.first().expect("k is blocked").1;
    assert_eq!(blocks.keys[0].0, "k");
    assert_eq!(blocks.queue_until_ms, None);
    for n in 1..=3 {
        client
            .enqueue(&job(n), EnqueueOptions::new().rate_key("k"))
            .await
            .expect("enqueue");
    }
    for n in 10..=11 {
        client
            .enqueue(&job(n), EnqueueOptions::new().rate_key("other"))
            .await
            .expect("enqueue");
    }
    eventually(Duration::from_secs(10), "every task ran", || async {
        server.stats().succeeded == 6
    })
    .await;
    let runs = runs.lock().expect("lock").clone();
    for &(n, attempt, _, at) in &runs {
        assert_eq!(attempt, 1, "no attempt spent: {runs:?}");
        match n {
            10 | 11 => assert!(at < until, "another key runs during the block: {runs:?}"),
            _ if at == runs[0].3 => {}
            _ => assert!(
                at >= until,
                "task {n} of k ran before the block ended: {runs:?}"
            ),
        }
    }
    assert_eq!(runs.iter().filter(|r| r.0 == 0).count(), 2);
    let stats = server.stats();
    assert_eq!(
        (stats.throttled, stats.failed, stats.dead, stats.snoozed),
        (1, 0, 0, 0)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_queue_wide_block_stops_every_servers_workers_until_its_end() {
    let b = broker().await;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let limited = || TaskError::rate_limited(Duration::from_millis(700)).queue_wide();
    let a = Server::new(
        b.clone(),
        recording_mux(runs.clone(), "a", limited),
        fast_config(),
    )
    .expect("server")
    .start()
    .await
    .expect("start");
    let other = Server::new(
        b.clone(),
        recording_mux(runs.clone(), "b", limited),
        fast_config(),
    )
    .expect("server")
    .start()
    .await
    .expect("start");
    let client = Client::new(b.clone());
    let job = |n| Job { n, sleep_ms: 0 };
    // Keyed, yet queue-wide: the whole queue is blocked.
    client
        .enqueue(&job(0), EnqueueOptions::new().rate_key("k"))
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "the queue is blocked", || async {
        a.stats().throttled + other.stats().throttled == 1
    })
    .await;
    let blocks = b.queue_blocks(&q("default"), 10).await.expect("blocks");
    let until = blocks.queue_until_ms.expect("the queue is blocked");
    assert!(blocks.keys.is_empty());
    for n in 1..=8 {
        client
            .enqueue(&job(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    eventually(Duration::from_secs(10), "every task ran", || async {
        a.stats().succeeded + other.stats().succeeded == 9
    })
    .await;
    let runs = runs.lock().expect("lock").clone();
    let first = runs[0].3;
    for &(n, attempt, _, at) in &runs {
        assert_eq!(attempt, 1, "no attempt spent: {runs:?}");
        if at != first {
            assert!(
                at >= until,
                "task {n} ran before the block ended on some server: {runs:?}"
            );
        }
    }
    a.shutdown().await;
    other.shutdown().await;
}
