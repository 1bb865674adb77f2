use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::port::on_fresh_port;
use crate::TestkitError;

/// How long a server may take to bind its port and answer PING (or load its data).
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A standalone `redis-server` owned by the caller: started on a free loopback port in its own
/// temp dir with persistence off, killed (and its dir removed) on drop. The port is the
/// server's from start to drop: this process hands it to no other server, even while this one
/// is down for a restart.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Further `redis-server` arguments, kept for restarts.
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server and waits until it answers PING (up to 10 s).
    pub fn start() -> Result<Self, TestkitError> {
        Self::start_with(&[])
    }

    /// Starts a server with further `redis-server` arguments, which win over the defaults and
    /// are kept for [`RedisServer::restart`]: `&["--appendonly", "yes", "--appendfsync",
    /// "always"]` gives a server whose data survives a kill and a restart (its append-only file
    /// lives in the server's temp dir).
    pub fn start_with(extra: &[&str]) -> Result<Self, TestkitError> {
        let dir = tempfile::Builder::new()
            .prefix("chronos-redis-")
            .tempdir()?;
        let mut server = Self {
            port: 0,
            dir,
            child: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
        };
        on_fresh_port(|port| {
            server.port = port;
            server.spawn()
        })?;
        Ok(server)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server with SIGKILL (its data is gone unless it was started with persistence,
    /// see [`RedisServer::start_with`]).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and with the same arguments (empty, unless it
    /// persists to its dir), and waits until it answers PING (or has loaded its data). Fails
    /// with [`TestkitError::PortTaken`] if another process bound the port while it was down.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.kill();
        self.spawn()
    }

    /// The server's log so far, for a failing test to print.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    fn spawn(&mut self) -> Result<(), TestkitError> {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let log = self.dir.path().join("redis.log");
        // A restart appends to the log: only what this run writes says whether it bound.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let child = spawn_redis(self.dir.path(), self.port, &extra, Stdio::null())?;
        self.child = Some(child);
        let ready = wait_ready(self.port, &log, from);
        if ready.is_err() {
            self.kill();
        }
        ready
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// URL of one standalone Redis shared by the whole process: `CHRONOS_REDIS_URL` when set,
/// otherwise a throwaway `redis-server` started on first use. The throwaway server watches a pipe
/// from this process and exits when the process ends, however it ends, so no static destructor
/// is needed and no server is leaked.
pub fn shared_url() -> Result<String, TestkitError> {
    if let Some(url) = std::env::var("CHRONOS_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(url);
    }
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| start_watched(&[]).map_err(|e| e.to_string()))
        .clone()
        .map_err(|reason| TestkitError::NotReady {
            port: 0,
            reason,
            log: String::new(),
        })
}

/// Starts a redis-server tied to the lifetime of this process (see [`shared_url`]) and returns
/// its URL. `extra` is appended to the server's arguments.
pub(crate) fn start_watched(extra: &[&str]) -> Result<String, TestkitError> {
    let port = start_watched_in("chronos-redis-", extra)?;
    Ok(format!("redis://127.0.0.1:{port}"))
}

/// Starts a redis-server tied to the lifetime of this process in a new temp dir named with
/// `prefix`, on a fresh port (another one if that port is taken before the server binds it),
/// and returns the port.
pub(crate) fn start_watched_in(prefix: &str, extra: &[&str]) -> Result<u16, TestkitError> {
    which("redis-server")?;
    on_fresh_port(|port| {
        // A dir per attempt: the log of a server that lost its port must not be read as this
        // one's. A failed attempt's dir goes when the process exits, like the others.
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?.keep();
        start_watched_at(&dir, port, extra)?;
        Ok(port)
    })
}

fn start_watched_at(dir: &Path, port: u16, extra: &[&str]) -> Result<(), TestkitError> {
    // The shell keeps redis in the background and blocks on its stdin; when this process exits
    // the pipe closes, `read` returns and the shell kills redis and removes the dir.
    let script = format!(
        "redis-server {} & pid=$!; read _ignored; kill -9 $pid; wait $pid 2>/dev/null; rm -rf '{}'",
        redis_args(dir, port, extra).join(" "),
        dir.display()
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        // Own process group: a Ctrl-C in the terminal must not stop Redis under a program that
        // is still shutting down gracefully (the pipe stops it when the process exits).
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // Leak the stdin handle on purpose: it must stay open for as long as the process lives.
    std::mem::forget(child);
    wait_ready(port, &dir.join("redis.log"), 0)
}

fn redis_args(dir: &Path, port: u16, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--port".to_string(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        "''".into(),
        "--appendonly".into(),
        "no".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--logfile".into(),
        dir.join("redis.log").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn spawn_redis(dir: &Path, port: u16, extra: &[&str], stdin: Stdio) -> Result<Child, TestkitError> {
    which("redis-server")?;
    let args: Vec<String> = redis_args(dir, port, extra)
        .into_iter()
        .map(|a| if a == "''" { String::new() } else { a })
        .collect();
    Ok(Command::new("redis-server")
        .args(&args)
        // Own process group, so a terminal's Ctrl-C reaches only the program; the owner stops
        // the server on drop.
        .process_group(0)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?)
}

/// Fails with an install hint when `bin` is not on PATH.
pub(crate) fn which(bin: &'static str) -> Result<PathBuf, TestkitError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|p| p.join(bin))
        .find(|p| p.is_file())
        .ok_or(TestkitError::Missing(bin))
}

/// Waits until the server whose log is `log` says it listens (from byte `from` of the log on)
/// and its port answers PING. That the log says so matters as much as the PING: when another
/// process won the port, something else may well answer PING there (another test's proxy, in
/// front of another test's server); the server's own log says it could not bind, and this
/// returns [`TestkitError::PortTaken`] at once.
pub(crate) fn wait_ready(port: u16, log: &Path, from: u64) -> Result<(), TestkitError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        let text = log_since(log, from);
        if bind_failed(&text) {
            return Err(TestkitError::PortTaken { port, log: text });
        }
        if listening(&text) {
            match ping(port) {
                Ok(()) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        } else {
            last = "its log does not say it listens".into();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(TestkitError::NotReady {
        port,
        reason: last,
        log: log_since(log, 0),
    })
}

/// The log of a server from byte `from` on (empty while there is none).
pub(crate) fn log_since(log: &Path, from: u64) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    String::from_utf8_lossy(&text[from..]).into_owned()
}

/// Redis logs this when it cannot bind its port (or its cluster bus or TLS port), then exits.
pub(crate) fn bind_failed(log: &str) -> bool {
    log.contains("Could not create server TCP listening socket")
        || log.contains("Failed listening on port")
}

/// Redis logs this once its listeners are bound: "Ready to accept connections" for a server
/// (after it loaded its data), "Running mode=sentinel" for a sentinel, which says nothing more.
fn listening(log: &str) -> bool {
    log.contains("Ready to accept connections") || log.contains("Running mode=sentinel")
}

fn ping(port: u16) -> std::io::Result<()> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    s.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)?;
    if &buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "unexpected reply {:?}",
            String::from_utf8_lossy(&buf)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flake of issue 18: another test's proxy won the port, redis-server could not bind it
    /// and exited, and the proxy answered the readiness PING for it.
    #[test]
    fn a_server_that_lost_its_port_is_not_taken_for_ready_though_something_answers_ping() {
        let impostor = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let port = impostor.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for mut conn in impostor.incoming().flatten() {
                let mut buf = [0u8; 64];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"+PONG\r\n");
            }
        });
        ping(port).expect("the impostor answers PING");
        let dir = tempfile::tempdir().expect("dir");
        let mut child = spawn_redis(dir.path(), port, &[], Stdio::null()).expect("spawn");
        let ready = wait_ready(port, &dir.path().join("redis.log"), 0);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            matches!(ready, Err(TestkitError::PortTaken { port: p, .. }) if p == port),
            "{ready:?}"
        );
    }

    #[test]
    fn a_restarted_server_keeps_its_port_and_is_ready_again() {
        let mut server = RedisServer::start().expect("start");
        let port = server.port();
        for _ in 0..2 {
            server.restart().expect("restart");
            assert_eq!(server.port(), port);
            ping(port).expect("up again");
        }
        assert_eq!(
            server.log().matches("Ready to accept connections").count(),
            3
        );
    }
}
