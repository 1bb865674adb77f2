//! `chronos ingest`: the HTTP ingest (`chronos_ingest`), so services in any language enqueue
//! tasks with a JSON POST, until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use chronos_broker::{Client, RedisBroker};
use clap::Args;

/// The options of `chronos ingest`.
#[derive(Args, Debug)]
pub(crate) struct IngestArgs {
    /// Address to listen on; any but a loopback address requires a token.
    #[arg(long, env = "CHRONOS_INGEST_ADDR", default_value = "127.0.0.1:8090")]
    addr: std::net::SocketAddr,
    /// Bearer token every enqueue must send (`Authorization: Bearer <token>`).
    #[arg(long, env = "CHRONOS_INGEST_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Largest request body in bytes (a larger one is answered 413).
    #[arg(long, default_value_t = chronos_ingest::DEFAULT_BODY_LIMIT)]
    body_limit: usize,
    /// Most tasks of one batch request.
    #[arg(long, default_value_t = chronos_ingest::DEFAULT_BATCH_LIMIT)]
    batch_limit: usize,
    /// Milliseconds a request waits for Redis before it is answered 503.
    #[arg(long, default_value_t = chronos_ingest::DEFAULT_REDIS_TIMEOUT.as_millis() as u64)]
    redis_timeout_ms: u64,
    /// How log lines (refused requests, failures) are written on stderr; `RUST_LOG` filters
    /// them (default `info`).
    #[arg(long, env = "CHRONOS_LOG_FORMAT", value_enum, default_value_t)]
    pub(crate) log_format: crate::logging::LogFormat,
}

/// Serves the ingest on `a.addr` over `broker`.
pub(crate) async fn run(broker: RedisBroker, a: IngestArgs) -> anyhow::Result<()> {
    let config = chronos_ingest::IngestConfig::default()
        .addr(a.addr)
        .token(a.token)
        .body_limit(a.body_limit)
        .batch_limit(a.batch_limit)
        .redis_timeout(std::time::Duration::from_millis(a.redis_timeout_ms));
    // Before binding: a refused address must not be held open even for a moment.
    config.check()?;
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .with_context(|| format!("cannot listen on {}", a.addr))?;
    eprintln!(
        "chronos ingest: http://{}/queues/{{queue}}/tasks (API: /openapi.json){}",
        listener.local_addr()?,
        if config.token.is_some() {
            ", bearer token required"
        } else {
            ""
        }
    );
    chronos_ingest::serve_on(listener, Client::new(broker), config, stop_signal()).await?;
    Ok(())
}

/// Ctrl-C, or SIGTERM (what a container runtime sends).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
