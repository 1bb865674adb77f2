use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
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
        config.redis_label = crate::config::redact_url(&config.redis_label);
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
            .route("/queues/{queue}/selection", post(actions::selection))
            .route("/queues/{queue}/bulk", post(actions::bulk))
            .route("/queues/{queue}/tasks/{id}", get(pages::task::page))
            .route("/queues/{queue}/tasks/{id}/{action}", post(actions::one))
            .route("/schedules", get(pages::schedules::page))
            .route("/servers", get(pages::servers::page))
            .route("/login", get(pages::login::page).post(pages::login::submit))
            .route("/logout", post(pages::login::logout))
            .route("/api/overview", get(api::overview))
            .route("/api/queues/{queue}", get(api::queue))
            .route("/api/history", get(api::history))
            .route("/metrics", get(metrics::page))
            .route("/healthz", get(healthz))
            .route("/assets/app.js", get(app_js))
            .route("/assets/app.css", get(app_css))
            .fallback(not_found)
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
        tracing::info!(%addr, read_only = self.state.config.read_only, login = self.state.config.token.is_some(), "console listening");
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await?;
        Ok(())
    }
}

/// 200 when Redis answers, 503 otherwise: for load balancers and Kubernetes probes.
async fn healthz(State(st): State<Arc<AppState>>) -> impl IntoResponse {
    match st.admin.broker().paused_queues().await {
        Ok(_) => (StatusCode::OK, "ok").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("redis: {e}")).into_response(),
    }
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        pages::error_page(StatusCode::NOT_FOUND, "No such page."),
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
