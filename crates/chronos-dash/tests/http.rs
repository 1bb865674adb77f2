//! The console over HTTP against a real Redis: who may see and do what (token, host check,
//! CSRF, origin, read-only), that actions act, and that no secret is shown. What a person sees
//! in a browser is tested in tests/tests/dash_browser.rs.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use chronos_admin::Admin;
use chronos_broker::{
    AttemptReport, Client, Consume, EnqueueOptions, Inspect, QueueName, RedisBroker, SettleExt,
    Settlement, TaskArgs,
};
use chronos_dash::{Dash, DashConfig, DashError};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Serialize, Deserialize)]
struct Mail {
    to: String,
}
impl TaskArgs for Mail {
    const KIND: &'static str = "mail";
}

struct Console {
    addr: SocketAddr,
    broker: RedisBroker,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn console(config: DashConfig) -> Result<Console> {
    console_at(&chronos_testkit::shared_url()?, config).await
}

/// A console over the Redis at `url`.
async fn console_at(url: &str, config: DashConfig) -> Result<Console> {
    let url = url.to_string();
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let dash = Dash::new(Admin::new(broker.clone()), config.redis_label(&url))?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dash.serve_on(listener, async {
        let _ = rx.await;
    }));
    Ok(Console {
        addr,
        broker,
        stop: Some(tx),
    })
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The CSRF token of the first form on the page.
    fn csrf(&self) -> Result<String> {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .context("no CSRF field on the page")?;
        let rest = &self.body[at + 19..];
        Ok(rest[..rest.find('"').context("unterminated")?].to_string())
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), by hand: the test sees
/// exactly what a browser or a scraper would send and get.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Reply> {
    let mut s = TcpStream::connect(addr).await?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw)).await??;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").context("no header end")?;
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .context("no status line")?
        .parse()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_string()
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut s: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").context("bad chunk")?;
        let n = usize::from_str_radix(size.trim(), 16)?;
        if n == 0 {
            return Ok(out);
        }
        if rest.len() < n {
            bail!("short chunk");
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    let mut f = String::new();
    for (k, v) in pairs {
        if !f.is_empty() {
            f.push('&');
        }
        f.push_str(k);
        f.push('=');
        f.extend(form_urlencoded_byte(v));
    }
    f
}

fn form_urlencoded_byte(v: &str) -> Vec<char> {
    v.bytes()
        .flat_map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => vec![b as char],
            _ => format!("%{b:02X}").chars().collect(),
        })
        .collect()
}

async fn seed(broker: &RedisBroker, queue: &str, n: usize) -> Result<Vec<String>> {
    let client = Client::new(broker.clone());
    let mut ids = Vec::new();
    for i in 0..n {
        let info = client
            .enqueue(
                &Mail {
                    to: format!("user{i}@example.com"),
                },
                EnqueueOptions::new().queue(queue),
            )
            .await?;
        ids.push(info.id);
    }
    Ok(ids)
}

#[tokio::test]
async fn a_console_off_loopback_needs_a_token() -> Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::builder(url.as_str()).connect().await?;
    let open = DashConfig::default().addr("0.0.0.0:8080".parse()?);
    match Dash::new(Admin::new(broker.clone()), open) {
        Err(DashError::TokenRequired(_)) => {}
        other => bail!("expected TokenRequired, got {other:?}"),
    }
    let guarded = DashConfig::default()
        .addr("0.0.0.0:8080".parse()?)
        .token(Some("s3cret".into()));
    Dash::new(Admin::new(broker), guarded)?;
    Ok(())
}

#[tokio::test]
async fn with_a_token_nothing_is_shown_before_login() -> Result<()> {
    let c = console(DashConfig::default().token(Some("s3cret-token".into()))).await?;
    seed(&c.broker, "mail", 3).await?;
    let html = [("Accept", "text/html")];

    let page = send(c.addr, "GET", "/", &html, "").await?;
    assert_eq!(page.status, 303, "a browser is sent to the login page");
    assert_eq!(page.header("location"), Some("/login?next=%2F"));
    assert!(!page.body.contains("mail"));
    for path in ["/api/overview", "/queues/mail", "/metrics", "/schedules"] {
        let r = send(c.addr, "GET", path, &[], "").await?;
        assert_eq!(r.status, 401, "{path} without login");
    }
    assert_eq!(send(c.addr, "GET", "/healthz", &[], "").await?.status, 200);

    let login = send(c.addr, "GET", "/login", &html, "").await?;
    assert_eq!(login.status, 200);
    let csrf = login.csrf()?;
    let wrong = send(
        c.addr,
        "POST",
        "/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "guess"), ("next", "/")]),
    )
    .await?;
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let right = send(
        c.addr,
        "POST",
        "/login",
        &[],
        &form(&[
            ("csrf", &csrf),
            ("token", "s3cret-token"),
            ("next", "/queues/mail"),
        ]),
    )
    .await?;
    assert_eq!(right.status, 303);
    assert_eq!(right.header("location"), Some("/queues/mail"));
    let cookie = right.header("set-cookie").context("a session cookie")?;
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(
        !cookie.contains("s3cret-token"),
        "the cookie is not the token"
    );
    let session = cookie
        .split(';')
        .next()
        .context("cookie value")?
        .to_string();

    let page = send(c.addr, "GET", "/queues/mail", &[("Cookie", &session)], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("user0@example.com"));

    let bearer = send(
        c.addr,
        "GET",
        "/metrics",
        &[("Authorization", "Bearer s3cret-token")],
        "",
    )
    .await?;
    assert_eq!(bearer.status, 200);
    assert!(bearer
        .body
        .contains("chronos_queue_tasks{queue=\"mail\",state=\"pending\"} 3"));
    // Deduplicated enqueues are counted by mode.
    let client = Client::new(c.broker.clone());
    for n in 0..3 {
        let mail = Mail {
            to: format!("digest{n}@example.com"),
        };
        let opts = EnqueueOptions::new()
            .queue("mail")
            .dedup(chronos_broker::Dedup::key("digest"));
        client.enqueue(&mail, opts).await?;
    }
    // The page is cached for a second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let scraped = send(
        c.addr,
        "GET",
        "/metrics",
        &[("Authorization", "Bearer s3cret-token")],
        "",
    )
    .await?;
    assert!(
        scraped
            .body
            .contains("chronos_queue_deduplicated_total{queue=\"mail\",mode=\"reject\"} 2"),
        "{}",
        scraped.body
    );

    // An open redirect is not: `next` must be a local path.
    let away = send(
        c.addr,
        "POST",
        "/login",
        &[],
        &form(&[
            ("csrf", &csrf),
            ("token", "s3cret-token"),
            ("next", "//evil.example/"),
        ]),
    )
    .await?;
    assert_eq!(away.header("location"), Some("/"));
    Ok(())
}

#[tokio::test]
async fn the_bearer_scheme_name_is_accepted_in_any_case() -> Result<()> {
    let c = console(DashConfig::default().token(Some("s3cret-token".into()))).await?;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} s3cret-token");
        let r = send(
            c.addr,
            "GET",
            "/api/overview",
            &[("Authorization", &auth)],
            "",
        )
        .await?;
        assert_eq!(r.status, 200, "{auth}: {}", r.body);
    }
    for auth in [
        "Basic s3cret-token",
        "bearer wrong-token",
        "bearers3cret-token",
    ] {
        let r = send(
            c.addr,
            "GET",
            "/api/overview",
            &[("Authorization", auth)],
            "",
        )
        .await?;
        assert_eq!(r.status, 401, "{auth}");
    }
    Ok(())
}

#[tokio::test]
async fn actions_need_the_form_token_and_our_origin() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "mail", 2).await?;
    let page = send(c.addr, "GET", "/queues/mail", &[], "").await?;
    let csrf = page.csrf()?;
    let archive = format!("/queues/mail/tasks/{}/archive", ids[0]);
    let origin = format!("http://{}", c.addr);

    let none = send(c.addr, "POST", &archive, &[], &form(&[("back", "/")])).await?;
    assert_eq!(none.status, 403, "no CSRF token");
    let stale = send(
        c.addr,
        "POST",
        &archive,
        &[],
        &form(&[("csrf", "0000"), ("back", "/")]),
    )
    .await?;
    assert_eq!(stale.status, 403, "a wrong CSRF token");
    let foreign = send(
        c.addr,
        "POST",
        &archive,
        &[("Origin", "http://evil.example")],
        &form(&[("csrf", &csrf), ("back", "/")]),
    )
    .await?;
    assert_eq!(foreign.status, 403, "another site's origin");
    let q = QueueName::new("mail")?;
    let task = c.broker.task(&q, &ids[0]).await?.context("task")?;
    assert_eq!(task.state.as_str(), "pending", "nothing changed so far");

    let ok = send(
        c.addr,
        "POST",
        &archive,
        &[("Origin", &origin)],
        &form(&[("csrf", &csrf), ("back", "/queues/mail")]),
    )
    .await?;
    assert_eq!(ok.status, 303, "{}", ok.body);
    assert!(ok
        .header("location")
        .is_some_and(|l| l.starts_with("/queues/mail?msg=")));
    let task = c.broker.task(&q, &ids[0]).await?.context("task")?;
    assert_eq!(task.state.as_str(), "archived");

    let pause = send(
        c.addr,
        "POST",
        "/queues/mail/pause",
        &[("Origin", &origin)],
        &form(&[("csrf", &csrf), ("back", "/")]),
    )
    .await?;
    assert_eq!(pause.status, 303);
    assert!(c.broker.paused_queues().await?.contains(&q));
    Ok(())
}

#[tokio::test]
async fn bulk_actions_confirm_the_count_first() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "bulk", 12).await?;
    let csrf = send(c.addr, "GET", "/queues/bulk", &[], "").await?.csrf()?;
    let ask = send(
        c.addr,
        "POST",
        "/queues/bulk/bulk",
        &[],
        &form(&[
            ("csrf", &csrf),
            ("action", "archive"),
            ("state", "pending"),
            ("kind", ""),
            ("q", "user1"),
        ]),
    )
    .await?;
    assert_eq!(ask.status, 200);
    // user1, user10, user11
    assert!(
        ask.body.contains("<strong id=\"confirm-count\">3</strong>"),
        "{}",
        ask.body
    );
    let q = QueueName::new("bulk")?;
    assert_eq!(
        c.broker.queue_stats(&q).await?.archived,
        0,
        "asking changes nothing"
    );
    let done = send(
        c.addr,
        "POST",
        "/queues/bulk/bulk",
        &[],
        &form(&[
            ("csrf", &csrf),
            ("action", "archive"),
            ("state", "pending"),
            ("kind", ""),
            ("q", "user1"),
            ("confirm", "3"),
        ]),
    )
    .await?;
    assert_eq!(done.status, 303);
    let job = done
        .header("location")
        .context("the job's page")?
        .to_string();
    assert!(job.starts_with("/jobs/"), "{job}");
    let end = job_end(c.addr, &job, &[]).await?;
    assert_eq!(end["state"], "finished");
    assert_eq!(end["done"], 3);
    let stats = c.broker.queue_stats(&q).await?;
    assert_eq!((stats.archived, stats.pending), (3, 9));
    Ok(())
}

/// An archive adds to the set the dead letters are in, which the servers' janitor keeps under
/// its cap by deleting the oldest: the confirm step names what this archive will delete.
#[tokio::test]
async fn a_bulk_archive_confirm_names_what_the_archive_cap_will_delete() -> Result<()> {
    use chronos_broker::{Maintain, ServerRecord};
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "bulk", 12).await?;
    let record = ServerRecord {
        id: "srv-cap".into(),
        host: "host-1".into(),
        pid: 7,
        queues: vec![("bulk".into(), 1)],
        concurrency: 4,
        started_at_ms: chronos_broker::now_ms(),
        running: 0,
        last_seen_ms: chronos_broker::now_ms(),
        tasks: Vec::new(),
        archive_max: Some(10),
    };
    c.broker
        .publish_server(&record, Duration::from_secs(30))
        .await?;
    let csrf = send(c.addr, "GET", "/queues/bulk", &[], "").await?.csrf()?;
    let ask = |action: &'static str| {
        let csrf = csrf.clone();
        async move {
            send(
                c.addr,
                "POST",
                "/queues/bulk/bulk",
                &[],
                &form(&[
                    ("csrf", &csrf),
                    ("action", action),
                    ("state", "pending"),
                    ("kind", ""),
                    ("q", ""),
                ]),
            )
            .await
        }
    };
    let archive = ask("archive").await?;
    assert_eq!(archive.status, 200);
    assert!(
        archive
            .body
            .contains("<strong id=\"archive-cap-deletes\">2</strong>"),
        "{}",
        archive.body
    );
    // A delete adds nothing to the archive: no word of its cap.
    let delete = ask("delete").await?;
    assert!(!delete.body.contains("archive-cap"), "{}", delete.body);
    Ok(())
}

/// Polls a job's JSON until it is no longer running; answers its last state.
async fn job_end(
    addr: SocketAddr,
    job: &str,
    headers: &[(&str, &str)],
) -> Result<serde_json::Value> {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = send(addr, "GET", &format!("/api{job}"), headers, "").await?;
        assert_eq!(r.status, 200, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body)?;
        if v["state"] != "running" {
            return Ok(v);
        }
        if std::time::Instant::now() > until {
            bail!("job {job} still running: {v}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_read_only_console_shows_and_takes_no_action() -> Result<()> {
    let c = console(DashConfig::default().read_only(true)).await?;
    let ids = seed(&c.broker, "ro", 2).await?;
    let page = send(c.addr, "GET", "/queues/ro", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&ids[0]));
    assert!(!page.body.contains("data-action"), "no action button");
    assert!(!page.body.contains("method=\"post\""), "no form that posts");
    // A hand-made POST is refused for being an action, before any form check.
    let r = send(
        c.addr,
        "POST",
        &format!("/queues/ro/tasks/{}/delete", ids[0]),
        &[],
        &form(&[("csrf", "whatever")]),
    )
    .await?;
    assert_eq!(r.status, 403);
    assert!(r.body.contains("read-only"), "{}", r.body);
    assert!(c
        .broker
        .task(&QueueName::new("ro")?, &ids[0])
        .await?
        .is_some());
    Ok(())
}

#[tokio::test]
async fn headers_host_check_and_no_secret_shown() -> Result<()> {
    let url = chronos_testkit::shared_url()?;
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await?;
    let config = DashConfig::default().redis_label("redis://admin:hunter2@10.1.2.3:6379/0");
    let dash = Dash::new(Admin::new(broker), config)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(dash.serve_on(listener, std::future::pending()));

    let page = send(addr, "GET", "/", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("redis://admin:***@10.1.2.3:6379/0"));
    assert!(!page.body.contains("hunter2"));
    let csp = page.header("content-security-policy").context("CSP")?;
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    assert!(!csp.contains("unsafe-inline"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(!page.body.contains("<script>"), "no inline script");

    let rebound = send(addr, "GET", "/", &[("Host", "evil.example")], "").await?;
    assert_eq!(rebound.status, 421, "a foreign host name is refused");

    let missing = send(addr, "GET", "/queues/nope/tasks/zzz", &[], "").await?;
    assert_eq!(missing.status, 404);
    let bad = send(addr, "GET", "/queues/bad%20name", &[], "").await?;
    assert_eq!(bad.status, 400);
    let js = send(addr, "GET", "/assets/app.js", &[], "").await?;
    assert_eq!(js.status, 200);
    assert!(js
        .header("content-type")
        .is_some_and(|t| t.contains("javascript")));
    Ok(())
}

#[tokio::test]
async fn a_public_listener_without_a_token_is_refused_whatever_the_config_says() -> Result<()> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::builder(url.as_str()).connect().await?;
    // The config says loopback; the listener is on every interface.
    let dash = Dash::new(Admin::new(broker), DashConfig::default())?;
    let listener = TcpListener::bind("0.0.0.0:0").await?;
    match dash.serve_on(listener, std::future::pending()).await {
        Err(DashError::TokenRequired(addr)) => assert!(addr.ip().is_unspecified()),
        other => bail!("expected TokenRequired, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_bulk_action_asks_again_when_more_match_than_confirmed() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "grow", 4).await?;
    let csrf = send(c.addr, "GET", "/queues/grow", &[], "").await?.csrf()?;
    let stale = send(
        c.addr,
        "POST",
        "/queues/grow/bulk",
        &[],
        &form(&[
            ("csrf", &csrf),
            ("action", "archive"),
            ("state", "pending"),
            ("confirm", "2"),
        ]),
    )
    .await?;
    assert_eq!(stale.status, 200, "asked again");
    assert!(
        stale.body.contains("id=\"count-changed\""),
        "{}",
        stale.body
    );
    assert!(stale
        .body
        .contains("<strong id=\"confirm-count\">4</strong>"));
    let q = QueueName::new("grow")?;
    assert_eq!(c.broker.queue_stats(&q).await?.archived, 0);
    Ok(())
}

#[tokio::test]
async fn notices_are_shown_only_when_the_console_wrote_them() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "notes", 1).await?;
    let forged = send(
        c.addr,
        "GET",
        "/queues/notes?msg=Re-enter+your+token+at+evil.example",
        &[],
        "",
    )
    .await?;
    assert!(
        !forged.body.contains("evil.example"),
        "a made-up notice is not shown"
    );
    let csrf = forged.csrf()?;
    let done = send(
        c.addr,
        "POST",
        &format!("/queues/notes/tasks/{}/archive", ids[0]),
        &[],
        &form(&[("csrf", &csrf), ("back", "/queues/notes")]),
    )
    .await?;
    let location = done.header("location").context("redirect")?.to_string();
    let page = send(c.addr, "GET", &location, &[], "").await?;
    assert!(page.body.contains("archive done"), "{}", page.body);
    // Tampering with the message breaks its signature.
    let tampered = location.replace("archive", "delete");
    let page = send(c.addr, "GET", &tampered, &[], "").await?;
    assert!(!page.body.contains("delete done"));
    Ok(())
}

#[tokio::test]
async fn a_filtered_page_that_found_nothing_yet_offers_to_go_on() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let client = Client::new(c.broker.clone());
    let hay: Vec<Mail> = (0..1_100)
        .map(|i| Mail {
            to: format!("hay{i}@example.com"),
        })
        .collect();
    let opts = EnqueueOptions::new().queue("stack");
    client
        .enqueue_batch(hay.iter().map(|m| (m, opts.clone())))
        .await?;
    client
        .enqueue(
            &Mail {
                to: "needle@example.com".into(),
            },
            opts.clone(),
        )
        .await?;
    let page = send(
        c.addr,
        "GET",
        "/queues/stack?state=pending&q=needle",
        &[],
        "",
    )
    .await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"no-match-yet\""), "{}", page.body);
    assert!(
        page.body.contains("data-bulk=\"archive\""),
        "the bulk form stays"
    );
    let mut next = send(c.addr, "GET", &continue_href(&page.body)?, &[], "").await?;
    // Follow the cursor until the needle shows (a page reads a bounded number of tasks).
    for _ in 0..5 {
        if next.body.contains("needle@example.com") {
            break;
        }
        next = send(c.addr, "GET", &continue_href(&next.body)?, &[], "").await?;
    }
    assert!(next.body.contains("needle@example.com"));

    let bad = send(
        c.addr,
        "GET",
        "/queues/stack?state=pending&cursor=garbage",
        &[],
        "",
    )
    .await?;
    assert_eq!(bad.status, 400, "a bad cursor is the caller's error");
    Ok(())
}

/// The target of a page's "Continue »" link.
fn continue_href(body: &str) -> Result<String> {
    let at = body.find("Continue »").context("continue link")?;
    let start = body[..at].rfind("href=\"").context("href")? + 6;
    Ok(body[start..]
        .split('"')
        .next()
        .context("href end")?
        .replace("&amp;", "&"))
}

#[tokio::test]
async fn the_oldest_waiting_task_has_an_age() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    // The first task waits 4 s, then goes to a worker; the second has waited 1 s by then.
    seed(&c.broker, "aging", 1).await?;
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    seed(&c.broker, "aging", 1).await?;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // One task delivered to a worker: the age is the next waiting one's, read past the
    // group's last-delivered entry.
    let q = QueueName::new("aging")?;
    c.broker.ensure_queue(&q).await?;
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    anyhow::ensure!(got.leases.len() == 1, "one delivery: {got:?}");
    let r = send(c.addr, "GET", "/api/overview", &[], "").await?;
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    let q = v["queues"]
        .as_array()
        .context("queues")?
        .iter()
        .find(|q| q["name"] == "aging")
        .context("aging queue")?;
    let age = q["oldest_pending_s"].as_i64().context("an age")?;
    assert!(
        (1..=3).contains(&age),
        "the waiting task's age, not the delivered one's: {age}"
    );
    Ok(())
}

#[tokio::test]
async fn a_cancelled_task_has_its_tab_its_reason_and_its_gauge() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "orders", 1).await?;
    let q = QueueName::new("orders")?;
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    let lease = got.leases.first().context("one delivery")?;
    c.broker.start(&q, std::slice::from_ref(&lease.id)).await?;
    c.broker
        .cancel(&lease.id, "customer withdrew the order")
        .await?;
    let page = send(c.addr, "GET", "/queues/orders?state=cancelled", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&ids[0]), "{}", page.body);
    assert!(page.body.contains("customer withdrew the order"));
    let task = send(
        c.addr,
        "GET",
        &format!("/queues/orders/tasks/{}", ids[0]),
        &[],
        "",
    )
    .await?;
    assert!(task.body.contains("id=\"cancel-reason\""), "{}", task.body);
    let metrics = send(c.addr, "GET", "/metrics", &[], "").await?;
    assert!(
        metrics
            .body
            .contains("chronos_queue_tasks{queue=\"orders\",state=\"cancelled\"} 1"),
        "{}",
        metrics.body
    );
    Ok(())
}

#[tokio::test]
async fn the_locks_page_lists_a_queues_locks_and_releases_one_with_the_form_token() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let client = Client::new(c.broker.clone());
    let held = client
        .enqueue(
            &Mail {
                to: "digest@example.com".into(),
            },
            EnqueueOptions::new()
                .queue("mail")
                .dedup(chronos_broker::Dedup::key("digest:7")),
        )
        .await?;
    let queue = send(c.addr, "GET", "/queues/mail", &[], "").await?;
    assert!(
        queue.body.contains("/queues/mail/locks"),
        "the queue page links its locks"
    );
    let page = send(c.addr, "GET", "/queues/mail/locks", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("digest:7") && page.body.contains(&held.id),
        "{}",
        page.body
    );
    let csrf = page.csrf()?;
    let origin = format!("http://{}", c.addr);
    // Without the form token nothing is released.
    let refused = send(
        c.addr,
        "POST",
        "/queues/mail/locks/release",
        &[("Origin", &origin)],
        &form(&[("key", "digest:7"), ("back", "/queues/mail/locks")]),
    )
    .await?;
    assert_eq!(refused.status, 403, "no CSRF token");
    assert_eq!(
        c.broker
            .dedup_locks(&QueueName::new("mail")?, 10)
            .await?
            .len(),
        1
    );
    let released = send(
        c.addr,
        "POST",
        "/queues/mail/locks/release",
        &[("Origin", &origin)],
        &form(&[
            ("csrf", &csrf),
            ("key", "digest:7"),
            ("holder", &held.id),
            ("back", "/queues/mail/locks"),
        ]),
    )
    .await?;
    assert_eq!(released.status, 303, "{}", released.body);
    assert!(c
        .broker
        .dedup_locks(&QueueName::new("mail")?, 10)
        .await?
        .is_empty());
    Ok(())
}

#[tokio::test]
async fn the_schedules_page_shows_where_each_schedule_comes_from() -> Result<()> {
    use chronos_scheduler::{NewSchedule, RuntimeSpec, ScheduleOptions};
    let c = console(DashConfig::default()).await?;
    let rt = chronos_scheduler::RuntimeSchedules::new(c.broker.clone());
    for id in ["rt-live", "rt-paused"] {
        rt.add(NewSchedule::raw(
            id,
            "mail",
            &serde_json::json!({"to": "ops@example.com"}),
            RuntimeSpec::Every(Duration::from_secs(60)),
            ScheduleOptions::new().queue("mail"),
        )?)
        .await?;
    }
    rt.pause("rt-paused").await?;
    let page = send(c.addr, "GET", "/schedules", &[("Accept", "text/html")], "").await?;
    assert_eq!(page.status, 200);
    let row = |id: &str| -> Result<String> {
        let at = page
            .body
            .find(&format!("data-id=\"{id}\""))
            .with_context(|| format!("no row {id}"))?;
        let end = page.body[at..].find("</tr>").context("row end")?;
        Ok(page.body[at..at + end].to_string())
    };
    let live = row("rt-live")?;
    assert!(live.contains(">runtime<"), "{live}");
    let paused = row("rt-paused")?;
    assert!(paused.contains(">paused<"), "{paused}");
    Ok(())
}

#[tokio::test]
async fn a_runtime_schedule_is_run_paused_and_edited_from_its_page_which_lists_its_fires(
) -> Result<()> {
    use chronos_broker::{DefSpec, ManageSchedules};
    use chronos_scheduler::{NewSchedule, ScheduleOptions, Spec};
    let c = console(DashConfig::default()).await?;
    let rt = chronos_scheduler::RuntimeSchedules::new(c.broker.clone());
    rt.add(NewSchedule::raw(
        "nightly",
        "mail",
        &serde_json::json!({"to": "ops@example.com"}),
        Spec::interval(Duration::from_secs(3600))?,
        ScheduleOptions::new().queue("mail"),
    )?)
    .await?;
    let page = send(c.addr, "GET", "/schedules/nightly", &[], "").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    for part in [
        "id=\"schedule-actions\"",
        "id=\"schedule-edit\"",
        "id=\"no-fires\"",
    ] {
        assert!(page.body.contains(part), "{part}: {}", page.body);
    }
    let csrf = page.csrf()?;
    let origin = format!("http://{}", c.addr);
    let post = |path: &'static str, fields: Vec<(&'static str, String)>| {
        let origin = origin.clone();
        let csrf = csrf.clone();
        async move {
            let mut all: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
            all.extend(fields.iter().map(|(k, v)| (*k, v.as_str())));
            send(c.addr, "POST", path, &[("Origin", &origin)], &form(&all)).await
        }
    };
    // Run now, twice with the same request id (a form sent twice): one task.
    for _ in 0..2 {
        let r = post("/schedules/nightly/run", vec![("request", "req-1".into())]).await?;
        assert_eq!(r.status, 303, "{}", r.body);
    }
    let mail = QueueName::new("mail")?;
    let pending = c
        .broker
        .list_tasks(&mail, chronos_broker::TaskState::Pending, 0, 10)
        .await?;
    assert_eq!(
        pending.len(),
        1,
        "run now twice with one request id enqueues once"
    );
    let page = send(c.addr, "GET", "/schedules/nightly", &[], "").await?;
    let fires = page
        .body
        .split("id=\"fires\"")
        .nth(1)
        .context("no fires table")?;
    assert!(fires.contains("data-outcome=\"run now\""), "{fires}");
    let href = format!("/queues/mail/tasks/{}", pending[0].id.replace(':', "%3A"));
    assert!(fires.contains(&href), "{href}: {fires}");
    assert!(fires.contains("data-state=\"pending\""), "{fires}");
    // Pause, then the page offers resume.
    assert_eq!(post("/schedules/nightly/pause", vec![]).await?.status, 303);
    assert!(rt.get("nightly").await?.context("gone")?.paused);
    let page = send(c.addr, "GET", "/schedules/nightly", &[], "").await?;
    assert!(
        page.body.contains("data-action=\"resume\""),
        "{}",
        page.body
    );
    assert_eq!(post("/schedules/nightly/resume", vec![]).await?.status, 303);
    assert!(!rt.get("nightly").await?.context("gone")?.paused);
    // Bad edits are a 400 and change nothing.
    let before = c.broker.schedule_def("nightly").await?.context("gone")?.raw;
    for fields in [
        vec![
            ("cron", "0 3 * * *".to_string()),
            ("every", "5m".to_string()),
        ],
        vec![("cron", "61 * * * *".to_string())],
        vec![("every", "soon".to_string())],
        vec![("payload", "{not json".to_string())],
    ] {
        let r = post("/schedules/nightly/edit", fields.clone()).await?;
        assert_eq!(r.status, 400, "{fields:?}: {}", r.body);
    }
    assert_eq!(
        c.broker.schedule_def("nightly").await?.context("gone")?.raw,
        before
    );
    // A good edit keeps kind, queue and options, and changes spec and payload.
    let r = post(
        "/schedules/nightly/edit",
        vec![
            ("cron", "30 2 * * *".into()),
            ("zone", "Europe/Paris".into()),
            ("payload", r#"{"to": "night@example.com"}"#.into()),
        ],
    )
    .await?;
    assert_eq!(r.status, 303, "{}", r.body);
    let d = rt.get("nightly").await?.context("gone")?;
    assert_eq!(
        d.spec,
        DefSpec::Cron {
            expr: "30 2 * * *".into(),
            zone: "Europe/Paris".into()
        }
    );
    assert_eq!(d.kind, "mail");
    assert_eq!(d.queue, "mail");
    assert_eq!(
        chronos_broker::payload_json(&d.payload),
        r#"{"to":"night@example.com"}"#
    );
    // A spec-only edit leaves the payload byte for byte, even bytes JSON would reorder.
    #[derive(Serialize, Deserialize)]
    struct Unsorted {
        zeta: u8,
        alpha: u8,
    }
    impl TaskArgs for Unsorted {
        const KIND: &'static str = "mail";
    }
    let stored = c.broker.schedule_def("nightly").await?.context("gone")?;
    let mut def = stored.def.clone();
    def.payload = chronos_broker::encode_args(&Unsorted { zeta: 1, alpha: 2 })?;
    c.broker
        .put_schedule_def("nightly", Some(&stored.raw), Some(&def))
        .await?;
    let page = send(c.addr, "GET", "/schedules/nightly", &[], "").await?;
    let shown = chronos_broker::payload_json(&def.payload);
    assert!(page.body.contains("name=\"payload_was\""), "{}", page.body);
    let r = post(
        "/schedules/nightly/edit",
        vec![
            ("cron", "45 2 * * *".into()),
            ("zone", "Europe/Paris".into()),
            ("payload", shown.clone()),
            ("payload_was", shown),
        ],
    )
    .await?;
    assert_eq!(r.status, 303, "{}", r.body);
    let d = rt.get("nightly").await?.context("gone")?;
    assert_eq!(d.describe, "45 2 * * * (Europe/Paris)");
    assert_eq!(d.payload, def.payload, "the payload's bytes are kept");
    assert_eq!(
        post("/schedules/nightly/explode", vec![]).await?.status,
        400
    );
    assert_eq!(
        send(c.addr, "GET", "/schedules/nope", &[], "")
            .await?
            .status,
        404
    );
    Ok(())
}

#[tokio::test]
async fn a_schedule_that_missed_its_trigger_is_overdue_on_its_page_and_in_the_metrics() -> Result<()>
{
    use chronos_broker::ManageSchedules;
    use chronos_scheduler::{NewSchedule, ScheduleOptions, Spec};
    let c = console(DashConfig::default()).await?;
    let rt = chronos_scheduler::RuntimeSchedules::new(c.broker.clone());
    for id in ["fresh", "late"] {
        rt.add(NewSchedule::raw(
            id,
            "mail",
            &serde_json::json!({}),
            Spec::interval(Duration::from_secs(60))?,
            ScheduleOptions::new().queue("mail"),
        )?)
        .await?;
    }
    // "late" became active ten minutes ago and never fired: its first trigger is long due.
    let stored = c.broker.schedule_def("late").await?.context("gone")?;
    let mut def = stored.def.clone();
    def.active_since_ms -= 600_000;
    let put = c
        .broker
        .put_schedule_def("late", Some(&stored.raw), Some(&def))
        .await?;
    assert_eq!(put, chronos_broker::PutOutcome::Written);
    let list = send(c.addr, "GET", "/schedules", &[], "").await?;
    let row = |id: &str| -> Result<String> {
        let at = list
            .body
            .find(&format!("data-id=\"{id}\""))
            .context("row")?;
        let end = list.body[at..].find("</tr>").context("row end")?;
        Ok(list.body[at..at + end].to_string())
    };
    assert!(
        row("late")?.contains("data-status=\"overdue\""),
        "{}",
        row("late")?
    );
    assert!(
        !row("fresh")?.contains("data-status=\"overdue\""),
        "{}",
        row("fresh")?
    );
    let page = send(c.addr, "GET", "/schedules/late", &[], "").await?;
    assert!(page.body.contains("id=\"overdue\""), "{}", page.body);
    let metrics = send(c.addr, "GET", "/metrics", &[], "").await?;
    assert!(
        metrics
            .body
            .contains("chronos_schedule_overdue{schedule=\"late\",queue=\"mail\"} 1"),
        "{}",
        metrics.body
    );
    assert!(
        metrics
            .body
            .contains("chronos_schedule_overdue{schedule=\"fresh\",queue=\"mail\"} 0"),
        "{}",
        metrics.body
    );
    // A leader that took over since decided that trigger in its catch-up (its misfire policy
    // may skip it): not overdue any more.
    use chronos_broker::Schedules;
    c.broker
        .acquire_leadership("t", "leader-1", Duration::from_secs(30), 0)
        .await?
        .context("leader")?;
    let page = send(c.addr, "GET", "/schedules/late", &[], "").await?;
    assert!(!page.body.contains("id=\"overdue\""), "{}", page.body);
    assert!(c.broker.resign_leadership("t").await?);
    let page = send(c.addr, "GET", "/schedules/late", &[], "").await?;
    assert!(page.body.contains("id=\"overdue\""), "{}", page.body);
    // Paused, it is not overdue: it is meant not to fire.
    rt.pause("late").await?;
    let page = send(c.addr, "GET", "/schedules/late", &[], "").await?;
    assert!(!page.body.contains("id=\"overdue\""), "{}", page.body);
    Ok(())
}

/// `n` pending mails in `queue`, in one batch.
async fn seed_many(broker: &RedisBroker, queue: &str, n: usize) -> Result<()> {
    let client = Client::new(broker.clone());
    let all: Vec<Mail> = (0..n)
        .map(|i| Mail {
            to: format!("bulk{i}@example.com"),
        })
        .collect();
    let opts = EnqueueOptions::new().queue(queue);
    for r in client
        .enqueue_batch(all.iter().map(|m| (m, opts.clone())))
        .await?
    {
        r?;
    }
    Ok(())
}

#[tokio::test]
async fn an_unknown_queue_is_a_404_naming_the_queues_that_exist() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "critical", 1).await?;
    seed(&c.broker, "default", 1).await?;
    let page = send(c.addr, "GET", "/queues/critcal", &[], "").await?;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(page.body.contains("id=\"suggestion\""), "{}", page.body);
    assert!(
        page.body.contains("href=\"/queues/critical\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("id=\"known-queues\""), "{}", page.body);
    for path in ["/api/queues/critcal", "/queues/critcal/tasks/some-id"] {
        assert_eq!(
            send(c.addr, "GET", path, &[], "").await?.status,
            404,
            "{path}"
        );
    }
    let csrf = send(c.addr, "GET", "/queues/critical", &[], "")
        .await?
        .csrf()?;
    let pause = send(
        c.addr,
        "POST",
        "/queues/critcal/pause",
        &[],
        &form(&[("csrf", &csrf), ("back", "/")]),
    )
    .await?;
    assert_eq!(pause.status, 404, "a typo pauses nothing");
    assert!(c.broker.paused_queues().await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_confirmed_bulk_action_runs_in_the_background_and_can_be_cancelled() -> Result<()> {
    let c = console(DashConfig::default().bulk_pace(100, Duration::from_millis(20))).await?;
    seed_many(&c.broker, "big", 3000).await?;
    let csrf = send(c.addr, "GET", "/queues/big", &[], "").await?.csrf()?;
    let fields = [
        ("csrf", csrf.as_str()),
        ("action", "delete"),
        ("state", "pending"),
        ("kind", ""),
        ("q", ""),
        ("confirm", "3000"),
    ];
    let started = std::time::Instant::now();
    let go = send(c.addr, "POST", "/queues/big/bulk", &[], &form(&fields)).await?;
    assert_eq!(go.status, 303);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the POST answers before the work is done"
    );
    let job = go.header("location").context("job page")?.to_string();
    let page = send(c.addr, "GET", &job, &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"job-cancel\""), "{}", page.body);
    // Progress shows while it runs.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v: serde_json::Value = serde_json::from_str(
            &send(c.addr, "GET", &format!("/api{job}"), &[], "")
                .await?
                .body,
        )?;
        assert_eq!(v["state"], "running", "{v}");
        if v["done"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(std::time::Instant::now() < until, "no progress: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancel = send(
        c.addr,
        "POST",
        &format!("{job}/cancel"),
        &[],
        &form(&[("csrf", &csrf)]),
    )
    .await?;
    assert_eq!(cancel.status, 303);
    let end = job_end(c.addr, &job, &[]).await?;
    assert_eq!(end["state"], "cancelled", "{end}");
    let done = end["done"].as_u64().context("done")?;
    assert!(done > 0 && done < 3000, "{end}");
    let left = c.broker.queue_stats(&QueueName::new("big")?).await?.pending;
    assert_eq!(left, 3000 - done, "the report says what was done");
    let page = send(c.addr, "GET", &job, &[], "").await?;
    assert!(page.body.contains("id=\"job-cancelled\""), "{}", page.body);
    assert!(!page.body.contains("id=\"job-cancel\""));
    Ok(())
}

#[tokio::test]
async fn with_redis_down_pages_and_the_probe_answer_at_once_with_the_cause() -> Result<()> {
    let mut redis = chronos_testkit::RedisServer::start()?;
    let open = console_at(&redis.url(), DashConfig::default()).await?;
    let guarded = console_at(
        &redis.url(),
        DashConfig::default().token(Some("s3cret-token".into())),
    )
    .await?;
    seed(&open.broker, "mail", 1).await?;
    redis.kill();
    // The client notices the closed connection at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for path in ["/", "/queues/mail", "/api/overview", "/healthz"] {
        let t = std::time::Instant::now();
        let r = send(open.addr, "GET", path, &[], "").await?;
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{path} took {:?}",
            t.elapsed()
        );
        assert_eq!(r.status, 503, "{path}");
        assert!(r.body.contains("connection refused"), "{path}: {}", r.body);
        assert!(!r.body.contains("Timeout"), "{path}: {}", r.body);
    }
    let anonymous = send(guarded.addr, "GET", "/healthz", &[], "").await?;
    assert_eq!(
        (anonymous.status, anonymous.body.as_str()),
        (503, "unavailable")
    );
    let known = send(
        guarded.addr,
        "GET",
        "/healthz",
        &[("Authorization", "Bearer s3cret-token")],
        "",
    )
    .await?;
    assert_eq!(known.status, 503);
    assert!(known.body.contains("connection refused"), "{}", known.body);
    Ok(())
}

#[tokio::test]
async fn with_redis_down_the_metrics_answer_text_and_the_api_json() -> Result<()> {
    let mut redis = chronos_testkit::RedisServer::start()?;
    let c = console_at(&redis.url(), DashConfig::default()).await?;
    seed(&c.broker, "mail", 1).await?;
    // A handler's own error (not the Redis gate's) is JSON too.
    let missing = send(c.addr, "GET", "/api/queues/mail/tasks/nope", &[], "").await?;
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(
        missing
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{missing:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&missing.body)?;
    assert_eq!(v["status"], 404);
    redis.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for path in [
        "/api/overview",
        "/api/queues/mail",
        "/api/history",
        "/api/queues/mail/tasks/x",
    ] {
        let r = send(c.addr, "GET", path, &[], "").await?;
        assert_eq!(r.status, 503, "{path}");
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{path}: {r:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&r.body)
            .with_context(|| format!("{path}: not JSON: {}", r.body))?;
        assert_eq!(v["status"], 503, "{path}");
        let e = v["error"].as_str().context("error text")?;
        assert!(e.contains("connection refused"), "{path}: {e}");
    }
    let m = send(c.addr, "GET", "/metrics", &[], "").await?;
    assert_eq!(m.status, 503);
    assert!(
        m.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "{m:?}"
    );
    assert!(m.body.contains("connection refused"), "{}", m.body);
    assert!(
        !m.body.contains('<'),
        "no HTML in a scrape's error: {}",
        m.body
    );
    // The pages keep their HTML error page.
    let page = send(c.addr, "GET", "/queues/mail", &[], "").await?;
    assert_eq!(page.status, 503);
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{page:?}"
    );
    Ok(())
}

#[tokio::test]
async fn parallel_login_guesses_wait_in_line() -> Result<()> {
    let c = console(DashConfig::default().token(Some("s3cret-token".into()))).await?;
    let csrf = send(c.addr, "GET", "/login", &[("Accept", "text/html")], "")
        .await?
        .csrf()?;
    let guess = form(&[("csrf", &csrf), ("token", "guess"), ("next", "/")]);
    let started = std::time::Instant::now();
    let replies =
        futures::future::join_all((0..4).map(|_| send(c.addr, "POST", "/login", &[], &guess)))
            .await;
    for r in replies {
        assert_eq!(r?.status, 401);
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "four parallel guesses took only {:?}: each must wait a second after the one before",
        started.elapsed()
    );
    // The right token still gets in after the storm (a second after the last failure).
    let right = send(
        c.addr,
        "POST",
        "/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "s3cret-token"), ("next", "/")]),
    )
    .await?;
    assert_eq!(right.status, 303);
    Ok(())
}

#[tokio::test]
async fn the_session_cookie_is_secure_over_https() -> Result<()> {
    for (config, https, secure) in [
        (DashConfig::default(), false, false),
        (DashConfig::default(), true, true),
        (DashConfig::default().secure_cookie(true), false, true),
    ] {
        let c = console(config.token(Some("s3cret-token".into()))).await?;
        let csrf = send(c.addr, "GET", "/login", &[("Accept", "text/html")], "")
            .await?
            .csrf()?;
        let headers: &[(&str, &str)] = if https {
            &[("X-Forwarded-Proto", "https")]
        } else {
            &[]
        };
        let r = send(
            c.addr,
            "POST",
            "/login",
            headers,
            &form(&[("csrf", &csrf), ("token", "s3cret-token"), ("next", "/")]),
        )
        .await?;
        let cookie = r.header("set-cookie").context("cookie")?;
        assert_eq!(
            cookie.contains("; Secure"),
            secure,
            "https {https}: {cookie}"
        );
    }
    Ok(())
}

/// A writer of log lines into a shared buffer.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).to_string()
    }
}

#[tokio::test]
async fn actions_and_refused_logins_leave_one_log_line_each_naming_who() -> Result<()> {
    let logs = Captured::default();
    let w = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    // Global, not scoped to this thread: a scoped subscriber can miss a log line whose callsite
    // another test thread registered first. Other tests log into it too: the lines looked for
    // below name this test's queue.
    tracing::subscriber::set_global_default(subscriber)?;
    let c = console(DashConfig::default().token(Some("s3cret-token".into()))).await?;
    seed(&c.broker, "logged", 3).await?;
    let csrf = send(c.addr, "GET", "/login", &[("Accept", "text/html")], "")
        .await?
        .csrf()?;
    send(
        c.addr,
        "POST",
        "/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "wrong-guess"), ("next", "/")]),
    )
    .await?;
    let bearer = [("Authorization", "Bearer s3cret-token")];
    let page = send(c.addr, "GET", "/queues/logged", &bearer, "").await?;
    send(
        c.addr,
        "POST",
        "/queues/logged/pause",
        &bearer,
        &form(&[("csrf", &page.csrf()?), ("back", "/")]),
    )
    .await?;
    let go = send(
        c.addr,
        "POST",
        "/queues/logged/bulk",
        &bearer,
        &form(&[
            ("csrf", &page.csrf()?),
            ("action", "archive"),
            ("state", "pending"),
            ("confirm", "3"),
        ]),
    )
    .await?;
    let job = go.header("location").context("job")?.to_string();
    job_end(c.addr, &job, &bearer).await?;
    let text = logs.text();
    let line = |what: &str| {
        text.lines()
            .find(|l| l.contains(what) && (what.contains("login") || l.contains("queue=logged")))
            .map(str::to_string)
            .with_context(|| format!("no log line {what:?} in:\n{text}"))
    };
    let refused = line("console login refused")?;
    assert!(refused.contains("who=anonymous@127.0.0.1:"), "{refused}");
    let paused = line("console: queue paused")?;
    assert!(paused.contains("who=bearer@127.0.0.1:"), "{paused}");
    let bulk = line("console: bulk action ended")?;
    assert!(bulk.contains("who=bearer@127.0.0.1:"), "{bulk}");
    assert!(
        bulk.contains("done=3") && bulk.contains("archive"),
        "{bulk}"
    );
    assert!(
        !text.contains("s3cret-token") && !text.contains("wrong-guess"),
        "no secret logged"
    );
    Ok(())
}

#[tokio::test]
async fn an_empty_namespace_names_the_namespaces_that_hold_queues() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let url = chronos_testkit::shared_url()?;
    let ns = chronos_testkit::namespace();
    let other = RedisBroker::builder(url.as_str())
        .namespace(ns.clone())
        .connect()
        .await?;
    seed(&other, "mail", 1).await?;
    let page = send(c.addr, "GET", "/", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("id=\"empty-namespace\""),
        "{}",
        page.body
    );
    assert!(page.body.contains(&ns), "{}", page.body);
    Ok(())
}

#[tokio::test]
async fn stored_limits_change_only_with_the_form_token_and_never_when_read_only() -> Result<()> {
    use chronos_broker::Settings as _;
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "capped", 1).await?;
    let q = QueueName::new("capped")?;
    let page = send(c.addr, "GET", "/queues/capped", &[], "").await?;
    assert!(
        page.body.contains("id=\"limits-form\""),
        "the settings form is shown"
    );
    let csrf = page.csrf()?;
    let origin = format!("http://{}", c.addr);
    let fields = |csrf: &str| {
        form(&[
            ("csrf", csrf),
            ("back", "/queues/capped"),
            ("rate", "10/1s"),
            ("burst", ""),
            ("concurrency", "none"),
            ("per_key_rate", ""),
            ("aging", "2m"),
        ])
    };
    let forged = send(
        c.addr,
        "POST",
        "/queues/capped/settings",
        &[],
        &fields("0000"),
    )
    .await?;
    assert_eq!(forged.status, 403, "a wrong CSRF token");
    assert!(
        c.broker.queue_settings(&q).await?.is_empty(),
        "nothing stored"
    );

    let ok = send(
        c.addr,
        "POST",
        "/queues/capped/settings",
        &[("Origin", &origin)],
        &fields(&csrf),
    )
    .await?;
    assert_eq!(ok.status, 303, "{}", ok.body);
    let stored = c.broker.queue_settings(&q).await?;
    assert_eq!(stored.concurrency, Some(chronos_broker::Setting::Off));
    assert_eq!(stored.aging, Some(Duration::from_secs(120)));
    assert!(stored.rate.is_some() && stored.burst.is_none());

    let bad = send(
        c.addr,
        "POST",
        "/queues/capped/settings",
        &[("Origin", &origin)],
        &form(&[("csrf", &csrf), ("back", "/"), ("burst", "0")]),
    )
    .await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body.contains("burst must be at least 1"),
        "{}",
        bad.body
    );
    assert_eq!(
        c.broker.queue_settings(&q).await?,
        stored,
        "nothing changed"
    );

    // A field the form does not send is kept; one sent blank is removed.
    let partial = send(
        c.addr,
        "POST",
        "/queues/capped/settings",
        &[("Origin", &origin)],
        &form(&[("csrf", &csrf), ("back", "/"), ("rate", "")]),
    )
    .await?;
    assert_eq!(partial.status, 303, "{}", partial.body);
    let after = c.broker.queue_settings(&q).await?;
    assert_eq!(after.rate, None);
    assert_eq!(after.concurrency, stored.concurrency);
    assert_eq!(after.aging, stored.aging);

    let ro = console(DashConfig::default().read_only(true)).await?;
    let r = send(
        ro.addr,
        "POST",
        "/queues/capped/settings",
        &[],
        &form(&[("csrf", "whatever"), ("concurrency", "1")]),
    )
    .await?;
    assert_eq!(r.status, 403);
    Ok(())
}

#[tokio::test]
async fn tenant_settings_change_only_with_the_form_token_and_never_when_read_only() -> Result<()> {
    use chronos_broker::Tenants as _;
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "plain", 1).await?;
    let plain = send(c.addr, "GET", "/queues/plain", &[], "").await?;
    assert!(
        !plain.body.contains("id=\"tenants\""),
        "no tenants section for a queue without tenants"
    );
    let client = Client::new(c.broker.clone());
    for tenant in ["acme", "<b>x</b>"] {
        client
            .enqueue(
                &Mail { to: "t".into() },
                EnqueueOptions::new().queue("shared").tenant(tenant),
            )
            .await?;
    }
    let q = QueueName::new("shared")?;
    let page = send(c.addr, "GET", "/queues/shared", &[], "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"tenants-table\""), "{}", page.body);
    assert!(page.body.contains("id=\"tenant-form\""));
    assert!(
        page.body.contains("&lt;b&gt;x&lt;/b&gt;") && !page.body.contains("<b>x</b>"),
        "a tenant key is text, never markup"
    );
    let csrf = page.csrf()?;
    let origin = format!("http://{}", c.addr);
    let post = |path: &'static str, body: String| {
        let origin = origin.clone();
        async move { send(c.addr, "POST", path, &[("Origin", &origin)], &body).await }
    };

    let forged = post(
        "/queues/shared/tenants/pause",
        form(&[("csrf", "0000"), ("tenant", "acme")]),
    )
    .await?;
    assert_eq!(forged.status, 403, "a wrong CSRF token");
    assert!(c.broker.tenant_settings(&q, Some("acme")).await?.is_empty());

    let paused = post(
        "/queues/shared/tenants/pause",
        form(&[
            ("csrf", &csrf),
            ("back", "/queues/shared"),
            ("tenant", "acme"),
        ]),
    )
    .await?;
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert_eq!(
        c.broker.tenant_settings(&q, Some("acme")).await?.paused,
        Some(true)
    );

    // The settings form: blank = remove, not sent = keep; a blank tenant is the default.
    let ok = post(
        "/queues/shared/tenants",
        form(&[
            ("csrf", &csrf),
            ("back", "/"),
            ("tenant", "acme"),
            ("weight", "4"),
            ("concurrency", "2"),
            ("backlog", ""),
        ]),
    )
    .await?;
    assert_eq!(ok.status, 303, "{}", ok.body);
    let stored = c.broker.tenant_settings(&q, Some("acme")).await?;
    assert_eq!(
        (
            stored.weight,
            stored.concurrency,
            stored.backlog,
            stored.paused
        ),
        (Some(4), Some(2), None, Some(true))
    );
    let default = post(
        "/queues/shared/tenants",
        form(&[
            ("csrf", &csrf),
            ("back", "/"),
            ("tenant", " "),
            ("backlog", "9"),
        ]),
    )
    .await?;
    assert_eq!(default.status, 303, "{}", default.body);
    assert_eq!(c.broker.tenant_settings(&q, None).await?.backlog, Some(9));
    assert_eq!(
        c.broker.tenant_settings(&q, Some("acme")).await?,
        stored,
        "the tenant's own settings are kept"
    );

    let bad = post(
        "/queues/shared/tenants",
        form(&[
            ("csrf", &csrf),
            ("back", "/"),
            ("tenant", "acme"),
            ("weight", "5000"),
        ]),
    )
    .await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body.contains("weight must be 1 to 1000"),
        "{}",
        bad.body
    );
    assert_eq!(c.broker.tenant_settings(&q, Some("acme")).await?, stored);

    let resumed = post(
        "/queues/shared/tenants/resume",
        form(&[("csrf", &csrf), ("back", "/"), ("tenant", "acme")]),
    )
    .await?;
    assert_eq!(resumed.status, 303, "{}", resumed.body);
    assert_eq!(
        c.broker.tenant_settings(&q, Some("acme")).await?.paused,
        None
    );

    // Read-only: the table without forms, and every tenant POST refused.
    let ro = console(DashConfig::default().read_only(true)).await?;
    Client::new(ro.broker.clone())
        .enqueue(
            &Mail { to: "t".into() },
            EnqueueOptions::new().queue("shared").tenant("acme"),
        )
        .await?;
    let page = send(ro.addr, "GET", "/queues/shared", &[], "").await?;
    assert!(page.body.contains("id=\"tenants-table\""), "{}", page.body);
    assert!(!page.body.contains("id=\"tenant-form\""));
    assert!(!page.body.contains("data-tenant-action"));
    for path in [
        "/queues/shared/tenants",
        "/queues/shared/tenants/pause",
        "/queues/shared/tenants/resume",
    ] {
        let r = send(
            ro.addr,
            "POST",
            path,
            &[],
            &form(&[("csrf", "whatever"), ("tenant", "acme"), ("weight", "2")]),
        )
        .await?;
        assert_eq!(r.status, 403, "{path}");
    }
    Ok(())
}

#[tokio::test]
async fn a_running_tasks_page_and_api_show_its_progress() -> Result<()> {
    use chronos_broker::{Maintain, ProgressUpdate};
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "orders", 1).await?;
    let q = QueueName::new("orders")?;
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    let lease = got.leases.first().context("one delivery")?;
    c.broker.start(&q, std::slice::from_ref(&lease.id)).await?;
    let path = format!("/queues/orders/tasks/{}", ids[0]);
    // Active with no report yet: the card says so.
    let page = send(c.addr, "GET", &path, &[], "").await?;
    assert!(page.body.contains("id=\"progress-none\""), "{}", page.body);
    c.broker
        .keep_alive(
            &q,
            "w1",
            std::slice::from_ref(&lease.id.msg_id),
            &[ProgressUpdate {
                msg_id: lease.id.msg_id.clone(),
                task_id: lease.id.task_id.clone(),
                json: br#"{"percent":62.4,"note":"3 of 5 files"}"#.to_vec(),
            }],
        )
        .await?;
    let page = send(c.addr, "GET", &path, &[], "").await?;
    assert!(page.body.contains("value=\"62.4\""), "{}", page.body);
    assert!(page.body.contains("3 of 5 files"));
    assert!(page.body.contains(&format!("data-arg=\"/api{path}\"")));
    let api = send(c.addr, "GET", &format!("/api{path}"), &[], "").await?;
    assert_eq!(api.status, 200, "{}", api.body);
    let v: serde_json::Value = serde_json::from_str(&api.body)?;
    assert_eq!(v["state"], "active");
    assert_eq!(v["progress_percent"], 62.4);
    assert_eq!(v["progress"]["value"]["note"], "3 of 5 files");
    // A computed percent shows rounded to one decimal, in the bar and in its label.
    c.broker
        .keep_alive(
            &q,
            "w1",
            std::slice::from_ref(&lease.id.msg_id),
            &[ProgressUpdate {
                msg_id: lease.id.msg_id.clone(),
                task_id: lease.id.task_id.clone(),
                json: br#"{"percent":30.77777777777778}"#.to_vec(),
            }],
        )
        .await?;
    let page = send(c.addr, "GET", &path, &[], "").await?;
    assert!(page.body.contains("value=\"30.8\""), "{}", page.body);
    assert!(
        page.body
            .contains("<span id=\"progress-percent\">30.8%</span>"),
        "{}",
        page.body
    );
    let missing = send(c.addr, "GET", "/api/queues/orders/tasks/nope", &[], "").await?;
    assert_eq!(missing.status, 404, "{}", missing.body);
    Ok(())
}

#[tokio::test]
async fn each_state_tab_shows_the_time_that_matters_there_and_running_tasks_name_their_server(
) -> Result<()> {
    use chronos_broker::{Maintain, Operate, RunningTask, ServerRecord};
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "orders", 3).await?;
    let q = QueueName::new("orders")?;
    // One running on srv-7 (as its record says), two archived a moment apart.
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "srv-7", &[], 1, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    let lease = got.leases.first().context("one delivery")?;
    c.broker.start(&q, std::slice::from_ref(&lease.id)).await?;
    let started = chronos_broker::now_ms() - 90_000;
    let record = ServerRecord {
        id: "srv-7".into(),
        host: "host-7".into(),
        pid: 7,
        queues: vec![("orders".into(), 1)],
        concurrency: 4,
        started_at_ms: started,
        running: 1,
        last_seen_ms: chronos_broker::now_ms(),
        tasks: vec![RunningTask {
            queue: "orders".into(),
            id: lease.id.task_id.clone(),
            kind: "mail".into(),
            started_at_ms: started,
        }],
        archive_max: None,
    };
    c.broker
        .publish_server(&record, Duration::from_secs(30))
        .await?;
    let rest: Vec<&String> = ids.iter().filter(|id| **id != lease.id.task_id).collect();
    for id in &rest {
        c.broker
            .act(&q, id, chronos_broker::TaskAction::Archive)
            .await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let active = send(c.addr, "GET", "/queues/orders?state=active", &[], "").await?;
    assert!(active.body.contains(">started</th>"), "{}", active.body);
    let row = active
        .body
        .split(&format!("data-id=\"{}\"", lease.id.task_id))
        .nth(1)
        .context("active row")?;
    assert!(row.contains("data-f=\"server\">srv-7<"), "{row}");
    assert!(
        row.contains("1m 30s ago") || row.contains("1m 31s ago"),
        "{row}"
    );
    let archived = send(c.addr, "GET", "/queues/orders?state=archived", &[], "").await?;
    assert!(
        archived.body.contains(">archived</th>"),
        "{}",
        archived.body
    );
    let newest = archived.body.find(rest[1].as_str()).context("newest")?;
    let oldest = archived.body.find(rest[0].as_str()).context("oldest")?;
    assert!(newest < oldest, "dead letters are listed newest first");
    let servers = send(c.addr, "GET", "/servers", &[], "").await?;
    let running = servers
        .body
        .split("id=\"running\"")
        .nth(1)
        .context("running tasks table")?;
    assert!(
        running.contains(&format!(
            "data-server=\"srv-7\" data-id=\"{}\"",
            lease.id.task_id
        )),
        "{running}"
    );
    assert!(
        running.contains("1m 30s") || running.contains("1m 31s"),
        "{running}"
    );
    Ok(())
}

#[tokio::test]
async fn dead_letters_are_grouped_by_error_and_filtered_by_error_text_and_kind_prefix() -> Result<()>
{
    use chronos_broker::Consume;
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "orders", 6).await?;
    let q = QueueName::new("orders")?;
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "w1", &[], 6, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    c.broker
        .start(
            &q,
            &got.leases.iter().map(|l| l.id.clone()).collect::<Vec<_>>(),
        )
        .await?;
    for (i, l) in got.leases.iter().enumerate() {
        let err = match i % 3 {
            0 | 1 => "smtp: connection refused\n  at send (mail.rs:40)",
            _ => "bad address: nobody@",
        };
        assert_eq!(
            c.broker.dead_letter(&l.id, err, true).await?,
            chronos_broker::DeadOutcome::Archived
        );
    }
    let page = send(c.addr, "GET", "/queues/orders/dead", &[], "").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let groups = page.body.split("id=\"groups\"").nth(1).context("groups")?;
    // Largest first, keyed by the first line.
    let refused = groups
        .find("data-error=\"smtp: connection refused\"")
        .context("refused group")?;
    let bad = groups
        .find("data-error=\"bad address: nobody@\"")
        .context("bad address group")?;
    assert!(refused < bad, "{groups}");
    let count_of = |from: usize| -> Result<String> {
        let rest = &groups[from..];
        let at = rest.find("data-f=\"count\">").context("count")? + 15;
        Ok(rest[at..at + rest[at..].find('<').context("end")?].to_string())
    };
    assert_eq!(count_of(refused)?, "4");
    assert_eq!(count_of(bad)?, "2");
    // The group's listing link filters the archived tab by that error.
    assert!(
        groups.contains(
            "href=\"/queues/orders?state=archived&amp;error=smtp%3A+connection+refused\""
        ),
        "{groups}"
    );
    let listed = send(
        c.addr,
        "GET",
        "/queues/orders?state=archived&error=smtp%3A+connection+refused",
        &[],
        "",
    )
    .await?;
    assert_eq!(
        listed.body.matches("class=\"pick\"").count(),
        4,
        "{}",
        listed.body
    );
    // Filters: error text, and a kind prefix (the seeded kind is mail).
    let only = send(c.addr, "GET", "/queues/orders/dead?error=nobody", &[], "").await?;
    assert!(!only.body.contains("data-error=\"smtp"), "{}", only.body);
    assert!(
        only.body.contains("data-error=\"bad address"),
        "{}",
        only.body
    );
    let none = send(c.addr, "GET", "/queues/orders/dead?kind=sms%3A*", &[], "").await?;
    assert!(none.body.contains("id=\"no-dead\""), "{}", none.body);
    let all = send(c.addr, "GET", "/queues/orders/dead?kind=ma*", &[], "").await?;
    assert!(all.body.contains("id=\"groups\""), "{}", all.body);
    Ok(())
}

#[tokio::test]
async fn a_task_is_enqueued_or_duplicated_from_the_console_with_its_options() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let page = send(c.addr, "GET", "/queues/imports/enqueue", &[], "").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"enqueue\""), "{}", page.body);
    let csrf = page.csrf()?;
    let origin = format!("http://{}", c.addr);
    let post = |fields: Vec<(&'static str, String)>| {
        let origin = origin.clone();
        let csrf = csrf.clone();
        async move {
            let mut all: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
            all.extend(fields.iter().map(|(k, v)| (*k, v.as_str())));
            send(
                c.addr,
                "POST",
                "/queues/imports/enqueue",
                &[("Origin", &origin)],
                &form(&all),
            )
            .await
        }
    };
    // Without the form token nothing is enqueued.
    let refused = send(
        c.addr,
        "POST",
        "/queues/imports/enqueue",
        &[("Origin", &origin)],
        &form(&[("kind", "import:csv"), ("payload", "{}")]),
    )
    .await?;
    assert_eq!(refused.status, 403);
    // Bad input: a 400 each, nothing written.
    for fields in [
        vec![("payload", "{}".to_string())],
        vec![("kind", "import:csv".into()), ("payload", "{oops".into())],
        vec![("kind", "import:csv".into()), ("in", "soon".into())],
        vec![
            ("kind", "import:csv".into()),
            ("in", "5m".into()),
            ("at", "2030-01-01T00:00:00".into()),
        ],
        vec![("kind", "import:csv".into()), ("level", "12".into())],
        vec![("kind", "import:csv".into()), ("max_retry", "-1".into())],
        vec![
            ("kind", "import:csv".into()),
            ("task_id", "has space".into()),
        ],
    ] {
        let r = post(fields.clone()).await?;
        assert_eq!(r.status, 400, "{fields:?}: {}", r.body);
    }
    let q = QueueName::new("imports")?;
    assert!(c.broker.queue_stats(&q).await?.pending == 0);
    // A scheduled task with its options; the answer is its page.
    let r = post(vec![
        ("kind", "import:csv".into()),
        ("payload", r#"{"file": "a.csv", "rows": 3}"#.into()),
        ("in", "10m".into()),
        ("level", "2".into()),
        ("max_retry", "4".into()),
        ("timeout", "90s".into()),
        ("task_id", "import-a".into()),
    ])
    .await?;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(
        r.header("location")
            .is_some_and(|l| l.starts_with("/queues/imports/tasks/import-a?msg=")),
        "{:?}",
        r.header("location")
    );
    let rec = c.broker.task(&q, "import-a").await?.context("enqueued")?;
    assert_eq!(rec.state, chronos_broker::TaskState::Scheduled);
    assert_eq!(rec.priority.get(), 2);
    let env = rec.envelope.map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(env.kind, "import:csv");
    assert_eq!(env.max_retry, 4);
    assert_eq!(env.timeout_ms, Some(90_000));
    assert_eq!(
        chronos_broker::payload_json(&env.payload),
        r#"{"file":"a.csv","rows":3}"#
    );
    // Duplicate: the form comes filled in from the task; sent as is, a new task with the same
    // kind, payload bytes, level and options.
    let task_page = send(c.addr, "GET", "/queues/imports/tasks/import-a", &[], "").await?;
    assert!(
        task_page
            .body
            .contains("href=\"/queues/imports/enqueue?from=import-a\""),
        "{}",
        task_page.body
    );
    let copy = send(
        c.addr,
        "GET",
        "/queues/imports/enqueue?from=import-a",
        &[],
        "",
    )
    .await?;
    for part in [
        "value=\"import:csv\"",
        "value=\"4\"",
        "value=\"90s\"",
        "<option value=\"2\" selected>",
        "name=\"from\" value=\"import-a\"",
    ] {
        assert!(copy.body.contains(part), "{part}: {}", copy.body);
    }
    let shown = chronos_broker::payload_json(&env.payload);
    let r = post(vec![
        ("kind", "import:csv".into()),
        ("payload", shown.clone()),
        ("payload_was", shown),
        ("from", "import-a".into()),
        ("level", "2".into()),
        ("max_retry", "4".into()),
    ])
    .await?;
    assert_eq!(r.status, 303, "{}", r.body);
    let pending = c
        .broker
        .list_tasks(&q, chronos_broker::TaskState::Pending, 0, 10)
        .await?;
    assert_eq!(pending.len(), 1, "the copy runs now (no delay given)");
    let copy_env = pending[0]
        .envelope
        .clone()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_ne!(pending[0].id, "import-a");
    assert_eq!(copy_env.payload, env.payload);
    assert_eq!(pending[0].priority.get(), 2);
    // A read-only console shows no form and refuses the POST.
    let ro = console(DashConfig::default().read_only(true)).await?;
    let page = send(ro.addr, "GET", "/queues/imports/enqueue", &[], "").await?;
    assert!(page.body.contains("id=\"read-only\""), "{}", page.body);
    Ok(())
}

#[tokio::test]
async fn the_timing_page_shows_each_kinds_quantiles_and_charts_them() -> Result<()> {
    use chronos_broker::{Maintain, TimingDelta, TimingHist};
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "orders", 1).await?;
    let q = QueueName::new("orders")?;
    let now = chronos_broker::now_ms();
    let minute = now - now.rem_euclid(60_000);
    let mut deltas = Vec::new();
    for i in 0..10i64 {
        let mut run = TimingHist::default();
        let mut wait = TimingHist::default();
        for j in 0..100u64 {
            run.record(if j < 98 { 20 } else { 900 });
            wait.record(3);
        }
        deltas.push(TimingDelta {
            minute_ms: minute - i * 60_000,
            kind: "mail".into(),
            run,
            wait,
        });
    }
    c.broker.record_timings(&q, &deltas).await?;
    let page = send(c.addr, "GET", "/queues/orders/timing", &[], "").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let row = page
        .body
        .split("data-kind=\"mail\"")
        .nth(1)
        .context("mail row")?;
    assert!(row.contains("data-f=\"count\">1,000<"), "{row}");
    // 20 ms is in the bucket up to 22.7 ms, 900 ms in the one up to 1,009 ms: the two slow
    // ones in each 100 make the p99.
    assert!(row.contains("data-f=\"run-p50\">23 ms<"), "{row}");
    assert!(row.contains("data-f=\"run-p99\">1.0 s<"), "{row}");
    assert!(row.contains("data-f=\"wait-p50\">3.1 ms<"), "{row}");
    assert_eq!(
        page.body.matches("<polyline class=\"p99\"").count(),
        2,
        "run and wait charts"
    );
    let day = send(c.addr, "GET", "/queues/orders/timing?span=day", &[], "").await?;
    assert_eq!(day.status, 200);
    assert!(day.body.contains("data-kind=\"mail\""), "{}", day.body);
    let empty = send(c.addr, "GET", "/queues/nope/timing", &[], "").await?;
    assert_eq!(empty.status, 404);
    Ok(())
}

#[tokio::test]
async fn a_chain_steps_page_shows_its_chain_and_a_members_page_its_group() -> Result<()> {
    use chronos_broker::{Chain, Flows, Group, MemberReport};
    let c = console(DashConfig::default()).await?;
    let client = Client::new(c.broker.clone());
    let opts = || EnqueueOptions::new().queue("orders");
    let chain = client
        .enqueue_chain(
            Chain::new()
                .then(&Mail { to: "a@x".into() }, opts())
                .then(
                    &Mail { to: "b@x".into() },
                    EnqueueOptions::new().queue("later"),
                )
                .then(&Mail { to: "c@x".into() }, opts()),
        )
        .await?;
    let first = &chain.steps[0].1;
    let page = send(
        c.addr,
        "GET",
        &format!("/queues/orders/tasks/{}", first.replace(':', "%3A")),
        &[],
        "",
    )
    .await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let card = page
        .body
        .split("id=\"chain-card\"")
        .nth(1)
        .context("chain card")?;
    assert!(card.contains("running step 1 of 3 (pending)"), "{card}");
    assert!(
        card.contains("<td>later</td>"),
        "the second step's queue: {card}"
    );
    assert_eq!(card.matches("not enqueued yet").count(), 2, "{card}");
    // A group of 3 in "orders" whose callback goes to "cb": two members reported.
    let group = client
        .enqueue_group(
            Group::new(
                &Mail { to: "cb@x".into() },
                EnqueueOptions::new().queue("cb"),
            )
            .members((0..3).map(|i| {
                (
                    Mail {
                        to: format!("m{i}@x"),
                    },
                    opts(),
                )
            })),
        )
        .await?;
    let cb = QueueName::new("cb")?;
    for (index, ok) in [(0u64, true), (2, false)] {
        c.broker
            .report_member(&MemberReport {
                queue: cb.clone(),
                group: group.id.clone(),
                index,
                succeeded: ok,
                value: if ok {
                    Vec::new()
                } else {
                    b"smtp down".to_vec()
                },
            })
            .await?;
    }
    let member = format!("{}:1", group.id);
    let page = send(
        c.addr,
        "GET",
        &format!("/queues/orders/tasks/{}", member.replace(':', "%3A")),
        &[],
        "",
    )
    .await?;
    let card = page
        .body
        .split("id=\"group-card\"")
        .nth(1)
        .context("group card")?;
    assert!(card.contains("2 of 3 members done"), "{card}");
    assert!(card.contains("(member 1)"), "{card}");
    assert!(
        card.contains("enqueued when every member is done"),
        "{card}"
    );
    let gpage = send(
        c.addr,
        "GET",
        &format!("/queues/cb/groups/{}", group.id),
        &[],
        "",
    )
    .await?;
    assert_eq!(gpage.status, 200, "{}", gpage.body);
    let members = gpage
        .body
        .split("id=\"members\"")
        .nth(1)
        .context("members")?;
    assert!(members.contains("data-member=\"0\""), "{members}");
    assert!(members.contains("failed: smtp down"), "{members}");
    assert!(
        !members.contains("data-member=\"1\""),
        "member 1 has not finished: {members}"
    );
    // The last member fires the callback, which the page then links.
    c.broker
        .report_member(&MemberReport {
            queue: cb.clone(),
            group: group.id.clone(),
            index: 1,
            succeeded: true,
            value: Vec::new(),
        })
        .await?;
    let gpage = send(
        c.addr,
        "GET",
        &format!("/queues/cb/groups/{}", group.id),
        &[],
        "",
    )
    .await?;
    assert!(gpage.body.contains("3 of 3 members done"), "{}", gpage.body);
    assert!(
        gpage
            .body
            .contains(&format!("href=\"/queues/cb/tasks/{}%3Acb\"", group.id)),
        "{}",
        gpage.body
    );
    // A plain task has no flow card.
    let plain = seed(&c.broker, "orders", 1).await?;
    let page = send(
        c.addr,
        "GET",
        &format!("/queues/orders/tasks/{}", plain[0]),
        &[],
        "",
    )
    .await?;
    assert!(!page.body.contains("chain-card") && !page.body.contains("group-card"));
    Ok(())
}

#[tokio::test]
async fn the_history_api_gives_whole_steps_and_the_step_under_way_apart() -> Result<()> {
    use chronos_broker::fred::prelude::*;
    use chronos_broker::HistoryCounter;
    let c = console(DashConfig::default()).await?;
    seed(&c.broker, "orders", 1).await?;
    let keys = c.broker.keyspace().queue(&QueueName::new("orders")?);
    let now = chronos_broker::now_ms();
    let minute = now.div_euclid(60_000);
    let day = now.div_euclid(86_400_000);
    // 7 processed this minute (under way), 5 two minutes ago, 3 yesterday.
    for (m, n) in [(minute, 7i64), (minute - 2, 5)] {
        let d = (m * 60_000).div_euclid(86_400_000);
        let _: i64 = c
            .broker
            .client()
            .hincrby(
                keys.history_minutes(HistoryCounter::Processed, d),
                m.to_string(),
                n,
            )
            .await?;
    }
    let _: i64 = c
        .broker
        .client()
        .incr_by(keys.history_day(HistoryCounter::Processed, day), 12)
        .await?;
    let _: i64 = c
        .broker
        .client()
        .incr_by(keys.history_day(HistoryCounter::Processed, day - 1), 3)
        .await?;
    let get = |span: &'static str| async move {
        let r = send(
            c.addr,
            "GET",
            &format!("/api/history?queue=orders&span={span}"),
            &[],
            "",
        )
        .await?;
        anyhow::ensure!(r.status == 200, "{span}: {} {}", r.status, r.body);
        Ok::<serde_json::Value, anyhow::Error>(serde_json::from_str(&r.body)?)
    };
    let hour = get("hour").await?;
    assert_eq!(hour["step_ms"], 60_000);
    let starts = hour["start_ms"].as_array().context("starts")?;
    assert_eq!(starts.len(), 60);
    let current = hour["partial"]["start_ms"].as_i64().context("partial")?;
    assert_eq!(
        starts[59],
        current - 60_000,
        "the last whole minute ends the line"
    );
    let at = |ms: i64| starts.iter().position(|s| s.as_i64() == Some(ms));
    let two_ago = at((minute - 2) * 60_000).context("two minutes ago")?;
    assert_eq!(hour["processed"][two_ago], 5);
    if current == minute * 60_000 {
        assert_eq!(hour["partial"]["processed"], 7, "this minute so far, apart");
        assert_eq!(hour["processed"][59], 0);
    } else {
        // The minute turned between the writes and the read: it is a whole one now.
        assert_eq!(hour["processed"][at(minute * 60_000).context("minute")?], 7);
    }
    let dayv = get("day").await?;
    assert_eq!(dayv["step_ms"], 900_000);
    assert_eq!(dayv["start_ms"].as_array().context("starts")?.len(), 96);
    let whole: u64 = dayv["processed"]
        .as_array()
        .context("processed")?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .sum();
    assert_eq!(
        whole + dayv["partial"]["processed"].as_u64().context("partial")?,
        12
    );
    let week = get("week").await?;
    assert_eq!(week["processed"].as_array().context("days")?.len(), 7);
    assert_eq!(week["processed"][6], 3, "yesterday ends the line");
    assert_eq!(week["partial"]["processed"], 12, "today so far");
    let quarter = get("quarter").await?;
    assert_eq!(quarter["processed"].as_array().context("days")?.len(), 90);
    let bad = send(c.addr, "GET", "/api/history?span=year", &[], "").await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    Ok(())
}

#[tokio::test]
async fn a_tasks_page_shows_each_ended_attempt_in_its_history() -> Result<()> {
    let c = console(DashConfig::default()).await?;
    let ids = seed(&c.broker, "orders", 1).await?;
    let q = QueueName::new("orders")?;
    let mut reader = c.broker.open_reader().await?;
    let got = c
        .broker
        .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
        .await?;
    c.broker.close_reader(reader).await;
    let lease = got.leases.first().context("one delivery")?.id.clone();
    c.broker.start(&q, std::slice::from_ref(&lease)).await?;
    let report = AttemptReport {
        ran_ms: Some(33),
        logs: Some("+0ms LOG calling the gateway\n+31ms WARN gateway said 502".into()),
    };
    let retry = Settlement::retried(lease, Duration::from_secs(600), "gateway said 502");
    c.broker.settle(&[retry.with_report(report)]).await?;
    let page = send(
        c.addr,
        "GET",
        &format!("/queues/orders/tasks/{}", ids[0]),
        &[],
        "",
    )
    .await?;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("data-outcome=\"retried\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("after 33 ms"));
    assert!(page.body.contains("gateway said 502"));
    assert!(page.body.contains(">w1<"), "the worker is named");
    assert!(page.body.contains("log (2 lines)"), "{}", page.body);
    assert!(page.body.contains("+0ms LOG calling the gateway"));
    Ok(())
}

#[tokio::test]
async fn the_events_page_turns_the_stream_on_lists_events_and_serves_new_ones() -> Result<()> {
    use chronos_broker::Events;
    let c = console(DashConfig::default()).await?;
    let client = Client::new(c.broker.clone());
    let mail = |to: &str| Mail { to: to.into() };
    client
        .enqueue(&mail("a@example.com"), EnqueueOptions::new().queue("mail"))
        .await?;
    let queue = send(c.addr, "GET", "/queues/mail", &[], "").await?;
    assert!(
        queue.body.contains("/queues/mail/events"),
        "the queue page links its events"
    );
    let off = send(c.addr, "GET", "/queues/mail/events", &[], "").await?;
    assert_eq!(off.status, 200);
    assert!(off.body.contains("keeps no events"), "{}", off.body);
    let csrf = off.csrf()?;
    let origin = format!("http://{}", c.addr);
    let refused = send(
        c.addr,
        "POST",
        "/queues/mail/events/on",
        &[("Origin", &origin)],
        &form(&[("back", "/queues/mail/events")]),
    )
    .await?;
    assert_eq!(refused.status, 403, "no CSRF token");
    let q = QueueName::new("mail")?;
    assert!(!c.broker.events_on(&q).await?);
    let on = send(
        c.addr,
        "POST",
        "/queues/mail/events/on",
        &[("Origin", &origin)],
        &form(&[("csrf", &csrf), ("back", "/queues/mail/events")]),
    )
    .await?;
    assert_eq!(on.status, 303, "{}", on.body);
    assert!(c.broker.events_on(&q).await?);

    let first = client
        .enqueue(&mail("b@example.com"), EnqueueOptions::new().queue("mail"))
        .await?;
    let page = send(c.addr, "GET", "/queues/mail/events", &[], "").await?;
    assert!(
        page.body.contains(&first.id) && page.body.contains("enqueued"),
        "{}",
        page.body
    );
    let after = c.broker.last_event_id(&q).await?;
    let second = client
        .enqueue(&mail("c@example.com"), EnqueueOptions::new().queue("mail"))
        .await?;
    let api = send(
        c.addr,
        "GET",
        &format!("/api/queues/mail/events?after={after}"),
        &[],
        "",
    )
    .await?;
    assert_eq!(api.status, 200);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&api.body)?;
    assert_eq!(rows.len(), 1, "{}", api.body);
    assert_eq!(rows[0]["task_id"], second.id.as_str());
    assert_eq!(
        (rows[0]["type"].as_str(), rows[0]["kind"].as_str()),
        (Some("enqueued"), Some("mail"))
    );
    let bad = send(c.addr, "GET", "/api/queues/mail/events?after=nope", &[], "").await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    Ok(())
}
