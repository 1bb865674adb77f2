use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{redis_cli, server_pid, signal_server, ReplicationCut};
use crate::port::on_fresh_port;
use crate::server::{start_watched_in, wait_ready, which};
use crate::TestkitError;

/// The service name the sentinels monitor.
pub const SENTINEL_SERVICE: &str = "mymaster";

/// The temp dir prefix of the data nodes.
const NODE_PREFIX: &str = "chronos-sentinel-node-";

/// How long a primary may be silent before a sentinel calls it down. Low, so a failover test sees
/// a promotion within a few seconds.
const DOWN_AFTER_MS: u64 = 1_000;

/// One primary, one replica (or more, with [`RedisSentinel::with_replicas`]) and three sentinels
/// (quorum 2) on loopback, tied to the lifetime of this process (every server stops when it
/// exits).
///
/// Sentinels run as `redis-server <conf> --sentinel`, so only `redis-server` is needed.
#[derive(Debug)]
pub struct RedisSentinel {
    sentinels: Vec<u16>,
    /// The data nodes, primary first as started; which one is primary now is asked of the
    /// sentinels.
    nodes: Vec<u16>,
}

impl RedisSentinel {
    /// Starts the primary, its replica and three sentinels, and waits (up to 20 s) until the
    /// replica is in sync and every sentinel knows the replica and the two other sentinels, so
    /// a failover can reach its quorum at once.
    pub fn start() -> Result<Self, TestkitError> {
        Self::with_replicas(1)
    }

    /// Like [`RedisSentinel::start`] with `replicas` replicas (at least 1). After a failover the
    /// sentinels point the replicas left to the promoted one, so the new primary has replicas
    /// again: what a durable enqueue waiting for one replica needs.
    pub fn with_replicas(replicas: usize) -> Result<Self, TestkitError> {
        which("redis-cli")?;
        let primary = start_watched_in(NODE_PREFIX, &[])?;
        let replica_of = primary.to_string();
        let mut nodes = vec![primary];
        for _ in 0..replicas.max(1) {
            let replica =
                start_watched_in(NODE_PREFIX, &["--replicaof", "127.0.0.1", &replica_of])?;
            nodes.push(replica);
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(start_sentinel(primary)?);
        }
        let want = (nodes.len() - 1).to_string();
        let fixture = Self { sentinels, nodes };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let synced = fixture.nodes[1..].iter().all(|&r| {
                redis_cli(r, &["info", "replication"])
                    .is_ok_and(|i| i.contains("master_link_status:up"))
            });
            let known = fixture.sentinels.iter().all(|&s| {
                redis_cli(s, &["sentinel", "master", SENTINEL_SERVICE]).is_ok_and(|out| {
                    field(&out, "num-slaves") == Some(want.as_str())
                        && field(&out, "num-other-sentinels") == Some("2")
                })
            });
            if synced && known {
                return Ok(fixture);
            }
            if Instant::now() > deadline {
                return Err(TestkitError::NotReady {
                    port: fixture.sentinels[0],
                    reason: "the sentinels never saw the replica and each other".into(),
                    log: redis_cli(
                        fixture.sentinels[0],
                        &["sentinel", "master", SENTINEL_SERVICE],
                    )
                    .unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A URL fred understands as a sentinel deployment:
    /// `redis-sentinel://127.0.0.1:<s1>?sentinelServiceName=mymaster&node=127.0.0.1:<s2>&...`.
    pub fn url(&self) -> String {
        let mut url = format!(
            "redis-sentinel://127.0.0.1:{}?sentinelServiceName={SENTINEL_SERVICE}",
            self.sentinels[0]
        );
        for p in &self.sentinels[1..] {
            url.push_str(&format!("&node=127.0.0.1:{p}"));
        }
        url
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> &[u16] {
        &self.sentinels
    }

    /// The port of the primary the sentinels name now.
    pub fn primary(&self) -> Result<u16, TestkitError> {
        let mut last = String::new();
        for &s in &self.sentinels {
            match redis_cli(
                s,
                &["sentinel", "get-master-addr-by-name", SENTINEL_SERVICE],
            ) {
                Ok(out) => match out.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
                    Some(port) => return Ok(port),
                    None => last = out,
                },
                Err(e) => last = e.to_string(),
            }
        }
        Err(TestkitError::NotReady {
            port: self.sentinels[0],
            reason: format!("no sentinel named a primary: {last}"),
            log: String::new(),
        })
    }

    /// The data nodes that answer as replicas now (a killed node does not answer).
    pub fn replicas(&self) -> Result<Vec<u16>, TestkitError> {
        let primary = self.primary()?;
        Ok(self
            .nodes
            .iter()
            .copied()
            .filter(|&p| p != primary)
            .filter(|&p| redis_cli(p, &["role"]).is_ok_and(|r| r.starts_with("slave")))
            .collect())
    }

    /// Starts a deliberate replication cut on the current primary (see [`ReplicationCut`]):
    /// writes acknowledged from now on reach the primary only, until
    /// [`ReplicationCut::kill_primary`].
    pub fn cut_replication(&self) -> Result<ReplicationCut, TestkitError> {
        ReplicationCut::start(self.primary()?, &self.replicas()?)
    }

    /// Kills the current primary with SIGKILL, with no cut first (what it loses is whatever it
    /// had not yet sent to its replicas), and returns its port.
    pub fn kill_primary(&self) -> Result<u16, TestkitError> {
        let primary = self.primary()?;
        signal_server(primary, server_pid(primary)?, "KILL")?;
        Ok(primary)
    }

    /// Waits until the sentinels name a primary other than `old` and that node says it is a
    /// primary (`ROLE`); returns its port.
    pub fn wait_promoted(&self, old: u16, within: Duration) -> Result<u16, TestkitError> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(new) = self.primary() {
                if new != old && redis_cli(new, &["role"]).is_ok_and(|r| r.starts_with("master")) {
                    return Ok(new);
                }
            }
            if Instant::now() > deadline {
                return Err(TestkitError::NotReady {
                    port: old,
                    reason: "the sentinels did not promote the replica in time".into(),
                    log: redis_cli(self.sentinels[0], &["sentinel", "master", SENTINEL_SERVICE])
                        .unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A lookup in the field/value lines of a `SENTINEL MASTER` reply.
fn field<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        let value = lines.next();
        if l.trim() == name {
            return value.map(str::trim);
        }
    }
    None
}

/// Starts one sentinel watching `primary`, tied to this process like [`start_watched_in`], on a
/// fresh port (another one if that port is taken before the sentinel binds it): the config file
/// must come first on the command line, and a sentinel rewrites it, so it gets its own
/// directory.
fn start_sentinel(primary: u16) -> Result<u16, TestkitError> {
    which("redis-server")?;
    on_fresh_port(|port| start_sentinel_at(primary, port))
}

fn start_sentinel_at(primary: u16, port: u16) -> Result<u16, TestkitError> {
    let dir = tempfile::Builder::new()
        .prefix("chronos-sentinel-")
        .tempdir()?
        .keep();
    let conf = dir.join("sentinel.conf");
    std::fs::write(&conf, sentinel_conf(&dir, port, primary))?;
    let script = format!(
        "redis-server '{}' --sentinel & pid=$!; read _ignored; kill -9 $pid; wait $pid 2>/dev/null; rm -rf '{}'",
        conf.display(),
        dir.display()
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // The open stdin pipe is what keeps the sentinel alive: leak it for the process's lifetime.
    std::mem::forget(child);
    wait_ready(port, &dir.join("redis.log"), 0)?;
    Ok(port)
}

fn sentinel_conf(dir: &Path, port: u16, primary: u16) -> String {
    format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         daemonize no\n\
         dir {dir}\n\
         logfile {log}\n\
         sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {SENTINEL_SERVICE} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {SENTINEL_SERVICE} 10000\n\
         sentinel parallel-syncs {SENTINEL_SERVICE} 1\n",
        dir = dir.display(),
        log = dir.join("redis.log").display(),
    )
}
