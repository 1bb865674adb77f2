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
    /// Mark the session cookie `Secure` (sent over https only) whatever the request says.
    /// Without it the cookie is `Secure` when a proxy says the request came over https
    /// (`X-Forwarded-Proto: https` or `Forwarded: proto=https`).
    pub secure_cookie: bool,
    /// Tasks per step of a background bulk action (1..=5,000; default 500).
    pub bulk_chunk: usize,
    /// A pause after each step of a background bulk action, leaving Redis to the workers
    /// (default none).
    pub bulk_pause: Duration,
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
            secure_cookie: false,
            bulk_chunk: chronos_admin::DEFAULT_BULK_CHUNK,
            bulk_pause: Duration::ZERO,
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
            .field("secure_cookie", &self.secure_cookie)
            .field("bulk_chunk", &self.bulk_chunk)
            .field("bulk_pause", &self.bulk_pause)
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

    /// Sets the Redis shown in the header; its password and secret query parameters are masked
    /// ([`chronos_admin::redact_url`]).
    pub fn redis_label(mut self, url: &str) -> Self {
        self.redis_label = chronos_admin::redact_url(url);
        self
    }

    /// Marks the session cookie `Secure` on every response (for a console behind an https
    /// proxy that does not send `X-Forwarded-Proto`).
    pub fn secure_cookie(mut self, on: bool) -> Self {
        self.secure_cookie = on;
        self
    }

    /// Sets the pace of background bulk actions: tasks per step (clamped to 1..=5,000) and a
    /// pause after each step.
    pub fn bulk_pace(mut self, chunk: usize, pause: Duration) -> Self {
        self.bulk_chunk = chunk.clamp(1, 5_000);
        self.bulk_pause = pause;
        self
    }
}
