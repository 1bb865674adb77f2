//! Connections cut by a proxy again and again while a producer enqueues and a worker runs: every
//! task completes, none is lost or left behind (at-least-once: a task may run twice).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos::fred::interfaces::ClientLike;
use chronos::fred::types::InfoKind;
use chronos::prelude::*;
use chronos::{Inspect, QueueName};
use chronos_tests::Work;

#[tokio::test]
async fn tasks_survive_repeated_connection_cuts() {
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = Arc::new(
        chronos_testkit::TcpProxy::start(target)
            .await
            .expect("proxy"),
    );
    let ns = chronos_testkit::namespace();
    let via_proxy = || {
        RedisBroker::builder(proxy.url())
            .namespace(ns.clone())
            .connect()
    };
    let direct = RedisBroker::builder(redis.url())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");

    let seen = Arc::new(Mutex::new(HashSet::new()));
    let s = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Work>| {
        let s = s.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            s.lock()
                .map_err(|_| TaskError::retry("poisoned"))?
                .insert(ctx.task_id().to_string());
            Ok(())
        }
    })
    .expect("register");
    let config = ServerConfig {
        concurrency: 8,
        heartbeat_interval: Duration::from_millis(200),
        recover_min_idle: Duration::from_secs(1),
        recover_interval: Duration::from_millis(200),
        forward_interval: Duration::from_millis(50),
        retry_delay: Arc::new(|_, _| Duration::ZERO),
        ..ServerConfig::default()
    };
    let server = Server::new(via_proxy().await.expect("connect"), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");

    let cutter = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            for _ in 0..12 {
                tokio::time::sleep(Duration::from_millis(250)).await;
                proxy.cut();
            }
        })
    };
    let client = Client::new(via_proxy().await.expect("connect"));
    for n in 0..300 {
        // Explicit ids make a retried enqueue idempotent: the producer's side of the contract.
        let opts = EnqueueOptions::new()
            .task_id(format!("cut-{n}"))
            .max_retry(50);
        chronos_testkit::eventually(
            Duration::from_secs(20),
            "enqueue through the proxy",
            || async {
                client
                    .enqueue(&Work { sleep_ms: 0 }, opts.clone())
                    .await
                    .is_ok()
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cutter.await.expect("cutter");

    chronos_testkit::eventually(Duration::from_secs(30), "every task ran", || async {
        seen.lock().map(|s| s.len() == 300).unwrap_or(false)
    })
    .await;
    let queue = QueueName::new("default").expect("queue");
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "nothing left pending, running or failed",
        || async {
            match direct.queue_stats(&queue).await {
                Ok(s) => {
                    (s.pending, s.active, s.retry, s.scheduled, s.archived) == (0, 0, 0, 0, 0)
                        && s.processed >= 300
                }
                Err(_) => false,
            }
        },
    )
    .await;
    server.shutdown().await;
    // The cuts were real: the clients behind the proxy reconnected again and again.
    let info: String = direct
        .client()
        .info(Some(InfoKind::Stats))
        .await
        .expect("info");
    let connections: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received");
    assert!(
        connections >= 20,
        "only {connections} connections: the proxy did not cut"
    );
}
