//! Throwaway Redis servers for the tests, benches and demo of chronos-rs.
//!
//! Who should depend on this: the project's own tests, `xtask` and examples; an application that
//! wants a disposable Redis in its integration tests may use it too.
//!
//! * [`shared_url`] gives the URL of one standalone Redis per process: `CHRONOS_REDIS_URL` when it
//!   is set, otherwise a `redis-server` from `PATH` started on a free loopback port in a temp dir,
//!   with nothing persisted. It stops when the process exits, even on a panic or a kill.
//! * [`namespace`] gives a fresh key namespace, so tests share one server and run in parallel.
//! * [`RedisServer`] is a server owned by one test (stopped on drop), for tests that restart or
//!   kill Redis.
//! * [`RedisCluster`] / [`shared_cluster_url`] start a 3-primary Redis Cluster on loopback;
//!   [`RedisCluster::with_replicas`] adds a replica to each primary, for failover tests.
//! * [`RedisSentinel`] is one primary, one replica and three sentinels on loopback.
//! * [`ReplicationCut`] cuts replication on purpose and then kills the primary: the fault that
//!   loses acknowledged writes on an asynchronous replica.
//! * [`eventually`] polls a condition until it holds, for tests that wait on other tasks.
//! * [`TlsRedisServer`] is a server that speaks only TLS (a throwaway CA made with `openssl`)
//!   and only to one ACL user, like a managed Redis service.
//! * [`TcpProxy`] sits between a client and Redis and cuts connections on demand.
//! * With the `browser` feature, `Browser` is a headless Chromium (Debian's `chromium` and
//!   `chromium-driver`) for end-to-end tests of the web console, with screenshots checked not
//!   to be blank.
//!
//! ```no_run
//! let url = chronos_testkit::shared_url().expect("redis");
//! let ns = chronos_testkit::namespace();
//! println!("{url} {ns}");
//! ```

#[cfg(feature = "browser")]
mod browser;
mod cluster;
mod port;
mod proxy;
mod sentinel;
mod server;
mod tls;

#[cfg(feature = "browser")]
pub use browser::{Browser, BrowserError};
pub use cluster::{shared_cluster_url, RedisCluster, ReplicationCut};
pub use proxy::TcpProxy;
pub use sentinel::{RedisSentinel, SENTINEL_SERVICE};
pub use server::{shared_url, RedisServer};
pub use tls::TlsRedisServer;

use std::fmt::Write as _;

/// Why a throwaway Redis could not be provided. Permanent for the process: the fixture does not
/// retry on its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// `redis-server` (or `redis-cli` for a cluster, `openssl` for a TLS server) is not on
    /// `PATH`.
    #[error(
        "`{0}` was not found on PATH: install Redis 7 (Debian/Ubuntu: `apt-get install -y \
         redis-server redis-tools`; macOS: `brew install redis`) or set CHRONOS_REDIS_URL to a \
         running server (`docker compose -f deploy/docker-compose.yml up -d` gives one)"
    )]
    Missing(&'static str),
    /// The server process started but did not answer PING in time; `log` is its log file.
    #[error("redis-server on port {port} did not come up: {reason}\n--- server log ---\n{log}")]
    NotReady {
        /// Port the server was started on.
        port: u16,
        /// What went wrong.
        reason: String,
        /// The server's log, for diagnosis.
        log: String,
    },
    /// Another process bound the server's port before the server did (its log says so). A
    /// start retries on fresh ports before it gives this up; a restart, which must keep its
    /// port, gives it at once.
    #[error("port {port} was taken before redis-server could bind it\n--- server log ---\n{log}")]
    PortTaken {
        /// The port the server could not bind.
        port: u16,
        /// The server's log, for diagnosis.
        log: String,
    },
    /// An I/O error while preparing or starting the server.
    #[error("I/O error while starting redis: {0}")]
    Io(#[from] std::io::Error),
}

/// Polls `check` every 20 ms until it returns true; panics naming `what` when `within` passes
/// first. For tests that wait on something another task or process does.
pub async fn eventually<F, Fut>(within: std::time::Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("timed out after {within:?} waiting for: {what}");
}

/// A fresh random key namespace such as `t-3f9c0a1b2c3d4e5f`, so that tests sharing one server
/// never see each other's keys.
pub fn namespace() -> String {
    let mut s = String::from("t-");
    let bytes: [u8; 8] = rand::random();
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
