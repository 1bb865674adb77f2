//! The browser harness against a real headless Chromium and a tiny page served from this test.
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them).

use std::path::Path;
use std::time::{Duration, Instant};

use chronos_testkit::{Browser, BrowserError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PAGE: &str = r#"<!doctype html>
<html><head><title>testkit page</title>
<style>
  body { font-family: sans-serif; margin: 40px; background: #f4f6fb; }
  h1 { color: #1d3b8b; }
  td { border: 1px solid #999; padding: 6px 12px; }
  button { background: #2c7be5; color: #fff; padding: 8px 16px; border: 0; }
</style></head>
<body>
  <h1>Queues</h1>
  <table id="queues"><tr><td>critical</td><td>3 ready</td></tr></table>
  <p id="status">idle</p>
  <p id="later" hidden>never shown</p>
  <button id="go" data-action="archive">Archive</button>
  <button id="ask">Ask</button>
  <form id="login" action="/welcome" method="get">
    <input name="token" value="old"> <button type="submit">Log in</button>
  </form>
  <script>
    // The delay makes the test's wait do real waiting, as for a fetch on the console.
    document.getElementById('go').addEventListener('click', () => setTimeout(() => {
      document.getElementById('status').textContent = 'archived 3 tasks';
    }, 300));
    document.getElementById('ask').addEventListener('click', () => {
      document.getElementById('status').textContent = confirm('Archive all?') ? 'confirmed' : 'kept';
    });
  </script>
</body></html>"#;

const BLANK: &str = "<!doctype html><html><head><title>blank</title></head>\
                     <body style=\"background:#fff\"></body></html>";

/// Serves `PAGE` at `/`, a blank white page at `/blank`, and at `/welcome` a page that echoes
/// the query string. Returns the base URL.
async fn serve() -> String {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request);
                let target = head.split(' ').nth(1).unwrap_or("/").to_string();
                let (status, body) = if target == "/" {
                    ("200 OK", PAGE.to_string())
                } else if target == "/blank" {
                    ("200 OK", BLANK.to_string())
                } else if let Some(query) = target.strip_prefix("/welcome?") {
                    let body = format!(
                        "<!doctype html><title>welcome</title><h1>Welcome</h1>\
                         <p id=\"echo\">{query}</p>"
                    );
                    ("200 OK", body)
                } else {
                    ("404 Not Found", "<h1>not found</h1>".to_string())
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

async fn start() -> Browser {
    let began = Instant::now();
    // Display, not Debug: a missing package's error carries the install command.
    let browser = Browser::start()
        .await
        .unwrap_or_else(|e| panic!("start the browser: {e}"));
    eprintln!("browser started in {:?}", began.elapsed());
    browser
}

#[tokio::test]
async fn drives_a_page_and_saves_a_screenshot_that_is_not_blank() {
    let base = serve().await;
    let browser = start().await;
    browser.goto(&format!("{base}/")).await.expect("goto");
    let secs = Duration::from_secs(10);
    browser
        .wait_for_text("table#queues", "critical", secs)
        .await
        .expect("queue table");
    assert_eq!(browser.text("h1").await.expect("h1"), "Queues");
    assert_eq!(browser.title().await.expect("title"), "testkit page");

    browser
        .click("button[data-action=archive]")
        .await
        .expect("click");
    browser
        .wait_for_text("#status", "archived 3 tasks", secs)
        .await
        .expect("text set by the click handler");

    browser.click("#ask").await.expect("click ask");
    assert_eq!(
        browser.accept_alert().await.expect("confirm"),
        "Archive all?"
    );
    browser
        .wait_for_text("#status", "confirmed", secs)
        .await
        .expect("confirm accepted");

    let png = browser
        .screenshot("testkit-browser-page")
        .await
        .expect("screenshot");
    assert!(png.is_file(), "{}", png.display());
    assert!(png.ends_with("testkit-browser-page.png"));

    browser
        .fill("input[name=token]", "secret")
        .await
        .expect("fill");
    browser.submit("form#login").await.expect("submit");
    browser
        .wait_for_text("#echo", "token=secret", secs)
        .await
        .expect("the form's value reached the server");
    let url = browser.current_url().await.expect("url");
    assert_eq!(url, format!("{base}/welcome?token=secret"));
    browser.close().await.expect("close");
}

#[tokio::test]
async fn a_blank_page_is_reported_blank() {
    let base = serve().await;
    let browser = start().await;
    browser.goto(&format!("{base}/blank")).await.expect("goto");
    match browser.screenshot("testkit-browser-blank").await {
        Err(BrowserError::Blank { path, reason }) => {
            assert!(path.is_file(), "the blank picture is kept for a look");
            assert!(reason.contains("1 distinct colour"), "{reason}");
        }
        other => panic!("a white page must be reported blank, got {other:?}"),
    }
    // One heading on the same white is enough to count as a page.
    browser
        .goto(&format!("{base}/nothing"))
        .await
        .expect("goto");
    browser
        .screenshot("testkit-browser-heading")
        .await
        .expect("one line of text is not blank");
}

#[tokio::test]
async fn a_wait_that_runs_out_says_what_it_awaited_and_where() {
    let base = serve().await;
    let mut browser = start().await;
    browser.goto(&format!("{base}/")).await.expect("goto");
    let err = browser
        .wait_for_text("#status", "never", Duration::from_millis(300))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, BrowserError::Timeout { .. }), "{text}");
    for part in ["`#status`", "\"never\"", &base, "testkit page", "idle"] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }

    let err = browser
        .wait_for_text("#later", "never shown", Duration::from_millis(300))
        .await
        .expect_err("hidden text does not count");
    assert!(err.to_string().contains("1 hidden"), "{err}");

    browser.set_timeout(Duration::from_millis(300));
    let err = browser.click("#missing").await.unwrap_err();
    assert!(err.to_string().contains("`#missing`"), "{err}");
    let err = browser.accept_alert().await.unwrap_err();
    assert!(err.to_string().contains("dialog"), "{err}");
}

#[tokio::test]
async fn drop_leaves_no_process_and_no_profile_behind() {
    let browser = start().await;
    let group = browser.driver_pid();
    let dir = browser.profile_dir().to_path_buf();
    assert!(dir.is_dir());
    assert!(
        !processes_of(group, &dir).is_empty(),
        "chromedriver and chromium should be running"
    );
    drop(browser);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_of(group, &dir);
        if left.is_empty() && !dir.exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: processes {left:?}, profile dir exists: {}",
            dir.exists()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Live (non-zombie) processes in process group `group` or whose command line mentions `dir`.
fn processes_of(group: u32, dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, pgrp.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if fields.get(2) == Some(&group.to_string().as_str()) || cmdline.contains(&dir) {
            found.push(format!(
                "{name}: {}",
                cmdline.chars().take(120).collect::<String>()
            ));
        }
    }
    found
}
