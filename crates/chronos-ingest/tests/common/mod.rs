//! An ingest on a real listener over a real Redis, and a small HTTP/1.1 client that speaks to
//! it over a TCP socket (the workspace has no HTTP client crate; this one is all a test needs).

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;

use anyhow::{bail, Context as _, Result};
use chronos_broker::{Client, RedisBroker};
use chronos_ingest::{IngestConfig, IngestError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An ingest serving on 127.0.0.1 until dropped.
pub struct Ingest {
    pub addr: SocketAddr,
    pub broker: RedisBroker,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Ingest {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// A broker on the shared test Redis under a namespace of its own.
pub async fn broker() -> Result<RedisBroker> {
    Ok(RedisBroker::builder(chronos_testkit::shared_url()?)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await?)
}

/// An ingest with `config` over the shared test Redis.
pub async fn ingest(config: IngestConfig) -> Result<Ingest> {
    ingest_over(broker().await?, config).await
}

/// An ingest with `config` over `broker`.
pub async fn ingest_over(broker: RedisBroker, config: IngestConfig) -> Result<Ingest> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let client = Client::new(broker.clone());
    tokio::spawn(async move {
        let r: Result<(), IngestError> =
            chronos_ingest::serve_on(listener, client, config, async {
                let _ = rx.await;
            })
            .await;
        if let Err(e) = r {
            panic!("ingest stopped: {e}");
        }
    });
    Ok(Ingest {
        addr,
        broker,
        stop: Some(tx),
    })
}

/// An answer: status, headers, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// The `error.code` of an error answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code: {} {}", self.status, self.body))
            .to_string()
    }
}

/// A request to the ingest.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: Vec<(&'a str, String)>,
    pub body: Option<Vec<u8>>,
}

impl<'a> Request<'a> {
    pub fn get(path: &'a str) -> Self {
        Self {
            method: "GET",
            path,
            headers: Vec::new(),
            body: None,
        }
    }

    /// A POST of `json` as `application/json`.
    pub fn post(path: &'a str, json: &serde_json::Value) -> Self {
        Self::post_raw(path, json.to_string().into_bytes())
    }

    /// A POST of these bytes as `application/json`.
    pub fn post_raw(path: &'a str, body: Vec<u8>) -> Self {
        Self {
            method: "POST",
            path,
            headers: vec![("content-type", "application/json".to_string())],
            body: Some(body),
        }
    }

    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name, value.into()));
        self
    }

    /// Sends the request and reads the answer; a server that does not answer within 30 s
    /// fails the test instead of hanging it.
    pub async fn send(self, addr: SocketAddr) -> Result<Reply> {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.exchange(addr))
            .await
            .context("no answer within 30 s")?
    }

    async fn exchange(self, addr: SocketAddr) -> Result<Reply> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nconnection: close\r\n",
            self.method, self.path
        );
        if !self
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("host"))
        {
            head.push_str(&format!("host: {addr}\r\n"));
        }
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = self.body.unwrap_or_default();
        if !self.headers.iter().any(|(k, _)| {
            k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
        }) {
            head.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(head.as_bytes()).await?;
        // A server that refuses a body before reading it may close the connection while it is
        // still being written: what it answered is read all the same.
        let _ = s.write_all(&body).await;
        let mut raw = Vec::new();
        let read = s.read_to_end(&mut raw).await;
        if raw.is_empty() {
            read.context("no answer")?;
            bail!("empty answer");
        }
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Result<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n").context("no end of headers")?;
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .context("no status")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        loop {
            let (size, after) = rest.split_once("\r\n").context("chunk size")?;
            let n = usize::from_str_radix(size.trim(), 16).context("chunk size")?;
            if n == 0 {
                break;
            }
            out.push_str(after.get(..n).context("short chunk")?);
            rest = after.get(n + 2..).context("chunk end")?;
        }
        out
    } else {
        rest.to_string()
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}
