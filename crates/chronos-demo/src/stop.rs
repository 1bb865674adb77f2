//! When the demo stops: after --seconds, or on Ctrl-C or SIGTERM.

use std::time::Duration;

/// The demo's stop signal: a flag that stays set, so every loop sees it however busy it was
/// when it was set (a `Notify` wakes only the tasks waiting at that moment: a producer in the
/// middle of its enqueues missed it, and the demo never ended).
#[derive(Clone)]
pub(crate) struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    /// Completes once the stop was asked for (at once if it already was).
    pub(crate) async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Fires after `seconds`, or on Ctrl-C or SIGTERM (what a container runtime sends to stop).
pub(crate) fn tokio_stop(seconds: Option<u64>) -> Stop {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let timer = async {
            match seconds {
                Some(n) => tokio::time::sleep(Duration::from_secs(n)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = timer => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm() => {}
        }
        let _ = tx.send(true);
        // Keep the sender: a closed channel would end the waits with an error, not a stop.
        std::future::pending::<()>().await;
    });
    Stop(rx)
}

#[cfg(unix)]
async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        // Without the handler SIGTERM keeps its default (exit at once); Ctrl-C still works.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn sigterm() {
    std::future::pending().await
}
