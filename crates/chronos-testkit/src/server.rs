use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::TestkitError;

/// A standalone `redis-server` owned by the caller: started on a free loopback port in its own
/// temp dir with persistence off, killed (and its dir removed) on drop.
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
        let port = free_port(&[])?;
        let mut server = Self {
            port,
            dir,
            child: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
        };
        server.spawn()?;
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
    /// persists to its dir), and waits until it answers PING (or has loaded its data).
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
        let child = spawn_redis(self.dir.path(), self.port, &extra, Stdio::null())?;
        self.child = Some(child);
        wait_ready(self.port, self.dir.path())
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
    let dir = tempfile::Builder::new()
        .prefix("chronos-redis-")
        .tempdir()?
        .keep();
    let port = free_port(&[])?;
    start_watched_at(&dir, port, extra)?;
    Ok(format!("redis://127.0.0.1:{port}"))
}

pub(crate) fn start_watched_at(dir: &Path, port: u16, extra: &[&str]) -> Result<(), TestkitError> {
    which("redis-server")?;
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
    wait_ready(port, dir)
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

/// A loopback port that is free now, and whose cluster-bus port (+10000) is free too when
/// `with_bus` ports are asked for. There is a small race with other processes; the readiness
/// check below turns a lost race into a clear error rather than a hang.
pub(crate) fn free_port(avoid: &[u16]) -> Result<u16, TestkitError> {
    for _ in 0..200 {
        let port: u16 = rand::random::<u16>() % 20_000 + 20_000;
        if avoid.contains(&port) {
            continue;
        }
        let ok = TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok();
        if ok {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free loopback port found").into())
}

pub(crate) fn wait_ready(port: u16, dir: &Path) -> Result<(), TestkitError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        match ping(port) {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(TestkitError::NotReady {
        port,
        reason: last,
        log: std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default(),
    })
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
