//! Serving the routes on a listener, with the token rule checked on its address.

use std::future::Future;

use chronos_core::{Client, Enqueue, Inspect};
use tokio::net::TcpListener;

use crate::config::{check_listener, IngestConfig};
use crate::error::IngestError;
use crate::router::router;

/// Binds [`IngestConfig::addr`] and serves until `shutdown` completes. Fails with
/// [`IngestError::TokenRequired`], before binding, when the address is not a loopback one and
/// no token is set.
pub async fn serve<B>(
    client: Client<B>,
    config: IngestConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), IngestError>
where
    B: Enqueue + Inspect + 'static,
{
    config.check()?;
    let listener = TcpListener::bind(config.addr).await?;
    serve_on(listener, client, config, shutdown).await
}

/// Serves on a listener bound by the caller (tests bind port 0) until `shutdown` completes.
/// Fails with [`IngestError::TokenRequired`] when the listener is not on a loopback address and
/// no token is set, whatever [`IngestConfig::addr`] says.
pub async fn serve_on<B>(
    listener: TcpListener,
    client: Client<B>,
    config: IngestConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), IngestError>
where
    B: Enqueue + Inspect + 'static,
{
    let addr = listener.local_addr()?;
    check_listener(addr, config.token.as_deref())?;
    tracing::info!(
        %addr,
        token = config.token.is_some(),
        body_limit = config.body_limit,
        batch_limit = config.batch_limit,
        "ingest listening"
    );
    axum::serve(listener, router(client, config))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
