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
        tokio::sync::Mutex<Option<(std::time::Instant, crate::api::OverviewData)>>,
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
        Self {
            admin,
            config,
            secret: rand::random(),
            rates: Rates::default(),
            metrics_cache: tokio::sync::Mutex::new(None),
            overview_cache: tokio::sync::Mutex::new(None),
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

    pub(crate) fn token_matches(&self, offered: &str) -> bool {
        self.config
            .token
            .as_deref()
            .is_some_and(|t| same(t.as_bytes(), offered.as_bytes()))
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
