//! Results: reading a task's outcome, and waiting for it on the task hash's pub/sub channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::protocol::{CANCEL_REASON, ERROR, RESULT, STATE};
use super::record::Record;
use super::{client_builder, reply, RedisBroker};
use crate::redis::store::store;
use crate::{BrokerError, QueueName, Results, TaskOutcome, TaskProgress, TaskState};

/// How long a waiter sleeps between reads when no message comes: the bound on a wake-up lost
/// while the subscriber reconnected.
const RECHECK: Duration = Duration::from_secs(1);

/// One subscriber connection per broker, shared by every wait of the process: each waited-for
/// task's channel is subscribed while somebody waits for it.
pub(super) struct Waiters {
    sub: SubscriberClient,
    manager: tokio::task::JoinHandle<()>,
    channels: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

impl Waiters {
    async fn start(broker: &RedisBroker) -> Result<Arc<Self>, BrokerError> {
        let sub = client_builder(broker.inner.client.client_config())
            .build_subscriber_client()
            .map_err(store)?;
        sub.init().await.map_err(store)?;
        // Re-subscribes after a reconnect; a message published in the gap is lost, which the
        // waiters' periodic re-read covers.
        let manager = sub.manage_subscriptions();
        let mut messages = sub.message_rx();
        let waiters = Arc::new(Self {
            sub,
            manager,
            channels: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&waiters);
        tokio::spawn(async move {
            loop {
                let channel = match messages.recv().await {
                    Ok(m) => Some(m.channel.to_string()),
                    // Missed messages: wake every waiter, each reads its task again.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(w) = weak.upgrade() else { break };
                let map = w.channels.lock().unwrap_or_else(|p| p.into_inner());
                match channel {
                    Some(c) => {
                        if let Some((n, _)) = map.get(&c) {
                            n.notify_waiters();
                        }
                    }
                    None => map.values().for_each(|(n, _)| n.notify_waiters()),
                }
            }
        });
        Ok(waiters)
    }

    /// Quits the subscriber (with the broker's own connection, [`RedisBroker::close`]).
    pub(super) async fn close(&self) {
        self.manager.abort();
        let _ = self.sub.quit().await;
    }

    /// Registers interest in `channel`, subscribing when this is its first waiter. The interest
    /// lasts as long as the returned guard: a wait whose future is dropped (a timeout around
    /// it, a closed request) leaves no waiter entry and no subscription behind.
    async fn join(self: &Arc<Self>, channel: &str) -> Result<Joined, BrokerError> {
        let (notify, first) = {
            let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
            let e = map
                .entry(channel.to_string())
                .or_insert_with(|| (Arc::new(Notify::new()), 0));
            e.1 += 1;
            (e.0.clone(), e.1 == 1)
        };
        // From here a drop (of this future or of the wait) takes the interest back.
        let joined = Joined {
            waiters: self.clone(),
            channel: channel.to_string(),
            notify,
        };
        if first {
            self.sub.subscribe(channel).await.map_err(store)?;
            // The client answers SUBSCRIBE once it is written, not once Redis ran it; a PING on
            // the same connection is answered after it, so a message published from here on
            // reaches this waiter.
            let _: Value = self.sub.ping(None).await.map_err(store)?;
        }
        Ok(joined)
    }

    /// Drops interest in `channel`; true when this was its last waiter, so the caller must
    /// unsubscribe.
    fn leave(&self, channel: &str) -> bool {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        match map.get_mut(channel) {
            Some(e) if e.1 > 1 => {
                e.1 -= 1;
                false
            }
            Some(_) => {
                map.remove(channel);
                true
            }
            None => false,
        }
    }
}

/// One wait's interest in a task's channel; dropping it leaves the channel, unsubscribing when
/// it was the last waiter (in the background: a drop cannot await).
struct Joined {
    waiters: Arc<Waiters>,
    channel: String,
    notify: Arc<Notify>,
}

impl Drop for Joined {
    fn drop(&mut self) {
        if !self.waiters.leave(&self.channel) {
            return;
        }
        let (waiters, channel) = (self.waiters.clone(), std::mem::take(&mut self.channel));
        // Outside a runtime (the process is ending) there is no subscription worth ending.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                // A failed unsubscribe leaves a channel nobody listens to; harmless.
                let _ = waiters.sub.unsubscribe(channel).await;
            });
        }
    }
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiters").finish_non_exhaustive()
    }
}

impl RedisBroker {
    async fn waiters(&self) -> Result<Arc<Waiters>, BrokerError> {
        self.inner
            .waiters
            .get_or_try_init(|| Waiters::start(self))
            .await
            .cloned()
    }
}

impl Results for RedisBroker {
    async fn progress(
        &self,
        queue: &QueueName,
        id: &str,
    ) -> Result<Option<TaskProgress>, BrokerError> {
        self.read_progress(&self.queue_keys(queue), id).await
    }

    async fn outcome(&self, queue: &QueueName, id: &str) -> Result<TaskOutcome, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut plain_rechecked = !crate::keys::is_plain_id(id);
        loop {
            let mut rec = Record::read(
                &self.inner.client,
                keys.task(id),
                &[STATE, RESULT, ERROR, CANCEL_REASON],
            )
            .await
            .map_err(store)?;
            if !rec.exists() {
                // A discarded dead letter leaves only its marker, for the idempotency window.
                let marker: Option<String> =
                    self.inner.client.get(keys.done(id)).await.map_err(store)?;
                if marker.is_some() {
                    return Ok(TaskOutcome::Failed {
                        error: "dead-lettered and discarded".into(),
                    });
                }
                // A plain task has no hash while it waits or runs: its stream entry tells.
                if let Some(state) = self.plain_state(&keys, id).await? {
                    return Ok(TaskOutcome::Unfinished(state));
                }
                // A plain task only ever gains a record: one that left its entry between the
                // reads above has it now, so read once more before answering "not found".
                if plain_rechecked {
                    return Ok(TaskOutcome::NotFound);
                }
                plain_rechecked = true;
                continue;
            }
            let name = reply::string(rec.take(STATE), "outcome")?;
            let state = TaskState::parse(&name)
                .ok_or_else(|| reply::bad("outcome", format!("unknown state {name:?}")))?;
            let result = rec.take(RESULT);
            let error = rec.text(ERROR, "outcome")?;
            return Ok(match state {
                TaskState::Completed => TaskOutcome::Succeeded {
                    result: match result {
                        Value::Null => None,
                        v => Some(reply::bytes(v, "outcome")?),
                    },
                },
                TaskState::Archived => TaskOutcome::Failed {
                    error: error.unwrap_or_default(),
                },
                TaskState::Cancelled => TaskOutcome::Cancelled {
                    reason: rec.text(CANCEL_REASON, "outcome")?.unwrap_or_default(),
                },
                s => TaskOutcome::Unfinished(s),
            });
        }
    }

    async fn wait_outcome(
        &self,
        queue: &QueueName,
        id: &str,
        timeout: Duration,
    ) -> Result<TaskOutcome, BrokerError> {
        let first = self.outcome(queue, id).await?;
        if first.is_final() || timeout.is_zero() {
            return Ok(first);
        }
        let waiters = self.waiters().await?;
        let channel = self.queue_keys(queue).task(id);
        let joined = waiters.join(&channel).await?;
        let notify = &joined.notify;
        let deadline = Instant::now() + timeout;
        loop {
            // Armed before the read, so a message between the read and the wait is not lost.
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let now = self.outcome(queue, id).await?;
            if now.is_final() || Instant::now() >= deadline {
                return Ok(now);
            }
            let nap = deadline.min(Instant::now() + RECHECK);
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep_until(nap) => {}
            }
        }
    }
}
