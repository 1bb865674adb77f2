//! A headless Chromium driven over WebDriver, for end-to-end tests of the web console.
//!
//! Only the Debian packages `chromium` and `chromium-driver` are used; nothing downloads a
//! browser. Each [`Browser`] runs its own `chromedriver` (on a port the driver picks itself, so
//! parallel tests never race for one) and its own Chromium with a fresh profile; dropping it
//! kills both and removes the profile.

mod blank;
mod wire;

use std::fs::File;
use std::io::Read as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use wire::{Method, ELEMENT_KEY};

/// How long a command may take on the wire. Generous, because a navigation only answers once
/// the page has loaded (itself bounded by the session's 30 s page-load timeout).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long chromedriver may take to listen, and Chromium to come up for a session.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two looks of a polling wait.
const POLL: Duration = Duration::from_millis(50);

/// Chromium's flags. This machine's network is closed: without the `disable-*` flags Chromium
/// keeps retrying its background fetches (updates, sync, QUIC probes) against refused
/// connections, which slows every page and floods the logs.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    // Tests run as root, where Chromium's sandbox cannot start.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    // Small /dev/shm in containers makes the renderer crash on large pages.
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
];

/// The watchdog that stops chromedriver and its browser when the [`Browser`] is dropped or the
/// test process dies in any way (SIGKILL included): it blocks on a pipe from this process, and
/// the pipe closes in both cases. It kills the whole process group, because chromedriver's
/// Chromium processes share it and would otherwise outlive their driver. `$1` is the group,
/// `$2` the temp dir to remove.
const WATCHDOG: &str = r#"read _ignored; kill -9 -"$1" 2>/dev/null; rm -rf "$2""#;

/// Why a browser could not be started or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowserError {
    /// `chromium` or `chromedriver` is not installed.
    #[error(
        "`{name}` was not found (looked at {looked}): install the Debian packages `chromium` and \
         `chromium-driver` (`apt-get install -y chromium chromium-driver`), or set {env} to the \
         binary. The browser tests never download a browser."
    )]
    Missing {
        /// The program that is missing.
        name: &'static str,
        /// The places looked at.
        looked: String,
        /// The environment variable that overrides the location.
        env: &'static str,
    },
    /// chromedriver exited or did not say which port it listens on in time.
    #[error("chromedriver did not start: {reason}\n--- chromedriver output ---\n{log}")]
    DriverNotReady {
        /// What went wrong.
        reason: String,
        /// chromedriver's output so far.
        log: String,
    },
    /// The driver answered a command with a WebDriver error (no such element, unexpected alert
    /// open, session not created...).
    #[error("`{command}` failed: {error}: {message}")]
    WebDriver {
        /// The command, with its selector or URL.
        command: String,
        /// The W3C error code, such as `no such element`.
        error: String,
        /// The driver's explanation.
        message: String,
    },
    /// A wait ran out.
    #[error(
        "timed out after {waited:?} waiting for {what}; the page is {url} (title {title:?}); \
         last seen: {last}"
    )]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        waited: Duration,
        /// The page's URL when the wait gave up.
        url: String,
        /// The page's title when the wait gave up.
        title: String,
        /// What the last look found instead.
        last: String,
    },
    /// A screenshot was saved but shows (next to) nothing; the file is kept for a look.
    #[error("screenshot {path} looks blank: {reason}")]
    Blank {
        /// Where the PNG was saved.
        path: PathBuf,
        /// Its colour count, for the record.
        reason: String,
    },
    /// The driver's reply made no sense, or came too late.
    #[error("`{command}`: {reason}")]
    Protocol {
        /// The command.
        command: String,
        /// What was wrong.
        reason: String,
    },
    /// An I/O error while starting the processes or saving a screenshot.
    #[error("I/O error in the browser harness: {0}")]
    Io(#[from] std::io::Error),
}

/// A headless Chromium session, driven by its own chromedriver.
///
/// Every method that looks up an element waits for it up to the default timeout
/// ([`Browser::set_timeout`], 10 s at first), so a test need not sleep for a page to settle.
/// Drop kills chromedriver and every browser process and removes the profile; [`Browser::close`]
/// ends the session politely first.
///
/// ```no_run
/// # async fn demo() -> Result<(), chronos_testkit::BrowserError> {
/// use std::time::Duration;
/// let browser = chronos_testkit::Browser::start().await?;
/// browser.goto("http://127.0.0.1:8080/").await?;
/// browser.wait_for_text("table#queues", "critical", Duration::from_secs(10)).await?;
/// browser.click("button[data-action=archive]").await?;
/// let png = browser.screenshot("dash-overview").await?;
/// println!("saved {}", png.display());
/// browser.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Browser {
    port: u16,
    session: String,
    timeout: Duration,
    driver: Option<Child>,
    watchdog: Option<Child>,
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session with
    /// a fresh profile. Needs a tokio runtime with time and I/O enabled.
    ///
    /// Chromium is `$CHRONOS_CHROMIUM`, else Debian's `/usr/lib/chromium/chromium` (the real
    /// binary behind the `/usr/bin/chromium` wrapper, which would add flags and extensions of
    /// its own), else `chromium` on `PATH`; chromedriver is `$CHRONOS_CHROMEDRIVER`, else
    /// `chromedriver` on `PATH`.
    pub async fn start() -> Result<Self, BrowserError> {
        let chromium = locate(
            "chromium",
            "CHRONOS_CHROMIUM",
            &["/usr/lib/chromium/chromium", "/usr/bin/chromium"],
            &["chromium", "chromium-browser"],
        )?;
        let chromedriver = locate(
            "chromedriver",
            "CHRONOS_CHROMEDRIVER",
            &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"],
            &["chromedriver"],
        )?;
        let dir = tempfile::Builder::new()
            .prefix("chronos-browser-")
            .tempdir()?;
        let log = File::create(dir.path().join("chromedriver.log"))?;
        let driver = Command::new(&chromedriver)
            // Port 0: the driver binds a free port itself and prints it, so two tests starting
            // at once cannot pick the same one.
            .arg("--port=0")
            // A group of its own, which its browser joins: the watchdog kills the group.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut browser = Self {
            port: 0,
            session: String::new(),
            timeout: Duration::from_secs(10),
            driver: Some(driver),
            watchdog: None,
            dir,
        };
        // From here on an early return drops `browser`, which stops what was started.
        let group = browser.driver_pid().to_string();
        let watchdog = Command::new("sh")
            .args(["-c", WATCHDOG, "chronos-browser-watchdog", &group])
            .arg(browser.dir.path())
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        browser.watchdog = Some(watchdog);
        browser.port = browser.wait_for_port().await?;
        browser.session = browser.new_session(&chromium).await?;
        Ok(browser)
    }

    /// Sets how long element lookups ([`Browser::click`], [`Browser::text`], ...) and
    /// [`Browser::accept_alert`] wait before giving up (10 s at first).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Process id of chromedriver. It leads a process group that holds the browser's
    /// processes too.
    pub fn driver_pid(&self) -> u32 {
        self.driver.as_ref().map(Child::id).unwrap_or_default()
    }

    /// The temp dir that holds the browser profile and chromedriver's log; removed on drop.
    pub fn profile_dir(&self) -> &Path {
        self.dir.path()
    }

    /// chromedriver's output so far, for a failing test to print.
    pub fn driver_log(&self) -> String {
        let mut out = String::new();
        if let Ok(mut f) = File::open(self.dir.path().join("chromedriver.log")) {
            let _ = f.read_to_string(&mut out);
        }
        out
    }

    /// Opens `url` and waits until the page has loaded.
    pub async fn goto(&self, url: &str) -> Result<(), BrowserError> {
        self.command(
            Method::Post,
            "url",
            Some(json!({ "url": url })),
            &format!("goto {url}"),
        )
        .await?;
        Ok(())
    }

    /// The URL of the current page.
    pub async fn current_url(&self) -> Result<String, BrowserError> {
        let v = self
            .command(Method::Get, "url", None, "current_url")
            .await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// The title of the current page.
    pub async fn title(&self) -> Result<String, BrowserError> {
        let v = self.command(Method::Get, "title", None, "title").await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// Waits until an element matches the CSS `selector`.
    pub async fn wait_for(&self, selector: &str, timeout: Duration) -> Result<(), BrowserError> {
        self.find(selector, timeout).await.map(|_| ())
    }

    /// Waits until some visible element matching the CSS `selector` has rendered text that
    /// contains `text`. The error names the selector, the text, what the elements held at the last
    /// look, and the page's URL and title.
    pub async fn wait_for_text(
        &self,
        selector: &str,
        text: &str,
        timeout: Duration,
    ) -> Result<(), BrowserError> {
        // Hidden elements (a template, a closed dialog) come back as null: text nobody can see
        // must not satisfy the wait.
        let script = "return Array.from(document.querySelectorAll(arguments[0]), \
                      e => e.getClientRects().length === 0 ? null : \
                      (e.innerText === undefined ? e.textContent : e.innerText));";
        let what = format!("an element matching `{selector}` with text containing {text:?}");
        let start = Instant::now();
        let mut last;
        loop {
            last = match self.execute(script, &[json!(selector)]).await {
                Ok(Value::Array(found)) => {
                    let texts: Vec<&str> = found.iter().filter_map(Value::as_str).collect();
                    if texts.iter().any(|t| t.contains(text)) {
                        return Ok(());
                    }
                    let hidden = found.len() - texts.len();
                    if found.is_empty() {
                        "no element matched".to_string()
                    } else {
                        format!(
                            "{} visible match(es) with text {:?}, {hidden} hidden",
                            texts.len(),
                            clip(&texts.join(" | "))
                        )
                    }
                }
                Ok(other) => format!("unexpected script result {other}"),
                // A navigation in progress makes scripts fail for a moment: look again.
                Err(e) => e.to_string(),
            };
            if start.elapsed() >= timeout {
                return Err(self.timed_out(what, timeout, last).await);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The rendered text of the first element matching `selector`.
    pub async fn text(&self, selector: &str) -> Result<String, BrowserError> {
        let v = self
            .on_element(selector, "text", |id| {
                (Method::Get, format!("element/{id}/text"), None)
            })
            .await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// Clicks the first element matching `selector` (scrolled into view, as a user would).
    pub async fn click(&self, selector: &str) -> Result<(), BrowserError> {
        self.on_element(selector, "click", |id| {
            (Method::Post, format!("element/{id}/click"), Some(json!({})))
        })
        .await?;
        Ok(())
    }

    /// Clears the first input matching `selector` and types `value` into it.
    pub async fn fill(&self, selector: &str, value: &str) -> Result<(), BrowserError> {
        self.on_element(selector, "clear", |id| {
            (Method::Post, format!("element/{id}/clear"), Some(json!({})))
        })
        .await?;
        self.on_element(selector, "fill", |id| {
            (
                Method::Post,
                format!("element/{id}/value"),
                Some(json!({ "text": value })),
            )
        })
        .await?;
        Ok(())
    }

    /// Submits the form matching `selector`, or the form of the field or button matching it,
    /// the way pressing its submit button does (validation and `submit` handlers run).
    pub async fn submit(&self, selector: &str) -> Result<(), BrowserError> {
        let script = "const e = arguments[0]; \
                      const f = e.tagName === 'FORM' ? e : (e.form || e.closest('form')); \
                      if (!f) { throw new Error('no form at this selector'); } \
                      f.requestSubmit();";
        self.on_element(selector, "submit", |id| {
            (
                Method::Post,
                "execute/sync".to_string(),
                Some(json!({ "script": script, "args": [{ ELEMENT_KEY: id }] })),
            )
        })
        .await?;
        Ok(())
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page and returns what
    /// it returns.
    pub async fn execute(&self, script: &str, args: &[Value]) -> Result<Value, BrowserError> {
        self.command(
            Method::Post,
            "execute/sync",
            Some(json!({ "script": script, "args": args })),
            "execute",
        )
        .await
    }

    /// Waits for an `alert`, `confirm` or `prompt` dialog, accepts it ("OK") and returns its
    /// message.
    pub async fn accept_alert(&self) -> Result<String, BrowserError> {
        self.answer_alert("accept").await
    }

    /// Waits for a dialog, dismisses it ("Cancel") and returns its message.
    pub async fn dismiss_alert(&self) -> Result<String, BrowserError> {
        self.answer_alert("dismiss").await
    }

    /// Saves a PNG of the window as `<name>.png` in `$CHRONOS_SCREENSHOT_DIR`, else in
    /// `screenshots/` of the cargo target dir, and returns its path. Fails with
    /// [`BrowserError::Blank`] when the picture is (close to) one colour everywhere: fewer than
    /// 4 distinct colours, or fewer than 1 pixel in 2000 off the most common colour. Characters
    /// other than letters, digits, `-`, `_` and `.` in `name` become `_`.
    pub async fn screenshot(&self, name: &str) -> Result<PathBuf, BrowserError> {
        let v = self
            .command(Method::Get, "screenshot", None, "screenshot")
            .await?;
        let encoded = v.as_str().unwrap_or_default();
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| BrowserError::Protocol {
                command: "screenshot".into(),
                reason: format!("not base64: {e}"),
            })?;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)?;
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file}.png"));
        std::fs::write(&path, &png)?;
        let stats = blank::stats(&png).map_err(|reason| BrowserError::Protocol {
            command: "screenshot".into(),
            reason,
        })?;
        match stats.judge() {
            Ok(()) => Ok(path),
            Err(reason) => Err(BrowserError::Blank { path, reason }),
        }
    }

    /// Ends the session (Chromium quits cleanly), then stops chromedriver and removes the
    /// profile as drop does.
    pub async fn close(mut self) -> Result<(), BrowserError> {
        let result = if self.session.is_empty() {
            Ok(())
        } else {
            wire::call(
                self.port,
                Method::Delete,
                &format!("/session/{}", self.session),
                None,
                Duration::from_secs(10),
                "close",
            )
            .await
            .map(|_| ())
        };
        self.stop();
        result
    }

    /// Reads the port chromedriver reports once it listens.
    async fn wait_for_port(&mut self) -> Result<u16, BrowserError> {
        let start = Instant::now();
        let marker = "started successfully on port ";
        loop {
            let log = self.driver_log();
            if let Some(at) = log.find(marker) {
                let digits: String = log[at + marker.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(port) = digits.parse::<u16>() {
                    return Ok(port);
                }
            }
            if let Some(Ok(Some(status))) = self.driver.as_mut().map(Child::try_wait) {
                return Err(BrowserError::DriverNotReady {
                    reason: format!("chromedriver exited: {status}"),
                    log,
                });
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(BrowserError::DriverNotReady {
                    reason: format!("no port reported within {START_TIMEOUT:?}"),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn new_session(&self, chromium: &Path) -> Result<String, BrowserError> {
        let profile = self.dir.path().join("profile");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                // Dialogs stay open until the test answers them: the default would dismiss a
                // `confirm` behind the test's back at the next command.
                "unhandledPromptBehavior": "ignore",
                "timeouts": { "implicit": 0, "pageLoad": 30_000, "script": 30_000 },
                "goog:chromeOptions": {
                    "binary": chromium.display().to_string(),
                    "args": args,
                },
            }}
        });
        let v = wire::call(
            self.port,
            Method::Post,
            "/session",
            Some(&capabilities),
            START_TIMEOUT,
            "new session",
        )
        .await?;
        v.get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| BrowserError::Protocol {
                command: "new session".into(),
                reason: format!("no sessionId in {v}"),
            })
    }

    /// One command on this session; `rest` is the path after `/session/{id}/`.
    async fn command(
        &self,
        method: Method,
        rest: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Value, BrowserError> {
        let path = format!("/session/{}/{rest}", self.session);
        wire::call(
            self.port,
            method,
            &path,
            body.as_ref(),
            COMMAND_TIMEOUT,
            what,
        )
        .await
    }

    /// Waits for the first element matching `selector` and returns its reference.
    async fn find(&self, selector: &str, timeout: Duration) -> Result<String, BrowserError> {
        let start = Instant::now();
        let what = format!("find `{selector}`");
        loop {
            let found = self
                .command(
                    Method::Post,
                    "element",
                    Some(json!({ "using": "css selector", "value": selector })),
                    &what,
                )
                .await;
            let last = match found {
                Ok(v) => {
                    return v
                        .get(ELEMENT_KEY)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| BrowserError::Protocol {
                            command: what,
                            reason: format!("no element reference in {v}"),
                        })
                }
                Err(BrowserError::WebDriver { error, .. }) if error == "no such element" => {
                    "no element matched".to_string()
                }
                Err(e) => return Err(e),
            };
            if start.elapsed() >= timeout {
                let what = format!("an element matching `{selector}`");
                return Err(self.timed_out(what, timeout, last).await);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Finds `selector` and runs one element command on it, finding it again when the page
    /// replaced the element in between (htmx swaps do that).
    async fn on_element(
        &self,
        selector: &str,
        verb: &str,
        request: impl Fn(&str) -> (Method, String, Option<Value>),
    ) -> Result<Value, BrowserError> {
        let what = format!("{verb} `{selector}`");
        let mut attempts = 0;
        loop {
            let id = self.find(selector, self.timeout).await?;
            let (method, rest, body) = request(&id);
            match self.command(method, &rest, body, &what).await {
                Err(BrowserError::WebDriver { error, .. })
                    if error == "stale element reference" && attempts < 3 =>
                {
                    attempts += 1;
                }
                other => return other,
            }
        }
    }

    async fn answer_alert(&self, verb: &str) -> Result<String, BrowserError> {
        let start = Instant::now();
        let what = format!("{verb}_alert");
        let message = loop {
            match self.command(Method::Get, "alert/text", None, &what).await {
                Ok(v) => break v.as_str().unwrap_or_default().to_string(),
                Err(BrowserError::WebDriver { error, .. }) if error == "no such alert" => {}
                Err(e) => return Err(e),
            }
            if start.elapsed() >= self.timeout {
                let last = "no dialog open".to_string();
                return Err(self
                    .timed_out("a dialog (alert/confirm/prompt)".into(), self.timeout, last)
                    .await);
            }
            tokio::time::sleep(POLL).await;
        };
        self.command(
            Method::Post,
            &format!("alert/{verb}"),
            Some(json!({})),
            &what,
        )
        .await?;
        Ok(message)
    }

    async fn timed_out(&self, what: String, waited: Duration, last: String) -> BrowserError {
        let url = self
            .current_url()
            .await
            .unwrap_or_else(|e| format!("<unknown: {e}>"));
        let title = self
            .title()
            .await
            .unwrap_or_else(|e| format!("<unknown: {e}>"));
        BrowserError::Timeout {
            what,
            waited,
            url,
            title,
            last,
        }
    }

    /// Closes the watchdog's pipe, which makes it kill the process group and remove the temp
    /// dir, then reaps chromedriver.
    fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            drop(watchdog.stdin.take());
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(watchdog.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        if let Some(mut driver) = self.driver.take() {
            // Already dead when the watchdog did its job; the kill covers a watchdog that
            // could not run.
            let _ = driver.kill();
            let _ = driver.wait();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `$env` if set, else the first of `paths` that exists, else `names` on `PATH`.
fn locate(
    name: &'static str,
    env: &'static str,
    paths: &[&str],
    names: &[&str],
) -> Result<PathBuf, BrowserError> {
    let missing = |looked: String| BrowserError::Missing { name, looked, env };
    if let Some(path) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(missing(format!("${env}={}", path.display())))
        };
    }
    if let Some(path) = paths.iter().map(PathBuf::from).find(|p| p.is_file()) {
        return Ok(path);
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&search) {
        if let Some(path) = names.iter().map(|n| dir.join(n)).find(|p| p.is_file()) {
            return Ok(path);
        }
    }
    Err(missing(format!(
        "{}, and {} on PATH",
        paths.join(", "),
        names.join(", ")
    )))
}

/// `$CHRONOS_SCREENSHOT_DIR`, else `screenshots/` in the cargo target dir: `$CARGO_TARGET_DIR`,
/// else the nearest folder above the running test binary that carries cargo's `CACHEDIR.TAG`,
/// else `target/` under the current dir.
fn screenshot_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CHRONOS_SCREENSHOT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("screenshots");
    }
    // A test's working dir is its crate's dir, not the workspace's, so `target/` relative to
    // it would scatter screenshots over the crates.
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|d| d.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
    });
    from_exe
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("screenshots")
}

fn clip(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_names_the_debian_packages() {
        let err = locate(
            "chromium",
            "CHRONOS_TESTKIT_UNSET_VARIABLE",
            &["/nonexistent/chromium"],
            &["chronos-no-such-program"],
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, BrowserError::Missing { .. }), "{text}");
        assert!(
            text.contains("apt-get install -y chromium chromium-driver"),
            "{text}"
        );
        assert!(text.contains("/nonexistent/chromium"), "{text}");
    }

    #[test]
    fn a_browser_can_move_between_tasks() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: T) {}
        send(Browser::start());
        send_sync(&None::<Browser>);
    }

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text() {
        assert_eq!(clip("abc"), "abc");
        let long = "é".repeat(400);
        assert_eq!(clip(&long).chars().count(), 303);
    }
}
