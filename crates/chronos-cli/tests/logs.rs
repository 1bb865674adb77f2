//! The log lines of `chronos dash` and `chronos ingest`, run as processes against a real Redis:
//! an action in the console and a refused login each write a line naming who, as text or as
//! JSON, and the ingest logs the requests it refuses.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use chronos_broker::{Client, EnqueueOptions, Inspect, QueueName, RedisBroker, TaskArgs};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Email {
    to: String,
}

impl TaskArgs for Email {
    const KIND: &'static str = "email";
}

const TOKEN: &str = "a-token-for-the-log-test";

/// A serving `chronos` process (killed on drop) and its stderr, line by line.
struct Serving {
    child: Child,
    lines: Receiver<String>,
    addr: String,
    seen: Vec<String>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// Starts `chronos --namespace ns <args>` on a free port, with `env` set, and waits for the
    /// address it prints.
    fn start(ns: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let url = chronos_testkit::shared_url().expect("redis for tests");
        let mut child = Command::new(env!("CARGO_BIN_EXE_chronos"))
            .env("CHRONOS_REDIS_URL", &url)
            .env_remove("RUST_LOG")
            .env_remove("CHRONOS_LOG_FORMAT")
            .envs(env.iter().copied())
            .args(["--namespace", ns])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run chronos");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Serving {
            child,
            lines,
            addr: String::new(),
            seen: Vec::new(),
        };
        let banner = s.wait_for(|l| l.contains("http://"));
        s.addr = banner
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {banner:?}"))
            .to_string();
        s
    }

    /// The first line from now on that passes `want` (within 20 s).
    fn wait_for(&mut self, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if want(&line) => return line,
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no such line; stderr so far:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// One request over a fresh connection; the status and the body.
    fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let status = out
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {out:?}"));
        let body = out
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }
}

/// The value of the first hidden `csrf` field of a page.
fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf\"").expect("a csrf field");
    page[at..]
        .split("value=\"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .expect("its value")
        .to_string()
}

const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded");

/// Logs in with a wrong token through the login form.
fn wrong_login(dash: &Serving) {
    let (_, page) = dash.http("GET", "/login", &[], "");
    let body = format!("csrf={}&token=wrong&next=%2F", csrf(&page));
    let (status, _) = dash.http("POST", "/login", &[FORM], &body);
    assert_eq!(status, 401);
}

async fn queue_with_a_task(ns: &str) -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await
        .expect("connect");
    Client::new(broker.clone())
        .enqueue(
            &Email {
                to: "ada@example.com".into(),
            },
            EnqueueOptions::new().queue("mail"),
        )
        .await
        .expect("enqueue");
    broker
}

#[tokio::test]
async fn the_console_logs_an_action_and_a_refused_login_naming_who() {
    let ns = chronos_testkit::namespace();
    let broker = queue_with_a_task(&ns).await;
    let mut dash = Serving::start(
        &ns,
        &["dash", "--addr", "127.0.0.1:0", "--token", TOKEN],
        &[],
    );

    wrong_login(&dash);
    let refused = dash.wait_for(|l| l.contains("console login refused"));
    assert!(refused.contains("WARN"), "{refused}");
    assert!(refused.contains("who=anonymous@127.0.0.1:"), "{refused}");

    let bearer = format!("Bearer {TOKEN}");
    let auth = ("authorization", bearer.as_str());
    let (status, page) = dash.http("GET", "/", &[auth], "");
    assert_eq!(status, 200, "{page}");
    let body = format!("csrf={}&back=%2F", csrf(&page));
    let (status, answer) = dash.http("POST", "/queues/mail/pause", &[auth, FORM], &body);
    assert!((300..400).contains(&status), "{status}: {answer}");
    let paused = dash.wait_for(|l| l.contains("console: queue paused"));
    assert!(paused.contains("INFO"), "{paused}");
    assert!(paused.contains("who=bearer@127.0.0.1:"), "{paused}");
    assert!(paused.contains("queue=mail"), "{paused}");
    assert!(!paused.contains(TOKEN), "no secret in a log line: {paused}");
    assert!(broker
        .paused_queues()
        .await
        .expect("paused")
        .contains(&QueueName::new("mail").expect("queue")));
}

#[tokio::test]
async fn log_lines_are_json_objects_with_the_json_format() {
    let ns = chronos_testkit::namespace();
    queue_with_a_task(&ns).await;
    // The environment variable a container sets, instead of the flag.
    let mut dash = Serving::start(
        &ns,
        &["dash", "--addr", "127.0.0.1:0", "--token", TOKEN],
        &[("CHRONOS_LOG_FORMAT", "json")],
    );
    wrong_login(&dash);
    let line = dash.wait_for(|l| l.contains("console login refused"));
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object");
    assert_eq!(v["level"], "WARN", "{v}");
    assert_eq!(v["fields"]["message"], "console login refused: wrong token");
    assert!(
        v["fields"]["who"]
            .as_str()
            .is_some_and(|w| w.starts_with("anonymous@127.0.0.1:")),
        "{v}"
    );

    // The ingest too, with RUST_LOG as an operator chasing a problem sets it.
    let mut ingest = Serving::start(
        &ns,
        &[
            "ingest",
            "--addr",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--log-format",
            "json",
        ],
        &[("RUST_LOG", "debug")],
    );
    let (status, _) = ingest.http(
        "POST",
        "/queues/mail/tasks",
        &[("content-type", "application/json")],
        r#"{"kind":"email","payload":{"to":"x"}}"#,
    );
    assert_eq!(status, 401);
    let line = ingest.wait_for(|l| l.contains("request without a valid token refused"));
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object");
    assert_eq!(v["fields"]["path"], "/queues/mail/tasks", "{v}");
}
