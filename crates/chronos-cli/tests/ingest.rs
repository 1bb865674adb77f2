//! `chronos ingest` run as a process against a real Redis: it serves the HTTP ingest with the
//! global Redis and namespace flags, and refuses a non-loopback address without a token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chronos_broker::{Inspect, QueueName, RedisBroker};

/// The ingest process, killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request over a fresh connection; the whole answer as text.
fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(request.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

#[tokio::test]
async fn ingest_serves_enqueues_into_the_namespace_given() {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let ns = chronos_testkit::namespace();
    // Port 0: the process prints the address it bound.
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &url)
        .args(["--namespace", &ns, "ingest", "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chronos ingest");
    let stderr = child.stderr.take().expect("stderr");
    let running = Running(child);
    // The banner; log lines (with a RUST_LOG from the environment) may come before it.
    let mut line = String::new();
    let mut stderr = BufReader::new(stderr);
    while !line.contains("http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("banner") > 0,
            "no banner"
        );
    }
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let body = r#"{"kind":"email","payload":{"to":"ada@example.com"}}"#;
    let answer = http(
        &addr,
        &format!(
            "POST /queues/mail/tasks HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await
        .expect("connect");
    let stats = broker
        .queue_stats(&QueueName::new("mail").expect("queue"))
        .await
        .expect("stats");
    assert_eq!(stats.pending, 1);
    drop(running);
}

#[test]
fn ingest_refuses_a_public_address_without_a_token() {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &url)
        .env_remove("CHRONOS_INGEST_TOKEN")
        .args(["--namespace", &chronos_testkit::namespace()])
        .args(["ingest", "--addr", "0.0.0.0:0"])
        .output()
        .expect("run chronos ingest");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
}
