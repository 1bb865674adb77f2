//! The HTTP ingest (`chronos-ingest`) beside the `Client` it wraps, in the same run on the same
//! Redis: tasks/s of single enqueues over [`CONNECTIONS`] keep-alive connections (against
//! [`CONNECTIONS`] concurrent `Client::enqueue` calls), and of batches of [`BATCH`] over
//! [`BATCH_CONNECTIONS`] connections (against `Client::enqueue_batch` of the same size and
//! concurrency).
//!
//! The ingest runs in this process on a loopback listener, and the load generator is a plain
//! HTTP/1.1 writer on the same cores, so the HTTP rows pay for both ends of the connection (as
//! a producer on the same host would). Each row is the median of [`RUNS`] runs on a throwaway
//! Redis, flushed between runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context as _, Result};
use chronos::{Client, EnqueueOptions};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::fixture::{connect, flush, payload};
use crate::report::median;

/// Tasks per single-enqueue run.
const N_SINGLE: usize = 10_000;
/// Tasks per batch run.
const N_BATCH: usize = 40_000;
/// Tasks per batch request or call.
const BATCH: usize = 100;
/// Concurrent connections (or callers) of the single rows.
const CONNECTIONS: usize = 50;
/// Concurrent connections (or callers) of the batch rows.
const BATCH_CONNECTIONS: usize = 4;
const RUNS: usize = 3;

pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== ingest: HTTP beside the Client, 100-byte payload, median of {RUNS} runs, redis at {url}"
    );
    let mut rows: [Vec<f64>; 4] = Default::default();
    for run in 0..RUNS {
        let client = connect(&url, &format!("bench-ingest-{run}")).await?;
        let (addr, stop) = serve(client.clone()).await?;
        rows[0].push(http_single(addr).await?);
        rows[1].push(client_single(&client).await?);
        rows[2].push(http_batch(addr).await?);
        rows[3].push(client_batch(&client).await?);
        let _ = stop.send(());
        flush(&client).await?;
    }
    let [http_1, client_1, http_b, client_b] = rows.map(|r| median(&r));
    pair(
        &format!("single, {CONNECTIONS} connections / callers"),
        http_1,
        client_1,
    );
    pair(
        &format!("batch of {BATCH}, {BATCH_CONNECTIONS} connections / callers"),
        http_b,
        client_b,
    );
    Ok(())
}

/// One row: the HTTP rate, the `Client` rate, and their ratio.
fn pair(label: &str, http: f64, client: f64) {
    println!(
        "enqueue {label:<38} http {http:>10.0} tasks/s   client {client:>10.0} tasks/s   \
         http/client {:>5.2}",
        http / client
    );
}

/// An ingest over `client` on a loopback port; it stops when the sender is used or dropped.
async fn serve(client: Client) -> Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = chronos_ingest::IngestConfig::default();
    tokio::spawn(chronos_ingest::serve_on(listener, client, config, async {
        let _ = rx.await;
    }));
    Ok((addr, tx))
}

/// The JSON of one bench task.
fn task_json() -> String {
    format!(
        r#"{{"kind":"bench","payload":{{"body":"{}"}}}}"#,
        payload().body
    )
}

async fn http_single(addr: SocketAddr) -> Result<f64> {
    let body: Arc<str> = task_json().into();
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..CONNECTIONS {
        let body = body.clone();
        handles.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            for _ in 0..N_SINGLE / CONNECTIONS {
                let status = conn.post("/queues/bench/tasks", body.as_bytes()).await?;
                ensure!(status == 201, "single enqueue answered {status}");
            }
            Ok(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N_SINGLE as f64 / start.elapsed().as_secs_f64())
}

async fn http_batch(addr: SocketAddr) -> Result<f64> {
    let one = task_json();
    let body: Arc<str> = format!("{{\"tasks\":[{}]}}", vec![one; BATCH].join(",")).into();
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..BATCH_CONNECTIONS {
        let body = body.clone();
        handles.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            for _ in 0..N_BATCH / BATCH / BATCH_CONNECTIONS {
                let status = conn
                    .post("/queues/bench/tasks:batch", body.as_bytes())
                    .await?;
                ensure!(status == 200, "batch enqueue answered {status}");
            }
            Ok(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N_BATCH as f64 / start.elapsed().as_secs_f64())
}

async fn client_single(client: &Client) -> Result<f64> {
    let args = Arc::new(payload());
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..CONNECTIONS {
        let (client, args) = (client.clone(), args.clone());
        handles.push(tokio::spawn(async move {
            for _ in 0..N_SINGLE / CONNECTIONS {
                client
                    .enqueue(&*args, EnqueueOptions::new().queue("direct"))
                    .await?;
            }
            Ok::<_, chronos::BrokerError>(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N_SINGLE as f64 / start.elapsed().as_secs_f64())
}

async fn client_batch(client: &Client) -> Result<f64> {
    let args = Arc::new(payload());
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..BATCH_CONNECTIONS {
        let (client, args) = (client.clone(), args.clone());
        handles.push(tokio::spawn(async move {
            let opts = EnqueueOptions::new().queue("direct");
            for _ in 0..N_BATCH / BATCH / BATCH_CONNECTIONS {
                let results = client
                    .enqueue_batch((0..BATCH).map(|_| (&*args, opts.clone())))
                    .await?;
                ensure!(results.iter().all(|r| r.is_ok()), "a task was refused");
            }
            Ok(())
        }));
    }
    for h in handles {
        h.await??;
    }
    Ok(N_BATCH as f64 / start.elapsed().as_secs_f64())
}

/// One keep-alive HTTP/1.1 connection that POSTs JSON and reads answers with a
/// `Content-Length` (every answer of the ingest has one).
struct Conn {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    addr: SocketAddr,
    line: String,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(Self {
            reader: BufReader::new(r),
            writer: w,
            addr,
            line: String::new(),
        })
    }

    /// POSTs `body` to `path`; the answer's status (its body is read and dropped).
    async fn post(&mut self, path: &str, body: &[u8]) -> Result<u16> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let mut request = Vec::with_capacity(head.len() + body.len());
        request.extend_from_slice(head.as_bytes());
        request.extend_from_slice(body);
        self.writer.write_all(&request).await?;
        let mut status = 0u16;
        let mut length = 0usize;
        loop {
            self.line.clear();
            if self.reader.read_line(&mut self.line).await? == 0 {
                bail!("connection closed mid-answer");
            }
            let l = self.line.trim_end();
            if l.is_empty() {
                break;
            }
            if status == 0 {
                status = l
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .context("status line")?;
            } else if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().context("content-length")?;
                }
            }
        }
        let mut sink = vec![0u8; length];
        self.reader.read_exact(&mut sink).await?;
        Ok(status)
    }
}
