use chronos_admin::Admin;
use chronos_broker::RedisBroker;
use sha2::{Digest, Sha256};

use crate::config::DashConfig;
use crate::rates::Rates;

/// What every request handler shares.
pub(crate) struct AppState {
    pub(crate) admin: Admin<RedisBroker>,
    pub(crate) config: DashConfig,
    /// Random per process: the session cookie and the CSRF token are derived from it, so a
    /// restart logs everybody out and no value is guessable from outside.
    secret: [u8; 32],
    pub(crate) rates: Rates,
    pub(crate) metrics_cache: tokio::sync::Mutex<Option<(std::time::Instant, String)>>,
    pub(crate) overview_cache:
        tokio::sync::Mutex<Option<(std::time::Instant, crate::live::OverviewData)>>,
    /// Bulk actions started here, running or ended.
    pub(crate) jobs: crate::jobs::Jobs,
    /// Whether Redis is reachable, and why not.
    pub(crate) health: std::sync::Arc<crate::health::RedisHealth>,
    /// Login attempts, one at a time, spaced after a failure.
    pub(crate) login_gate: LoginGate,
}

/// Spaces login attempts across all connections: parallel guesses queue behind one another
/// instead of each getting its own delay.
#[derive(Debug, Default)]
pub(crate) struct LoginGate {
    /// Held while an attempt is checked; holds when the last attempt failed.
    pub(crate) last_failure: tokio::sync::Mutex<Option<std::time::Instant>>,
    /// Attempts waiting for their turn (or being checked).
    pub(crate) waiting: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for AppState {
    // The secret stays out of logs: the session cookie and form tokens derive from it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub(crate) fn new(admin: Admin<RedisBroker>, config: DashConfig) -> Self {
        let health = std::sync::Arc::new(crate::health::RedisHealth::default());
        health.watch(admin.broker());
        Self {
            admin,
            config,
            secret: rand::random(),
            rates: Rates::default(),
            metrics_cache: tokio::sync::Mutex::new(None),
            overview_cache: tokio::sync::Mutex::new(None),
            jobs: crate::jobs::Jobs::default(),
            health,
            login_gate: LoginGate::default(),
        }
    }

    fn derive(&self, purpose: &str, extra: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.secret);
        h.update(purpose.as_bytes());
        h.update([0]);
        h.update(extra.as_bytes());
        hex(&h.finalize())
    }

    /// The value of the session cookie a visitor gets for logging in with the token.
    pub(crate) fn session_value(&self) -> Option<String> {
        self.config
            .token
            .as_deref()
            .map(|t| self.derive("session", t))
    }

    /// The CSRF token every action form carries. Tied to the session (with a token set), so the
    /// login page, which anyone may open, never shows it.
    pub(crate) fn csrf(&self) -> String {
        self.derive("csrf", &self.session_value().unwrap_or_default())
    }

    /// The CSRF token of the login form.
    pub(crate) fn login_csrf(&self) -> String {
        self.derive("login", "")
    }

    pub(crate) fn login_csrf_matches(&self, offered: &str) -> bool {
        same(self.login_csrf().as_bytes(), offered.as_bytes())
    }

    /// The signature that lets a page show `msg` as a notice: only messages this console wrote
    /// (after an action) are shown, never text a link made up.
    pub(crate) fn sign(&self, msg: &str) -> String {
        self.derive("notice", msg)[..16].to_string()
    }

    /// `msg` when `sig` is its signature.
    pub(crate) fn notice<'a>(
        &self,
        msg: &'a Option<String>,
        sig: &Option<String>,
    ) -> Option<&'a str> {
        let (m, s) = (msg.as_deref()?, sig.as_deref()?);
        same(self.sign(m).as_bytes(), s.as_bytes()).then_some(m)
    }

    /// Compares SHA-256 digests of the token and the offer, in constant time: both are 32
    /// bytes whatever was offered, so neither the time taken nor an early length check tells
    /// anything about the token's length or content.
    pub(crate) fn token_matches(&self, offered: &str) -> bool {
        self.config.token.as_deref().is_some_and(|t| {
            let (want, got) = (
                Sha256::digest(t.as_bytes()),
                Sha256::digest(offered.as_bytes()),
            );
            same(&want, &got)
        })
    }

    pub(crate) fn session_matches(&self, offered: &str) -> bool {
        self.session_value()
            .is_some_and(|v| same(v.as_bytes(), offered.as_bytes()))
    }

    pub(crate) fn csrf_matches(&self, offered: &str) -> bool {
        same(self.csrf().as_bytes(), offered.as_bytes())
    }
}

/// Compares without stopping at the first difference, so response times tell nothing about
/// how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
