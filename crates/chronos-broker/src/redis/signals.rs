//! The subscriber of the namespace's signal channel ([`crate::Maintain::signals`]): one
//! connection per broker, shared by every worker of the process, fanning messages out to each
//! [`Signals`] receiver.

use std::sync::Arc;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::broadcast;
use tracing::warn;

use super::{client_builder, RedisBroker};
use crate::redis::store::store;
use crate::{BrokerError, QueueName, Signal, Signals};

/// Signals buffered per receiver before it lags (a lag becomes one [`Signal::Resync`]).
const BUFFER: usize = 256;

pub(super) struct Hub {
    sub: SubscriberClient,
    tx: broadcast::Sender<Signal>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Hub {
    async fn start(broker: &RedisBroker) -> Result<Arc<Self>, BrokerError> {
        let channel = broker.inner.keys.signal();
        let sub = client_builder(broker.inner.client.client_config())
            .build_subscriber_client()
            .map_err(store)?;
        let (tx, _) = broadcast::channel(BUFFER);
        // Listeners before the first connection, so that no message or reconnect is missed.
        let mut messages = sub.message_rx();
        let mut reconnects = sub.reconnect_rx();
        sub.init().await.map_err(store)?;
        sub.subscribe(channel.as_str()).await.map_err(store)?;
        // The client answers SUBSCRIBE once written, not once run: a PING behind it on the same
        // connection returns only when Redis has subscribed, so a push made after `start` is
        // heard.
        let _: Value = sub.ping(None).await.map_err(store)?;
        // Connections made so far (the first one included) are covered by that subscribe.
        while reconnects.try_recv().is_ok() {}
        let read = {
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    match messages.recv().await {
                        Ok(m) => {
                            if let Some(s) = m.value.as_str().and_then(|t| parse(&t)) {
                                let _ = tx.send(s);
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let _ = tx.send(Signal::Resync);
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                }
            })
        };
        // After a reconnect: subscribe again first, then tell the receivers to re-read
        // everything, so that a push lost in the gap is covered by their full pass (a pass run
        // before the subscription is back could miss a push made in between).
        let resubscribe = {
            let tx = tx.clone();
            let sub = sub.clone();
            tokio::spawn(async move {
                loop {
                    match reconnects.recv().await {
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                    let mut wait = Duration::from_millis(100);
                    while let Err(e) = sub.subscribe(channel.as_str()).await {
                        warn!(error = %e, "could not subscribe to the signal channel again; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(2));
                    }
                    let _ = tx.send(Signal::Resync);
                }
            })
        };
        Ok(Arc::new(Self {
            sub,
            tx,
            tasks: vec![read, resubscribe],
        }))
    }

    /// Quits the subscriber (with the broker's own connection, [`RedisBroker::close`]).
    pub(super) async fn close(&self) {
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.sub.quit().await;
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// Reads one message: `p`, `s <queue>` or `d <ms> <queue>`. Anything else is ignored (a newer writer's
/// message this build does not know).
fn parse(text: &str) -> Option<Signal> {
    let mut parts = text.splitn(3, ' ');
    match parts.next()? {
        "p" => Some(Signal::Paused),
        "s" => Some(Signal::Settings {
            queue: QueueName::new(parts.next()?).ok()?,
        }),
        "d" => {
            // Lua may print a whole number of ms as a float ("1500.0"), or a negative one.
            let ms: f64 = parts.next()?.parse().ok()?;
            let queue = QueueName::new(parts.next()?).ok()?;
            let ms = if ms.is_finite() && ms > 0.0 {
                ms as u64
            } else {
                0
            };
            Some(Signal::Due {
                queue,
                after: Duration::from_millis(ms),
            })
        }
        _ => None,
    }
}

impl RedisBroker {
    /// A new receiver of the namespace's signals (the first call subscribes). It hears only what
    /// is pushed after this call: read the state once after subscribing.
    pub(super) async fn subscribe_signals(&self) -> Result<Signals, BrokerError> {
        let hub = self
            .inner
            .signals
            .get_or_try_init(|| Hub::start(self))
            .await?;
        let rx = hub.tx.subscribe();
        Ok(Signals::new(rx))
    }

    /// Tells subscribed workers that the settings of `queue` changed.
    pub(super) async fn signal_settings(&self, queue: &QueueName) -> Result<(), BrokerError> {
        let _: i64 = self
            .inner
            .client
            .publish(self.inner.keys.signal(), format!("s {queue}"))
            .await
            .map_err(store)?;
        Ok(())
    }

    /// Tells subscribed workers that the paused set changed.
    pub(super) async fn signal_paused(&self) -> Result<(), BrokerError> {
        let _: i64 = self
            .inner
            .client
            .publish(self.inner.keys.signal(), "p")
            .await
            .map_err(store)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_scripts_publish() {
        assert_eq!(parse("p"), Some(Signal::Paused));
        assert_eq!(
            parse("s emails"),
            Some(Signal::Settings {
                queue: QueueName::new("emails").expect("queue")
            })
        );
        assert_eq!(
            parse("d 1500 emails"),
            Some(Signal::Due {
                queue: QueueName::new("emails").unwrap(),
                after: Duration::from_millis(1500)
            })
        );
        assert_eq!(
            parse("d -3 a"),
            Some(Signal::Due {
                queue: QueueName::new("a").unwrap(),
                after: Duration::ZERO
            })
        );
        assert_eq!(parse("d x a"), None);
        assert_eq!(parse("z"), None);
        assert_eq!(parse("d 5 a b"), None);
    }
}
