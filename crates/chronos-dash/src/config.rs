use std::net::SocketAddr;
use std::time::Duration;

/// How the console listens and what it lets a visitor do.
#[derive(Clone)]
pub struct DashConfig {
    /// Where to listen (default 127.0.0.1:8080). Any address but a loopback one requires
    /// [`DashConfig::token`].
    pub addr: SocketAddr,
    /// The token a visitor logs in with (and a scraper sends as a bearer token). None: no login,
    /// allowed only on a loopback address.
    pub token: Option<String>,
    /// Hide every action and refuse its POST.
    pub read_only: bool,
    /// How often an open page polls for fresh counts (at least one second).
    pub refresh: Duration,
    /// What the header shows as the Redis it looks at; user names and passwords are removed
    /// before it is shown.
    pub redis_label: String,
    /// Rows per page of a task listing (1..=500).
    pub page_size: usize,
}

impl Default for DashConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            read_only: false,
            refresh: Duration::from_secs(1),
            redis_label: String::new(),
            page_size: 50,
        }
    }
}

impl std::fmt::Debug for DashConfig {
    // The token stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashConfig")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("read_only", &self.read_only)
            .field("refresh", &self.refresh)
            .field("redis_label", &self.redis_label)
            .field("page_size", &self.page_size)
            .finish()
    }
}

impl DashConfig {
    /// Sets the listening address.
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Sets the login token (an empty string means none).
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// Hides and refuses every action.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets the polling period of open pages (clamped to at least one second).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_secs(1));
        self
    }

    /// Sets the Redis shown in the header; credentials in it are removed.
    pub fn redis_label(mut self, url: &str) -> Self {
        self.redis_label = redact_url(url);
        self
    }
}

/// `url` without user name and password (`redis://user:secret@host:6379/0` becomes
/// `redis://host:6379/0`), and without a query string (which may hold credentials too).
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    // A password may hold '/', '?' or '#', so credentials end at the last '@' of the whole
    // rest, not of a parsed authority; what follows is hosts and path (several hosts, comma
    // separated, for cluster and sentinel URLs), then a query that may hold secrets too.
    let hosts = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let hosts = hosts.split(['?', '#']).next().unwrap_or("");
    if scheme.is_empty() {
        hosts.to_string()
    } else {
        format!("{scheme}://{hosts}")
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_never_shown() {
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(
            redact_url("rediss://user:p@ss@redis.example:6380/2"),
            "rediss://redis.example:6380/2"
        );
        assert_eq!(redact_url("redis://:secret@h:1?password=x"), "redis://h:1");
        assert_eq!(redact_url("user:pw@h"), "h");
        assert_eq!(
            redact_url("redis://user:pa/ss@host:1/0"),
            "redis://host:1/0"
        );
        assert_eq!(redact_url("redis://:p#s?s@h:2"), "redis://h:2");
    }
}
