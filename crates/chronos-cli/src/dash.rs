//! `chronos dash`: the web console, until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use chronos_admin::Admin;
use chronos_broker::RedisBroker;
use clap::Args;

/// The options of `chronos dash`.
#[derive(Args, Debug)]
pub(crate) struct DashArgs {
    /// Address to listen on; any but a loopback address requires a token.
    #[arg(long, env = "CHRONOS_DASH_ADDR", default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Login token (people log in once and get a cookie; scrapers send `Authorization: Bearer`).
    #[arg(long, env = "CHRONOS_DASH_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Hide every action and refuse its POST.
    #[arg(long, env = "CHRONOS_DASH_READ_ONLY")]
    read_only: bool,
    /// Seconds between an open page's polls (at least 1).
    #[arg(long, default_value_t = 1)]
    refresh: u64,
    /// Mark the session cookie Secure even when no proxy says the request came over https
    /// (it is Secure anyway when a proxy sends `X-Forwarded-Proto: https`).
    #[arg(long, env = "CHRONOS_DASH_SECURE_COOKIE")]
    secure_cookie: bool,
    /// How log lines (every action and login, with who made it) are written on stderr;
    /// `RUST_LOG` filters them (default `info`).
    #[arg(long, env = "CHRONOS_LOG_FORMAT", value_enum, default_value_t)]
    pub(crate) log_format: crate::logging::LogFormat,
}

/// Serves the console on `a.addr`, labelled with the Redis `url`.
pub(crate) async fn run(admin: Admin<RedisBroker>, url: &str, a: DashArgs) -> anyhow::Result<()> {
    let config = chronos_dash::DashConfig::default()
        .addr(a.addr)
        .token(a.token)
        .read_only(a.read_only)
        .secure_cookie(a.secure_cookie)
        .refresh(std::time::Duration::from_secs(a.refresh))
        .redis_label(url);
    let dash = chronos_dash::Dash::new(admin, config)?;
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .with_context(|| format!("cannot listen on {}", a.addr))?;
    eprintln!(
        "chronos dash: http://{}/{}",
        listener.local_addr()?,
        if a.read_only { " (read-only)" } else { "" }
    );
    dash.serve_on(listener, stop_signal()).await?;
    Ok(())
}

/// Ctrl-C, or SIGTERM (what a container runtime sends).
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
