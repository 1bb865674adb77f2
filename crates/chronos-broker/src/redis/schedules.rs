use std::collections::BTreeMap;
use std::time::Duration;

use fred::prelude::*;
use tokio::sync::mpsc;
use tracing::warn;

use super::{client_builder, reply, RedisBroker};
use crate::{
    duration_ms, now_ms, BrokerError, DeadLetter, FireOutcome, FireState, LeaderInfo, QueueName,
    ScheduleEntry, SchedulerMetrics, Schedules, Trigger,
};

/// Hash tag of the scheduler's own keys (lock, epoch, registry, metrics).
const TAG: &str = "scheduler";

impl RedisBroker {
    fn sched_key(&self, name: &str) -> String {
        self.inner.keys.tagged(TAG, name)
    }
}

impl Schedules for RedisBroker {
    async fn acquire_leadership(
        &self,
        token: &str,
        instance: &str,
        ttl: Duration,
        min_epoch: u64,
    ) -> Result<Option<u64>, BrokerError> {
        let args: Vec<Value> = vec![
            token.into(),
            ttl_ms(ttl)?.into(),
            instance.into(),
            now_ms().into(),
            epoch_arg(min_epoch).into(),
        ];
        let epoch = self
            .run(|s| &s.leader_acquire, self.sched_key("leader"), args)
            .await?;
        let epoch = reply::int(&epoch, "leader_acquire")?;
        Ok((epoch > 0).then_some(epoch as u64))
    }

    async fn renew_leadership(&self, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), ttl_ms(ttl)?.into()];
        let n = self
            .run(|s| &s.lock_renew, self.sched_key("leader"), args)
            .await?;
        Ok(reply::int(&n, "lock_renew")? == 1)
    }

    async fn resign_leadership(&self, token: &str) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), self.sched_key("resign").into()];
        let n = self
            .run(|s| &s.lock_release, self.sched_key("leader"), args)
            .await?;
        Ok(reply::int(&n, "lock_release")? == 1)
    }

    async fn leader(&self) -> Result<Option<LeaderInfo>, BrokerError> {
        let holder: Option<String> = self.inner.client.get(self.sched_key("leader")).await?;
        if holder.is_none() {
            return Ok(None);
        }
        let info: Vec<Option<String>> = self
            .inner
            .client
            .hmget(self.sched_key("leader-info"), vec!["id", "epoch", "since"])
            .await?;
        let field = |i: usize| info.get(i).cloned().flatten();
        Ok(Some(LeaderInfo {
            id: field(0).unwrap_or_default(),
            epoch: field(1).and_then(|e| e.parse().ok()).unwrap_or(0),
            since_ms: field(2).and_then(|e| e.parse().ok()).unwrap_or(0),
        }))
    }

    async fn resignations(&self) -> Result<mpsc::Receiver<()>, BrokerError> {
        let sub = client_builder(self.inner.client.client_config()).build_subscriber_client()?;
        sub.init().await?;
        // Re-subscribes after a reconnect; messages published during the gap are lost, which
        // is why followers also poll the lock.
        let manager = sub.manage_subscriptions();
        let mut messages = sub.message_rx();
        sub.subscribe(self.sched_key("resign")).await?;
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    m = messages.recv() => match m {
                        // A lagged receiver still means "something happened": wake the follower.
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            let _ = tx.try_send(());
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    },
                    _ = tx.closed() => break,
                }
            }
            let _ = sub.quit().await;
            manager.abort();
        });
        Ok(rx)
    }

    async fn fence(&self, queue: &QueueName, epoch: u64) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let args: Vec<Value> = vec![keys.prefix().into(), epoch_arg(epoch).into()];
        let fence = self.run(|s| &s.fence, keys.stream(), args).await?;
        Ok(reply::int(&fence, "fence")?.max(0) as u64)
    }

    async fn set_watermarks(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
        at_ms: i64,
    ) -> Result<(), BrokerError> {
        let key = format!("{}sched:since", self.queue_keys(queue).prefix());
        let calls = schedule_ids.iter().map(|id| {
            self.inner
                .client
                .hsetnx::<i64, _, _, _>(&key, id.as_str(), at_ms)
        });
        for r in futures::future::join_all(calls).await {
            r?;
        }
        Ok(())
    }

    async fn fire(
        &self,
        queue: &QueueName,
        epoch: u64,
        triggers: Vec<Trigger>,
        dedup_ttl: Duration,
    ) -> Result<Vec<FireOutcome>, BrokerError> {
        if triggers.is_empty() {
            return Ok(Vec::new());
        }
        for t in &triggers {
            if t.task.envelope.queue != queue.as_str() {
                return Err(BrokerError::InvalidOption(format!(
                    "trigger for queue {:?} fired into {queue}",
                    t.task.envelope.queue
                )));
            }
        }
        self.register_queue(queue).await?;
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = Vec::with_capacity(4 + 7 * triggers.len());
        args.push(keys.prefix().into());
        args.push(epoch_arg(epoch).into());
        args.push(now_ms().into());
        args.push(ttl_ms(dedup_ttl)?.into());
        // A trigger whose task cannot be stored is answered `Invalid` on its own, so it never
        // blocks the other schedules of its queue.
        let mut outcomes = vec![FireOutcome::Invalid; triggers.len()];
        let mut sent = Vec::with_capacity(triggers.len());
        for (i, t) in triggers.iter().enumerate() {
            let env = &t.task.envelope;
            if env.payload.len() > self.inner.max_payload {
                continue;
            }
            let Ok(bytes) = env.encode() else { continue };
            args.push(t.schedule_id.as_str().into());
            args.push(t.at_ms.into());
            args.push(env.id.as_str().into());
            args.push(Value::Bytes(bytes.into()));
            args.push(i64::from(env.max_retry).into());
            args.push(reply::flag(env.dead_letter == DeadLetter::Discard));
            args.push(reply::flag(t.forbid_overlap));
            sent.push(i);
        }
        if sent.is_empty() {
            return Ok(outcomes);
        }
        let codes = reply::array(self.run(|s| &s.fire, keys.stream(), args).await?, "fire")?;
        if codes.len() != sent.len() {
            return Err(reply::bad(
                "fire",
                format!("{} codes for {} triggers", codes.len(), sent.len()),
            ));
        }
        for (i, c) in sent.into_iter().zip(codes) {
            outcomes[i] = match reply::int(&c, "fire")? {
                1 => FireOutcome::Fired,
                -1 => FireOutcome::Duplicate,
                -2 => FireOutcome::Overlap,
                -3 => FireOutcome::Stale,
                other => return Err(reply::bad("fire", format!("unknown code {other}"))),
            };
        }
        Ok(outcomes)
    }

    async fn fire_state(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> Result<Vec<FireState>, BrokerError> {
        if schedule_ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.queue_keys(queue);
        let ids: Vec<&str> = schedule_ids.iter().map(String::as_str).collect();
        let last: Vec<Option<i64>> = self
            .inner
            .client
            .hmget(format!("{}sched:last", keys.prefix()), ids.clone())
            .await?;
        let task: Vec<Option<String>> = self
            .inner
            .client
            .hmget(format!("{}sched:task", keys.prefix()), ids.clone())
            .await?;
        let since: Vec<Option<i64>> = self
            .inner
            .client
            .hmget(format!("{}sched:since", keys.prefix()), ids)
            .await?;
        Ok(last
            .into_iter()
            .zip(task)
            .zip(since)
            .map(|((last_fired_ms, last_task_id), watermark_ms)| FireState {
                last_fired_ms,
                last_task_id,
                watermark_ms,
            })
            .collect())
    }

    async fn publish_schedules(&self, entries: &[ScheduleEntry]) -> Result<(), BrokerError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pairs: Vec<(String, Value)> = Vec::with_capacity(entries.len());
        for e in entries {
            let bytes = e
                .encode()
                .map_err(|err| BrokerError::Encode(err.to_string()))?;
            pairs.push((e.id.clone(), Value::Bytes(bytes.into())));
        }
        let _: () = self
            .inner
            .client
            .hset(self.sched_key("registry"), pairs)
            .await?;
        Ok(())
    }

    async fn schedules(
        &self,
        stale_after: Duration,
        remove_after: Duration,
    ) -> Result<Vec<ScheduleEntry>, BrokerError> {
        let raw: Vec<(String, Vec<u8>)> = self
            .inner
            .client
            .hgetall(self.sched_key("registry"))
            .await?;
        let now = now_ms();
        let mut gone = Vec::new();
        let mut by_queue: BTreeMap<String, Vec<ScheduleEntry>> = BTreeMap::new();
        for (id, bytes) in raw {
            match ScheduleEntry::decode(&bytes) {
                Ok(mut e) if now.saturating_sub(e.last_seen_ms) <= duration_ms(remove_after) => {
                    e.stale = now.saturating_sub(e.last_seen_ms) > duration_ms(stale_after);
                    by_queue.entry(e.queue.clone()).or_default().push(e);
                }
                Ok(_) => gone.push(id),
                Err(err) => warn!(schedule = %id, error = %err, "unreadable registry entry"),
            }
        }
        if !gone.is_empty() {
            let _: i64 = self
                .inner
                .client
                .hdel(self.sched_key("registry"), gone)
                .await?;
        }
        let mut out = Vec::new();
        for (queue, mut entries) in by_queue {
            if let Ok(q) = QueueName::new(queue) {
                let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
                for (e, state) in entries.iter_mut().zip(self.fire_state(&q, &ids).await?) {
                    e.last_fired_ms = state.last_fired_ms;
                    e.last_task_id = state.last_task_id;
                }
            }
            out.extend(entries);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn add_scheduler_metrics(&self, d: SchedulerMetrics) -> Result<(), BrokerError> {
        let key = self.sched_key("metrics");
        for (field, n) in [
            ("fired", d.fired),
            ("missed", d.missed),
            ("suppressed", d.suppressed),
        ] {
            if n > 0 {
                let _: i64 = self
                    .inner
                    .client
                    .hincrby(&key, field, i64::try_from(n).unwrap_or(i64::MAX))
                    .await?;
            }
        }
        Ok(())
    }

    async fn scheduler_metrics(&self) -> Result<SchedulerMetrics, BrokerError> {
        let v: Vec<Option<u64>> = self
            .inner
            .client
            .hmget(
                self.sched_key("metrics"),
                vec!["fired", "missed", "suppressed"],
            )
            .await?;
        let get = |i: usize| v.get(i).copied().flatten().unwrap_or(0);
        Ok(SchedulerMetrics {
            fired: get(0),
            missed: get(1),
            suppressed: get(2),
        })
    }
}

fn epoch_arg(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

fn ttl_ms(ttl: Duration) -> Result<i64, BrokerError> {
    let ms = duration_ms(ttl);
    if ms <= 0 {
        return Err(BrokerError::InvalidDuration(ttl));
    }
    Ok(ms)
}
