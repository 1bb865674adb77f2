//! The web console of role `all`.

use chronos::RedisBroker;

/// Serves the web console (`chronos dash`) on `addr`, or on a free port when that one is taken;
/// sending on the answer stops it.
pub(crate) async fn serve(
    broker: &RedisBroker,
    url: &str,
    addr: &str,
) -> anyhow::Result<tokio::sync::oneshot::Sender<()>> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    let bound = listener.local_addr()?;
    let config = chronos_dash::DashConfig::default()
        .addr(bound)
        .redis_label(url);
    let dash = chronos_dash::Dash::new(chronos_admin::Admin::new(broker.clone()), config)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dash.serve_on(listener, async {
        let _ = stopped.await;
    }));
    println!("console: http://{bound}/ (chronos dash; `--console off` for none)");
    Ok(stop)
}
