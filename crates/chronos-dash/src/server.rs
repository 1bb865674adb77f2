use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use chronos_admin::Admin;
use chronos_broker::{Inspect, RedisBroker};
use tokio::net::TcpListener;

use crate::config::DashConfig;
use crate::error::DashError;
use crate::state::AppState;
use crate::{actions, api, metrics, pages, security};

/// The console: its routes over one [`Admin`] connection.
#[derive(Debug, Clone)]
pub struct Dash {
    state: Arc<AppState>,
}

impl Dash {
    /// A console over `admin`. Fails with [`DashError::TokenRequired`] when `config.addr` is
    /// not a loopback address and no token is set.
    pub fn new(admin: Admin<RedisBroker>, mut config: DashConfig) -> Result<Self, DashError> {
        // The fields are public: take them through the same rules as the builder methods.
        config.token = config.token.filter(|t| !t.is_empty());
        config.redis_label = chronos_admin::redact_url(&config.redis_label);
        config.bulk_chunk = config.bulk_chunk.clamp(1, 5_000);
        config.refresh = config.refresh.max(std::time::Duration::from_secs(1));
        config.page_size = config.page_size.clamp(1, 500);
        if !config.addr.ip().is_loopback() && config.token.is_none() {
            return Err(DashError::TokenRequired(config.addr));
        }
        Ok(Self {
            state: Arc::new(AppState::new(admin, config)),
        })
    }

    /// The routes, for serving with your own listener or embedding under another router. The
    /// token rule is checked on [`DashConfig::addr`] only: serve them on a non-loopback
    /// listener only with a token set (the host-name check of a console without a token
    /// guards against DNS rebinding, not against a client that writes its own `Host`).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(pages::overview::page))
            .route("/queues/{queue}", get(pages::queue::page))
            .route("/queues/{queue}/pause", post(actions::pause))
            .route("/queues/{queue}/resume", post(actions::resume))
            .route("/queues/{queue}/unblock", post(actions::unblock))
            .route("/queues/{queue}/locks", get(pages::locks::page))
            .route("/queues/{queue}/dead", get(pages::dead_letters::page))
            .route("/queues/{queue}/timing", get(pages::timing::page))
            .route("/queues/{queue}/groups/{id}", get(pages::flows::group_page))
            .route(
                "/queues/{queue}/enqueue",
                get(pages::enqueue::page).post(pages::enqueue::submit),
            )
            .route("/queues/{queue}/locks/release", post(actions::release_lock))
            .route("/queues/{queue}/events", get(pages::events::page))
            .route("/queues/{queue}/events/{switch}", post(actions::events))
            .route("/queues/{queue}/selection", post(actions::selection))
            .route("/queues/{queue}/bulk", post(actions::bulk))
            .route("/queues/{queue}/settings", post(actions::settings))
            .route("/queues/{queue}/tenants", post(actions::tenant_settings))
            .route("/queues/{queue}/tenants/pause", post(actions::tenant_pause))
            .route(
                "/queues/{queue}/tenants/resume",
                post(actions::tenant_resume),
            )
            .route("/queues/{queue}/tasks/{id}", get(pages::task::page))
            .route("/queues/{queue}/tasks/{id}/{action}", post(actions::one))
            .route("/jobs/{id}", get(pages::job::page))
            .route("/jobs/{id}/cancel", post(pages::job::cancel))
            .route("/api/jobs/{id}", get(pages::job::api))
            .route("/schedules", get(pages::schedules::page))
            .route("/schedules/{id}", get(pages::schedule::page))
            .route("/schedules/{id}/{action}", post(pages::schedule::act))
            .route("/servers", get(pages::servers::page))
            .route("/login", get(pages::login::page).post(pages::login::submit))
            .route("/logout", post(pages::login::logout))
            .route("/api/overview", get(api::overview))
            .route("/api/queues/{queue}", get(api::queue))
            .route("/api/queues/{queue}/tasks/{id}", get(api::task))
            .route("/api/queues/{queue}/events", get(api::events))
            .route("/api/history", get(api::history))
            .route("/metrics", get(metrics::page))
            .route("/healthz", get(healthz))
            .route("/assets/app.js", get(app_js))
            .route("/assets/app.css", get(app_css))
            .fallback(not_found)
            // Inside the guard: a visitor who may not see the console learns nothing of Redis.
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                security::redis_gate,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                security::guard,
            ))
            .layer(axum::middleware::from_fn(security::headers))
            .with_state(self.state.clone())
    }

    /// Binds [`DashConfig::addr`] and serves until `shutdown` completes.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), DashError> {
        let listener = TcpListener::bind(self.state.config.addr).await?;
        self.serve_on(listener, shutdown).await
    }

    /// Serves on a listener bound by the caller (tests bind port 0) until `shutdown` completes.
    /// Fails with [`DashError::TokenRequired`] when the listener is not on a loopback address
    /// and no token is set, whatever [`DashConfig::addr`] says.
    pub async fn serve_on(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), DashError> {
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() && self.state.config.token.is_none() {
            return Err(DashError::TokenRequired(addr));
        }
        if let Some(t) = &self.state.config.token {
            if is_weak_token(t) {
                tracing::warn!(
                    chars = t.chars().count(),
                    "the console's token is shorter than {MIN_TOKEN_CHARS} characters: anyone \
                     who can reach it may guess it; use a long random one (openssl rand -hex 32)"
                );
            }
        }
        tracing::info!(%addr, read_only = self.state.config.read_only, login = self.state.config.token.is_some(), "console listening");
        // The peer address names who acted in the log lines of actions and logins.
        axum::serve(
            listener,
            self.router()
                .into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await?;
        Ok(())
    }
}

/// Below this length a token is warned about at start: short enough to guess or to be a
/// placeholder left in a manifest.
const MIN_TOKEN_CHARS: usize = 16;

fn is_weak_token(token: &str) -> bool {
    token.chars().count() < MIN_TOKEN_CHARS
}

/// How long the probe waits for Redis to answer a connected client.
const HEALTH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// 200 `ok` when Redis answers, 503 `unavailable` otherwise, at once when the client knows it is
/// disconnected and within 2 s otherwise: for load balancers and Kubernetes probes. The reason
/// (connection refused, ...) is added only for a visitor who may see the console (logged in,
/// or any visitor of a console without a token, which answers loopback names only): error text
/// can name hosts and users.
async fn healthz(State(st): State<Arc<AppState>>, headers: HeaderMap) -> impl IntoResponse {
    let problem = match st.health.down(st.admin.broker()) {
        Some(reason) => Some(reason),
        None => match tokio::time::timeout(HEALTH_TIMEOUT, st.admin.broker().paused_queues()).await
        {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {} s", HEALTH_TIMEOUT.as_secs())),
        },
    };
    let trusted = st.config.token.is_none() || security::logged_in(&st, &headers);
    match problem {
        None => (StatusCode::OK, "ok".to_string()).into_response(),
        Some(reason) if trusted => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unavailable: redis: {}", chronos_admin::printable(&reason)),
        )
            .into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_string()).into_response(),
    }
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        crate::error_page::error_page(StatusCode::NOT_FOUND, "No such page."),
    )
}

const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

async fn app_js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        APP_JS,
    )
}

async fn app_css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        APP_CSS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_under_sixteen_characters_are_weak() {
        assert!(is_weak_token("a"));
        assert!(is_weak_token("s3cret-token"));
        assert!(is_weak_token("0123456789abcde"));
        assert!(!is_weak_token("0123456789abcdef"));
        // Characters, not bytes: a short token of wide characters is still short.
        assert!(is_weak_token("ééééééééé"));
    }
}
