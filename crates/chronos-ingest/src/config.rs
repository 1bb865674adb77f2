//! How the ingest listens and what it accepts.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::IngestError;

/// Default [`IngestConfig::body_limit`]: 1 MiB, the broker's default payload limit.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// Default [`IngestConfig::batch_limit`]: the tasks of one batch request.
pub const DEFAULT_BATCH_LIMIT: usize = 1000;

/// Default [`IngestConfig::redis_timeout`]: half the Redis client's 10 s command timeout, so a
/// producer hears "unavailable" before its own HTTP client gives up.
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// How the ingest listens and what it accepts. Build it from [`IngestConfig::default`] and the
/// setters; the token stays out of `Debug`.
#[derive(Clone)]
#[non_exhaustive]
pub struct IngestConfig {
    /// Where [`crate::serve`] listens (default `127.0.0.1:8090`). Any address but a loopback
    /// one requires [`IngestConfig::token`].
    pub addr: SocketAddr,
    /// The bearer token every request but `/healthz` and `/openapi.json` must send
    /// (`Authorization: Bearer <token>`). None: no token, allowed only on a loopback address,
    /// and then only requests addressed to a loopback host name are answered.
    pub token: Option<String>,
    /// The largest request body, in bytes (default [`DEFAULT_BODY_LIMIT`]); a larger one is
    /// refused with 413 `body_too_large` before it is read.
    pub body_limit: usize,
    /// The most tasks one batch request may carry (default [`DEFAULT_BATCH_LIMIT`]); more is
    /// refused with 413 `too_many_tasks`.
    pub batch_limit: usize,
    /// How long a request waits for Redis before it is answered with 503 `redis_unavailable`
    /// (default [`DEFAULT_REDIS_TIMEOUT`]).
    pub redis_timeout: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8090)),
            token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            batch_limit: DEFAULT_BATCH_LIMIT,
            redis_timeout: DEFAULT_REDIS_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for IngestConfig {
    // The token stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestConfig")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("body_limit", &self.body_limit)
            .field("batch_limit", &self.batch_limit)
            .field("redis_timeout", &self.redis_timeout)
            .finish()
    }
}

impl IngestConfig {
    /// Same as `default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the listening address.
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Sets the bearer token (an empty string means none).
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// Sets the largest request body in bytes (at least 1 KiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes.max(1024);
        self
    }

    /// Sets the most tasks of one batch request (at least 1).
    pub fn batch_limit(mut self, tasks: usize) -> Self {
        self.batch_limit = tasks.max(1);
        self
    }

    /// Sets how long a request waits for Redis (at least 10 ms).
    pub fn redis_timeout(mut self, d: Duration) -> Self {
        self.redis_timeout = d.max(Duration::from_millis(10));
        self
    }

    /// Checks the rule [`crate::serve`] applies before it binds: a token is required unless
    /// [`IngestConfig::addr`] is a loopback address ([`IngestError::TokenRequired`]).
    pub fn check(&self) -> Result<(), IngestError> {
        check_listener(self.addr, self.token.as_deref())
    }

    /// The config with its public fields taken through the setters' rules.
    pub(crate) fn normalized(self) -> Self {
        let Self {
            addr,
            token,
            body_limit,
            batch_limit,
            redis_timeout,
        } = self;
        Self::default()
            .addr(addr)
            .token(token)
            .body_limit(body_limit)
            .batch_limit(batch_limit)
            .redis_timeout(redis_timeout)
    }
}

/// A token is required to listen anywhere but on a loopback address.
pub(crate) fn check_listener(addr: SocketAddr, token: Option<&str>) -> Result<(), IngestError> {
    if !addr.ip().is_loopback() && token.is_none_or(str::is_empty) {
        return Err(IngestError::TokenRequired(addr));
    }
    Ok(())
}
