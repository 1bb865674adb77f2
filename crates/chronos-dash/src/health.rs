//! Whether Redis is reachable, known without asking it. With Redis down every command waits for
//! the client's reconnection until its 10 s timeout and then fails with "Timeout", which hides
//! the cause; the client's own connection state answers at once, and the error of its last
//! reconnection attempt says why (connection refused, no route, TLS, auth).

use std::sync::{Arc, Mutex, Weak};

use chronos_broker::fred::prelude::{ClientLike, EventInterface};
use chronos_broker::RedisBroker;

/// The reason of the last failed connection attempt, kept by a task that listens to the
/// client's error events.
#[derive(Debug, Default)]
pub(crate) struct RedisHealth {
    last_error: Mutex<Option<String>>,
}

impl RedisHealth {
    /// Starts listening to `broker`'s connection errors (when a Tokio runtime runs; without
    /// one, a down Redis is still detected, only without its reason).
    pub(crate) fn watch(self: &Arc<Self>, broker: &RedisBroker) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut rx = broker.client().error_rx();
        let me: Weak<Self> = Arc::downgrade(self);
        rt.spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match rx.recv().await {
                    Ok((e, _)) => {
                        let Some(health) = me.upgrade() else { return };
                        health.set(reason(&e.to_string()));
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }

    fn set(&self, reason: String) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(reason);
        }
    }

    /// None while the client is connected; otherwise why not, at once (no command sent).
    pub(crate) fn down(&self, broker: &RedisBroker) -> Option<String> {
        if broker.client().is_connected() {
            return None;
        }
        let last = self.last_error.lock().ok().and_then(|l| l.clone());
        Some(last.unwrap_or_else(|| "not connected (reconnecting)".to_string()))
    }
}

/// The OS message of an I/O error (`Connection refused`) rather than its debug form
/// (`IO Error: Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }`).
fn reason(error: &str) -> String {
    if let Some(at) = error.find("message: \"") {
        let rest = &error[at + 10..];
        if let Some(end) = rest.find('"') {
            return rest[..end].to_lowercase();
        }
    }
    error.to_string()
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn io_errors_read_as_their_os_message() {
        assert_eq!(
            reason("IO Error: Os { code: 111, kind: ConnectionRefused, message: \"Connection refused\" }"),
            "connection refused"
        );
        assert_eq!(reason("Auth Error: WRONGPASS"), "Auth Error: WRONGPASS");
    }
}
