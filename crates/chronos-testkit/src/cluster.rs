use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::server::{free_port, start_watched_at, which};
use crate::TestkitError;

/// A 3-primary Redis Cluster (no replicas) on loopback, tied to the lifetime of this process.
#[derive(Debug, Clone)]
pub struct RedisCluster {
    ports: Vec<u16>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with `redis-cli --cluster create` and
    /// waits until every node reports `cluster_state:ok` (up to 20 s).
    pub fn start() -> Result<Self, TestkitError> {
        which("redis-cli")?;
        let mut ports = Vec::new();
        for _ in 0..3 {
            let port = free_port(&ports)?;
            let dir = tempfile::Builder::new()
                .prefix("chronos-cluster-")
                .tempdir()?
                .keep();
            start_watched_at(
                &dir,
                port,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ],
            )?;
            ports.push(port);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for p in &ports {
            create.arg(format!("127.0.0.1:{p}"));
        }
        let out = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
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
                let info = Command::new("redis-cli")
                    .args(["-p", &p.to_string(), "cluster", "info"])
                    .output()?;
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TestkitError::NotReady {
                        port: p,
                        reason: "cluster_state never became ok".into(),
                        log: String::from_utf8_lossy(&info.stdout).into_owned(),
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(Self { ports })
    }

    /// A URL fred understands as a cluster: `redis-cluster://127.0.0.1:<port>` of one seed node.
    pub fn url(&self) -> String {
        format!("redis-cluster://127.0.0.1:{}", self.ports[0])
    }

    /// The loopback ports of the three primaries.
    pub fn ports(&self) -> &[u16] {
        &self.ports
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
