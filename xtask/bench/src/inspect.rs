use std::time::Instant;

use anyhow::{Context, Result};
use chronos_broker::fred::prelude::*;
use chronos_broker::fred::types::{ClusterHash, CustomCommand};
use chronos_broker::{
    Client, Consume, EnqueueOptions, Inspect, Operate, QueueName, RedisBroker, TaskAction,
    TaskFilter, TaskState,
};

use crate::fixture::{payload, Payload};

/// A second kind of task in the big queue, which a filtered bulk run picks out.
#[derive(serde::Serialize, serde::Deserialize)]
struct Order {
    body: String,
    region: String,
}

impl chronos::TaskArgs for Order {
    const KIND: &'static str = "bench:order";
}
use crate::report::{median, row};

const BIG: usize = 1_000_000;
/// Tasks of [`Order`] per batch of 1,000 in the big queue: 67,000 of its million.
const ORDERS_PER_BATCH: usize = 67;
const BULK: usize = 100_000;
const BATCH: usize = 1000;
const RUNS: usize = 5;

/// Inspector figures: the first page of a queue holding a million pending tasks, the bulk
/// archive of 100k tasks (in chunks of 1,000 per script call), and the longest single Redis
/// command during that archive, from SLOWLOG (every command over 100 µs is logged).
pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== inspect: first page of {BIG} pending tasks, bulk archive of {BULK}, redis at {url}"
    );
    let broker = RedisBroker::builder(url.as_str())
        .namespace("bench-inspect")
        .connect()
        .await?;
    let client = Client::new(broker.clone());

    fill_mixed(&client, "big", BIG).await?;
    let big = QueueName::new("big")?;
    let stats = broker.queue_stats(&big).await?;
    anyhow::ensure!(
        stats.pending == BIG as u64,
        "expected {BIG} pending, got {stats:?}"
    );
    let mut first = Vec::new();
    let mut filtered = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let page = broker
            .list_page(&big, TaskState::Pending, &TaskFilter::default(), None, 100)
            .await?;
        first.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(page.tasks.len() == 100, "short first page");
        // A filter nothing passes: the page stops at its scan budget, with a cursor.
        let grep = TaskFilter {
            kind: None,
            grep: Some("no such text".into()),
            ..TaskFilter::default()
        };
        let t = Instant::now();
        let page = broker
            .list_page(&big, TaskState::Pending, &grep, None, 100)
            .await?;
        filtered.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(
            page.next.is_some(),
            "a filtered page over 1M tasks must stop early"
        );
    }
    row(
        "first page of 100, 1M pending (ms)",
        median(&first),
        None,
        "ms",
    );
    row(
        "filtered page, 1,000 scanned of 1M (ms)",
        median(&filtered),
        None,
        "ms",
    );

    // 500 tasks delivered to a worker and held, as on a busy queue: they sit at the head of
    // the stream, where a naive "oldest waiting task" read would wade through them.
    broker.ensure_queue(&big).await?;
    let mut reader = broker.open_reader().await?;
    let held = broker
        .fetch(
            &mut reader,
            &big,
            "bench-worker",
            &[],
            500,
            std::time::Duration::ZERO,
        )
        .await?;
    broker.close_reader(reader).await;
    anyhow::ensure!(held.leases.len() == 500, "500 deliveries held");
    let console = console_pages(&broker).await?;

    fill(&client, "bulk", BULK).await?;
    let bulk = QueueName::new("bulk")?;
    cmd(
        &broker,
        "CONFIG",
        &["SET", "slowlog-log-slower-than", "100"],
    )
    .await?;
    cmd(&broker, "CONFIG", &["SET", "slowlog-max-len", "100000"]).await?;
    cmd(&broker, "SLOWLOG", &["RESET"]).await?;
    let t = Instant::now();
    let report = broker
        .act_all(
            &bulk,
            TaskState::Pending,
            &TaskFilter::default(),
            TaskAction::Archive,
            BATCH,
        )
        .await?;
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(report.done == BULK as u64, "archived {report:?}");
    let longest = longest_command_ms(&broker).await?;
    row(
        "bulk archive of 100k (tasks/s)",
        BULK as f64 / secs,
        None,
        "tasks/s",
    );
    row("longest redis call during it (ms)", longest.0, None, "ms");
    println!(
        "   {} script calls (at most {BATCH} tasks each, fewer while a call takes over 5 ms); \
         longest command: {}; first page runs {first:.1?} ms",
        report.calls, longest.1
    );
    let t = Instant::now();
    let (status, _) = get(&console, "/queues/bulk?state=archived").await?;
    anyhow::ensure!(status == 200, "archived tab answered {status}");
    row(
        "console: archived tab, 100k archived (ms)",
        t.elapsed().as_secs_f64() * 1000.0,
        None,
        "ms",
    );

    // The inspector's bulk runs (Admin::run_bulk, as the CLI and console start them): a kind
    // and payload filter that picks 67,000 of the million, then every task left.
    let admin = chronos_admin::Admin::new(broker.clone());
    let filter = TaskFilter {
        kind: Some(<Order as chronos::TaskArgs>::KIND.into()),
        grep: Some("\"eu\"".into()),
        ..TaskFilter::default()
    };
    let runs = [
        ("archive by kind and payload", filter, TaskAction::Archive),
        ("delete the rest", TaskFilter::default(), TaskAction::Delete),
    ];
    for (what, filter, action) in runs {
        cmd(&broker, "SLOWLOG", &["RESET"]).await?;
        let job = chronos_admin::BulkJob::new("big", TaskState::Pending, filter, action);
        let t = Instant::now();
        let status = admin
            .run_bulk(&job, &chronos_admin::CancelToken::new(), |_| {})
            .await?;
        let secs = t.elapsed().as_secs_f64();
        anyhow::ensure!(status.finished, "{what}: {status:?}");
        let longest = longest_command_ms(&broker).await?;
        println!(
            "{:<44} {:>9.0} scanned/s {:>9.0} acted/s   longest call {:.1} ms   ({} scanned, {} done in {secs:.1} s)",
            format!("bulk run: {what}"),
            status.scanned as f64 / secs,
            status.done as f64 / secs,
            longest.0,
            status.scanned,
            status.done,
        );
    }
    broker.close().await;
    Ok(())
}

/// The web console's pages over HTTP on loopback, with the 1M-task queue in Redis (500 of its
/// tasks held by a worker): what an operator waits for, rendering included. Median of 5
/// requests each (the live counts are cached for up to a second: their requests are spaced so
/// that each reads Redis).
async fn console_pages(broker: &RedisBroker) -> Result<std::net::SocketAddr> {
    let admin = chronos_admin::Admin::new(broker.clone());
    let dash = chronos_dash::Dash::new(admin, chronos_dash::DashConfig::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(dash.serve_on(listener, std::future::pending()));
    for (label, path, marker) in [
        (
            "console: queue page, 1M pending (ms)",
            "/queues/big",
            "next page",
        ),
        (
            "console: queue page filtered, 1M pending (ms)",
            "/queues/big?state=pending&q=no+such+text",
            "Continue",
        ),
        ("console: overview (ms)", "/", "big"),
        (
            "console: live counts JSON (ms)",
            "/api/overview",
            "\"active\":500",
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..RUNS {
            if path.starts_with("/api/") {
                tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
            }
            let t = Instant::now();
            let (status, body) = get(&addr, path).await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            anyhow::ensure!(status == 200, "{path} answered {status}");
            anyhow::ensure!(body.contains(marker), "{path} lacks {marker:?}");
        }
        row(label, median(&times), None, "ms");
    }
    Ok(addr)
}

/// A GET on a fresh connection, by hand (the bench needs no HTTP client crate): status, body.
async fn get(addr: &std::net::SocketAddr, path: &str) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    Ok((status, text))
}

/// Enqueues `n` tasks into `queue`, 8 batches in flight, [`ORDERS_PER_BATCH`] of each 1,000 of
/// them [`Order`]s (region "eu") and the rest [`Payload`]s.
async fn fill_mixed(client: &Client, queue: &str, n: usize) -> Result<()> {
    let args = payload();
    let order = Order {
        body: "y".repeat(100),
        region: "eu".into(),
    };
    let opts = EnqueueOptions::new().queue(queue);
    let t = Instant::now();
    let batches: Vec<usize> = (0..n / BATCH).collect();
    for group in batches.chunks(8) {
        let plain = group.iter().map(|_| {
            client.enqueue_batch::<Payload>(
                (0..BATCH - ORDERS_PER_BATCH).map(|_| (&args, opts.clone())),
            )
        });
        let orders = group.iter().map(|_| {
            client.enqueue_batch::<Order>((0..ORDERS_PER_BATCH).map(|_| (&order, opts.clone())))
        });
        let (plain, orders) = futures::future::join(
            futures::future::join_all(plain),
            futures::future::join_all(orders),
        )
        .await;
        for r in plain.into_iter().chain(orders) {
            anyhow::ensure!(r?.iter().all(|r| r.is_ok()), "enqueue refused a task");
        }
    }
    println!(
        "   filled {queue:?} with {n} tasks ({} of kind {}) in {:.1} s",
        n / BATCH * ORDERS_PER_BATCH,
        <Order as chronos::TaskArgs>::KIND,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Enqueues `n` tasks into `queue`, 8 batches in flight.
async fn fill(client: &Client, queue: &str, n: usize) -> Result<()> {
    let args = payload();
    let opts = EnqueueOptions::new().queue(queue);
    let t = Instant::now();
    let batches: Vec<usize> = (0..n / BATCH).collect();
    for group in batches.chunks(8) {
        let calls = group
            .iter()
            .map(|_| client.enqueue_batch((0..BATCH).map(|_| (&args, opts.clone()))));
        for r in futures::future::join_all(calls).await {
            anyhow::ensure!(r?.iter().all(|r| r.is_ok()), "enqueue refused a task");
        }
    }
    println!(
        "   filled {queue:?} with {n} tasks in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The longest command in the slow log (ms) and a summary: its name, and the median and
/// count of the logged script calls.
async fn longest_command_ms(broker: &RedisBroker) -> Result<(f64, String)> {
    let entries = cmd(broker, "SLOWLOG", &["GET", "100000"])
        .await?
        .into_array();
    let mut best = (0.0, "none over 0.1 ms".to_string());
    let mut scripts = Vec::new();
    for e in entries {
        let cols = e.into_array();
        let micros = cols.get(2).and_then(|v| v.as_i64()).unwrap_or(0);
        let ms = micros as f64 / 1000.0;
        let name = cols
            .get(3)
            .and_then(|v| v.clone().into_array().into_iter().next())
            .and_then(|a| a.as_string())
            .unwrap_or_default();
        if name.eq_ignore_ascii_case("evalsha") {
            scripts.push(ms);
        }
        if ms > best.0 {
            best = (ms, name);
        }
    }
    let summary = format!(
        "{} (script calls logged: {}, median {:.1} ms)",
        best.1,
        scripts.len(),
        median(&scripts)
    );
    Ok((best.0, summary))
}

/// A server command the broker's client has no typed method for.
async fn cmd(broker: &RedisBroker, name: &'static str, args: &[&str]) -> Result<Value> {
    let c = CustomCommand::new_static(name, ClusterHash::Random, false);
    Ok(broker
        .client()
        .custom(c, args.iter().map(|a| a.to_string()).collect())
        .await?)
}
