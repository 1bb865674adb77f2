use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::server::{start_watched_in, which};
use crate::TestkitError;

/// How long a cluster node may be unreachable before the others mark it failed, in a cluster
/// with replicas. Low, so that a failover test sees a promotion within a few seconds.
const NODE_TIMEOUT_MS: u64 = 1_500;

/// A Redis Cluster on loopback: 3 primaries, and with [`RedisCluster::with_replicas`] one
/// replica each, tied to the lifetime of this process (the servers stop when it exits).
#[derive(Debug, Clone)]
pub struct RedisCluster {
    ports: Vec<u16>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with `redis-cli --cluster create` and
    /// waits until every node reports `cluster_state:ok` (up to 20 s).
    pub fn start() -> Result<Self, TestkitError> {
        Self::start_with(0)
    }

    /// Starts 3 primaries and 1 replica of each (6 servers), with a node timeout of 1.5 s, and
    /// waits until the cluster is ok and every replica is in sync with its primary.
    ///
    /// Replicas promote themselves even when their link to the primary has been down a while
    /// (`cluster-replica-validity-factor 0`): a failover test that cuts replication on purpose
    /// must still see a promotion, and measure what the promoted replica is missing.
    pub fn with_replicas() -> Result<Self, TestkitError> {
        Self::start_with(1)
    }

    fn start_with(replicas: usize) -> Result<Self, TestkitError> {
        which("redis-cli")?;
        let timeout = NODE_TIMEOUT_MS.to_string();
        let mut extra = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ];
        if replicas > 0 {
            extra.extend([
                "--cluster-node-timeout",
                &timeout,
                "--cluster-replica-validity-factor",
                "0",
            ]);
        }
        let mut ports = Vec::new();
        for _ in 0..3 * (1 + replicas) {
            ports.push(start_watched_in("chronos-cluster-", &extra)?);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for p in &ports {
            create.arg(format!("127.0.0.1:{p}"));
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(TestkitError::NotReady {
                port: ports[0],
                reason: "redis-cli --cluster create failed".into(),
                log: String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for &p in &ports {
            loop {
                let info = redis_cli(p, &["cluster", "info"])?;
                // A replica that has not finished its first sync would lose everything on a
                // failover; wait for it so a test measures replication lag, not start-up.
                let synced = if info.contains("cluster_state:ok") {
                    let repl = redis_cli(p, &["info", "replication"])?;
                    repl.contains("role:master") || repl.contains("master_link_status:up")
                } else {
                    false
                };
                if synced {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TestkitError::NotReady {
                        port: p,
                        reason: "cluster_state never became ok (or a replica never synced)".into(),
                        log: info,
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(Self { ports })
    }

    /// A URL fred understands as a cluster: `redis-cluster://127.0.0.1:<port>` of one seed node,
    /// with the other nodes as `node=` parameters so that a client still finds the cluster when
    /// the first node has been killed.
    pub fn url(&self) -> String {
        let mut url = format!("redis-cluster://127.0.0.1:{}", self.ports[0]);
        for (i, p) in self.ports.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("node=127.0.0.1:{p}"));
        }
        url
    }

    /// The loopback ports of every node started (primaries and replicas, in start order).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The port of the primary that serves `key` now (the hash tag rules apply: `{q}:x` and
    /// `q` share a slot), asked of the first live node.
    pub fn primary_for(&self, key: &str) -> Result<u16, TestkitError> {
        let nodes = self.nodes()?;
        let slot = self.ask_any(&["cluster", "keyslot", key])?;
        let slot: u16 = slot.trim().parse().map_err(|_| self.not_ready(&slot))?;
        nodes
            .iter()
            .find(|n| n.primary && !n.failed && n.slots.iter().any(|r| r.contains(&slot)))
            .map(|n| n.port)
            .ok_or_else(|| self.not_ready("no live primary serves the slot"))
    }

    /// The ports of the replicas of the primary on `primary`.
    pub fn replicas_of(&self, primary: u16) -> Result<Vec<u16>, TestkitError> {
        let nodes = self.nodes()?;
        let Some(id) = nodes.iter().find(|n| n.port == primary).map(|n| &n.id) else {
            return Ok(Vec::new());
        };
        Ok(nodes
            .iter()
            .filter(|n| n.master_id.as_deref() == Some(id.as_str()))
            .map(|n| n.port)
            .collect())
    }

    /// Waits until the slot of `key` is served by a primary other than `old` and every live
    /// node reports `cluster_state:ok`; returns the new primary's port.
    pub fn wait_promoted(
        &self,
        key: &str,
        old: u16,
        within: Duration,
    ) -> Result<u16, TestkitError> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(new) = self.primary_for(key) {
                let all_ok = self.ports.iter().filter(|&&p| p != old).all(|&p| {
                    redis_cli(p, &["cluster", "info"])
                        .map(|i| i.contains("cluster_state:ok"))
                        // a node killed by the test on purpose does not answer
                        .unwrap_or(true)
                });
                if new != old && all_ok {
                    return Ok(new);
                }
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("no replica was promoted in time"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Parsed `CLUSTER NODES` of the first node that answers.
    fn nodes(&self) -> Result<Vec<Node>, TestkitError> {
        let text = self.ask_any(&["cluster", "nodes"])?;
        Ok(text.lines().filter_map(Node::parse).collect())
    }

    fn ask_any(&self, args: &[&str]) -> Result<String, TestkitError> {
        let mut last = String::new();
        for &p in &self.ports {
            match redis_cli(p, args) {
                Ok(out) => return Ok(out),
                Err(e) => last = e.to_string(),
            }
        }
        Err(self.not_ready(&last))
    }

    fn not_ready(&self, reason: &str) -> TestkitError {
        TestkitError::NotReady {
            port: self.ports[0],
            reason: reason.to_string(),
            log: String::new(),
        }
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Debug)]
struct Node {
    id: String,
    port: u16,
    primary: bool,
    failed: bool,
    master_id: Option<String>,
    slots: Vec<std::ops::RangeInclusive<u16>>,
}

impl Node {
    /// `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`
    fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let addr = f.get(1)?.split('@').next()?;
        let port = addr.rsplit(':').next()?.parse().ok()?;
        let flags = f.get(2)?;
        let master = f.get(3)?;
        let slots = f
            .iter()
            .skip(8)
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
                None => s.parse().ok().map(|n| n..=n),
            })
            .collect();
        Some(Self {
            id: f.first()?.to_string(),
            port,
            primary: flags.contains("master"),
            failed: flags.contains("fail") && !flags.contains("fail?"),
            master_id: (*master != "-").then(|| master.to_string()),
            slots,
        })
    }
}

/// Runs `redis-cli -p <port> <args>` and returns its output; an error when the server does not
/// answer (redis-cli exits 0 on "Could not connect", so its stderr is looked at).
pub(crate) fn redis_cli(port: u16, args: &[&str]) -> Result<String, TestkitError> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || stderr.contains("Could not connect") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            format!("redis-cli -p {port}: {stderr}{stdout}"),
        )
        .into());
    }
    Ok(stdout)
}

/// Sends `signal` (`KILL`, `STOP`, `CONT`) to `pid`, the redis-server on `port` (see
/// [`server_pid`]). Only servers this process started are on these ports, so the pid is ours to
/// signal.
pub(crate) fn signal_server(port: u16, pid: u32, signal: &str) -> Result<(), TestkitError> {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()?
        .success();
    if ok {
        Ok(())
    } else {
        Err(TestkitError::NotReady {
            port,
            reason: format!("kill -{signal} {pid} failed"),
            log: String::new(),
        })
    }
}

/// The pid of the redis-server on `port`, from `INFO server`.
pub(crate) fn server_pid(port: u16) -> Result<u32, TestkitError> {
    let info = redis_cli(port, &["info", "server"])?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| TestkitError::NotReady {
            port,
            reason: "INFO server gave no process_id".into(),
            log: info.clone(),
        })
}

/// A deliberate replication cut and primary kill, shared by [`RedisCluster`] and
/// [`crate::RedisSentinel`]: the two halves of the one fault an asynchronous replica cannot
/// survive without losing writes.
#[derive(Debug)]
pub struct ReplicationCut {
    primary: u16,
    primary_pid: u32,
    replicas: Vec<(u16, u32)>,
    started: Instant,
}

impl ReplicationCut {
    /// Freezes the replicas (SIGSTOP) and then drops their links on the primary (`CLIENT KILL
    /// TYPE replica`). From the moment this returns, every write the primary acknowledges is on
    /// the primary only: a frozen replica cannot reconnect and catch up from the backlog. Writes
    /// acknowledged before the call are on the replicas (in their socket buffers at worst).
    pub fn start(primary: u16, replicas: &[u16]) -> Result<Self, TestkitError> {
        let primary_pid = server_pid(primary)?;
        let pids = replicas
            .iter()
            .map(|&r| server_pid(r).map(|pid| (r, pid)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut cut = Self {
            primary,
            primary_pid,
            replicas: Vec::new(),
            started: Instant::now(),
        };
        for (r, pid) in pids {
            signal_server(r, pid, "STOP")?;
            cut.replicas.push((r, pid));
        }
        redis_cli(primary, &["client", "kill", "type", "replica"])?;
        Ok(cut)
    }

    /// When the cut began (just before the first replica was frozen): a write acknowledged
    /// earlier is on the replicas.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Kills the primary (SIGKILL: whatever it acknowledged since [`ReplicationCut::start`] is
    /// gone) and thaws the replicas, which then find their primary dead and fail over.
    pub fn kill_primary(mut self) -> Result<(), TestkitError> {
        signal_server(self.primary, self.primary_pid, "KILL")?;
        self.thaw()
    }

    fn thaw(&mut self) -> Result<(), TestkitError> {
        for (port, pid) in self.replicas.drain(..) {
            signal_server(port, pid, "CONT")?;
        }
        Ok(())
    }
}

impl Drop for ReplicationCut {
    fn drop(&mut self) {
        // Never leave a frozen server behind a failed test.
        let _ = self.thaw();
    }
}

/// URL of one cluster shared by the whole process: `CHRONOS_REDIS_CLUSTER_URL` when set,
/// otherwise a [`RedisCluster`] started on first use.
pub fn shared_cluster_url() -> Result<String, TestkitError> {
    if let Some(url) = std::env::var("CHRONOS_REDIS_CLUSTER_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(url);
    }
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            RedisCluster::start()
                .map(|c| c.url())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|reason| TestkitError::NotReady {
            port: 0,
            reason,
            log: String::new(),
        })
}
