//! A worker process killed with SIGKILL mid-task: another worker finishes the task once the
//! lease has been idle for recover min idle, and the crash counts as an attempt.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronos::fred::interfaces::{KeysInterface, StreamsInterface};
use chronos::prelude::*;
use chronos::{Inspect, QueueName};
use chronos_tests::{runs_key, Work};

#[tokio::test]
async fn task_of_a_killed_worker_process_is_finished_by_another_worker() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    let redis = broker.client().clone();
    let info = Client::new(broker.clone())
        .enqueue(&Work { sleep_ms: 30_000 }, EnqueueOptions::new())
        .await
        .expect("enqueue");

    let mut child = Command::new(env!("CARGO_BIN_EXE_chronos-test-worker"))
        .env("CHRONOS_REDIS_URL", &url)
        .env("CHRONOS_NS", &ns)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn worker");
    let key = runs_key(&ns, &info.id);
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "the worker process started the task",
        || async { redis.get::<Option<i64>, _>(&key).await.ok().flatten() == Some(1) },
    )
    .await;
    // The worker marks a start a moment after the handler begins (quick tasks need no mark);
    // once the mark is in, losing the worker costs the task an attempt. The mark is the
    // delivery count of the task's pending entry; the task reads as active before it (an
    // operator must not take a fetched task), so the state alone does not say the mark is in.
    let queue = QueueName::new("default").expect("queue");
    let stream = broker.keyspace().queue(&queue).stream();
    chronos_testkit::eventually(Duration::from_secs(5), "the start was recorded", || async {
        let pending: Result<Vec<(String, String, i64, i64)>, _> = redis
            .xpending(&stream, chronos_protocol::GROUP, ("-", "+", 10))
            .await;
        pending.is_ok_and(|p| {
            p.iter()
                .any(|(id, _, _, count)| *id == info.id && *count >= chronos_protocol::STARTED)
        })
    })
    .await;
    // SIGKILL: no shutdown, no ack, no requeue. The task sits in the dead consumer's PEL.
    child.kill().expect("kill");
    child.wait().expect("reap");
    let killed_at = Instant::now();

    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = attempts.clone();
    let runs = redis.clone();
    let ns2 = ns.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _task: Task<Work>| {
        let (seen, runs, ns) = (seen.clone(), runs.clone(), ns2.clone());
        async move {
            let _: i64 = runs.incr(runs_key(&ns, ctx.task_id())).await?;
            seen.lock().expect("lock").push(ctx.attempt());
            Ok(())
        }
    })
    .expect("register");
    let config = ServerConfig {
        heartbeat_interval: Duration::from_millis(200),
        recover_min_idle: Duration::from_secs(1),
        recover_interval: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    chronos_testkit::eventually(
        Duration::from_secs(15),
        "the task completed on the second worker",
        || async {
            broker
                .queue_stats(&queue)
                .await
                .map(|s| s.processed == 1)
                .unwrap_or(false)
        },
    )
    .await;
    let recovered_after = killed_at.elapsed();
    server.shutdown().await;

    assert_eq!(
        attempts.lock().expect("lock").clone(),
        vec![2],
        "the crash counted as attempt 1"
    );
    assert_eq!(
        redis.get::<Option<i64>, _>(&key).await.expect("get"),
        Some(2),
        "ran exactly twice"
    );
    assert!(
        recovered_after >= Duration::from_millis(800),
        "reclaimed before min idle: {recovered_after:?}"
    );
    let stats = broker.queue_stats(&queue).await.expect("stats");
    assert_eq!(
        (stats.pending, stats.active, stats.retry, stats.archived),
        (0, 0, 0, 0)
    );
}
