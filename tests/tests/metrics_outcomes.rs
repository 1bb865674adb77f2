//! The outcome counters a scrape shows for a retried task and for a task taken back from a lost
//! worker. One test in its own binary: the metrics recorder is global to the process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::{Consume, QueueName};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Serialize, Deserialize)]
struct Flaky;
impl TaskArgs for Flaky {
    const KIND: &'static str = "metrics:flaky";
}

#[derive(Serialize, Deserialize)]
struct Orphan;
impl TaskArgs for Orphan {
    const KIND: &'static str = "metrics:orphan";
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .await
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}

fn value(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn retries_and_recoveries_are_counted() {
    let url = chronos_testkit::shared_url().expect("redis");
    let broker = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let client = Client::new(broker.clone());
    let q = "outcomes";
    let queue = QueueName::new(q).expect("name");

    // A worker that takes a task, starts it and dies: its delivery is left to the recoverer.
    client
        .enqueue(&Orphan, EnqueueOptions::new().queue(q))
        .await
        .expect("enqueue");
    let mut reader = broker.open_reader().await.expect("reader");
    let fetched = broker
        .fetch(
            &mut reader,
            &queue,
            "ghost",
            &[],
            1,
            Duration::from_millis(100),
        )
        .await
        .expect("fetch");
    let ids: Vec<_> = fetched.leases.iter().map(|l| l.id.clone()).collect();
    assert_eq!(ids.len(), 1);
    broker.start(&queue, &ids).await.expect("start");
    broker.close_reader(reader).await;

    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let mut mux = Mux::new();
    mux.handle(move |_: Context, _: Task<Flaky>| {
        let c = c.clone();
        async move {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(TaskError::retry("first try fails"));
            }
            Ok(())
        }
    })
    .expect("register");
    mux.handle(|_: Context, _: Task<Orphan>| async { Ok(()) })
        .expect("register");
    let config = ServerConfig {
        recover_min_idle: Duration::from_millis(900),
        recover_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(300),
        forward_interval: Duration::from_millis(50),
        retry_delay: Arc::new(|_, _| Duration::ZERO),
        ..ServerConfig::default()
    }
    .queues([(q, 1)])
    .metrics_addr(([127, 0, 0, 1], 0).into());
    let server = Server::new(broker, mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let addr = server.metrics_addr().expect("metrics address");
    client
        .enqueue(&Flaky, EnqueueOptions::new().queue(q))
        .await
        .expect("enqueue");

    let flaky = |outcome| [("queue", q), ("kind", Flaky::KIND), ("outcome", outcome)];
    chronos_testkit::eventually(Duration::from_secs(15), "both tasks settled", || async {
        let page = scrape(addr).await;
        value(&page, "chronos_tasks_processed_total", &flaky("succeeded")) == Some(1.0)
            && value(
                &page,
                "chronos_tasks_processed_total",
                &[
                    ("queue", q),
                    ("kind", Orphan::KIND),
                    ("outcome", "succeeded"),
                ],
            ) == Some(1.0)
    })
    .await;
    let page = scrape(addr).await;
    assert_eq!(
        value(&page, "chronos_tasks_processed_total", &flaky("retried")),
        Some(1.0),
        "{page}"
    );
    assert_eq!(
        value(
            &page,
            "chronos_tasks_failed_total",
            &[("queue", q), ("kind", Flaky::KIND)]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&page, "chronos_tasks_recovered_total", &[("queue", q)]),
        Some(1.0),
        "{page}"
    );
    assert_eq!(
        value(
            &page,
            "chronos_task_duration_seconds_count",
            &[("queue", q), ("kind", Flaky::KIND)]
        ),
        Some(2.0)
    );
    server.shutdown().await;
}
