//! The scheduler's keys. Cluster-wide ones carry the hash tag `{scheduler}`:
//!
//! | key | type | contents |
//! |---|---|---|
//! | `<ns>:{scheduler}:leader` | string | the leader's token, `PX` leader TTL |
//! | `<ns>:{scheduler}:epoch`, `:leader-info` | string, hash | epoch counter; leader id, epoch, since |
//! | `<ns>:{scheduler}:registry` | hash | schedule id -> registry entry (MessagePack), written when it changes |
//! | `<ns>:{scheduler}:registry:live` | zset | instance -> last seen ms (Redis' clock), one ZADD per publish |
//! | `<ns>:{scheduler}:registry:i:<instance>` | set | the schedule ids that instance registers |
//! | `<ns>:{scheduler}:registry:def` | hash | code schedule id -> [`crate::ScheduleDef`] (task, options, spec; MessagePack), so a leader that does not register it fires it; written once per instance start, removed with the registry entry |
//! | `<ns>:{scheduler}:runtime` | hash | runtime schedule id -> definition (MessagePack), by compare-and-set (`sched_put.lua`) |
//! | `<ns>:{scheduler}:runtime:rev` | string | revision of the runtime schedules, bumped by every change |
//! | `<ns>:{scheduler}:metrics` | hash | counters written by versions before the per-queue ones (still summed) |
//!
//! Per queue, with the queue's tag `{<q>}`: `sched:fence` (string), `sched:last`, `sched:task`,
//! `sched:reg` (hashes by schedule id: last fired ms, last task id, first registration ms),
//! `sched:fires` (hash by schedule id: its last fires, a MessagePack list, lib.lua `record_fire`),
//! `sched:metrics` (hash), `sched:d:<schedule>:<trigger secs>` (dedup keys, `PX` dedup TTL) and
//! `sched:r:<schedule>:<request>` (a run-now request's marker, `PX` 1 day),
//! `sched:c:<call>` (outcomes of a fire call, `PX` dedup TTL, so a re-sent call is answered
//! without running again). Instances not seen for `remove_after` are pruned, and with them the
//! registry entries and per-queue fields of ids nobody registers any more.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fred::bytes::Bytes;
use fred::prelude::*;
use tokio::sync::mpsc;
use tracing::warn;

use super::reply::{FireCode, LockCode, PublishCode, SchedRunCode};
use super::{client_builder, reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, now_ms, BrokerError, DeadLetter, FireOutcome, FireRecord, FireState, LeaderInfo,
    ManageSchedules, QueueKeys, QueueName, ScheduleDef, ScheduleEntry, SchedulerMetrics, Schedules,
    Trigger,
};

/// Hash tag of the scheduler's own keys (lock, epoch, registry).
const TAG: &str = "scheduler";

impl RedisBroker {
    pub(super) fn sched_key(&self, name: &str) -> String {
        self.inner.keys.tagged(TAG, name)
    }

    fn instance_set(&self, instance: &str) -> String {
        self.sched_key(&format!("registry:i:{instance}"))
    }
}

pub(super) fn sched(keys: &QueueKeys, name: &str) -> String {
    format!("{}sched:{name}", keys.prefix())
}

/// What one trigger's fire.lua code means.
fn fire_outcome(code: FireCode) -> FireOutcome {
    match code {
        FireCode::Fired => FireOutcome::Fired,
        FireCode::Duplicate => FireOutcome::Duplicate,
        FireCode::Overlap => FireOutcome::Overlap,
        FireCode::Stale => FireOutcome::Stale,
        FireCode::Unique => FireOutcome::Unique,
        FireCode::Expired => FireOutcome::Expired,
    }
}

/// What a sched_run.lua code means; None for a corrupt-keys answer (no outcome).
pub(super) fn run_outcome(code: SchedRunCode) -> Option<FireOutcome> {
    match code {
        SchedRunCode::Fired => Some(FireOutcome::Fired),
        SchedRunCode::Duplicate => Some(FireOutcome::Duplicate),
        SchedRunCode::Unique => Some(FireOutcome::Unique),
        SchedRunCode::CorruptKeys => None,
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
        let keys = vec![
            self.sched_key("leader"),
            self.sched_key("epoch"),
            self.sched_key("leader-info"),
        ];
        let epoch = self.run(|s| &s.leader_acquire, keys, args).await?;
        let epoch = reply::int(&epoch, "leader_acquire")?;
        Ok((epoch > 0).then_some(epoch as u64))
    }

    async fn renew_leadership(&self, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), ttl_ms(ttl)?.into()];
        let n = self
            .run(|s| &s.lock_renew, self.sched_key("leader"), args)
            .await?;
        Ok(LockCode::from_reply(reply::int(&n, "lock_renew")?) == Some(LockCode::Held))
    }

    async fn resign_leadership(&self, token: &str) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), self.sched_key("resign").into()];
        let n = self
            .run(|s| &s.lock_release, self.sched_key("leader"), args)
            .await?;
        Ok(LockCode::from_reply(reply::int(&n, "lock_release")?) == Some(LockCode::Held))
    }

    async fn leader(&self) -> Result<Option<LeaderInfo>, BrokerError> {
        let holder: Option<String> = self
            .inner
            .client
            .get(self.sched_key("leader"))
            .await
            .map_err(store)?;
        if holder.is_none() {
            return Ok(None);
        }
        let info: Vec<Option<String>> = self
            .inner
            .client
            .hmget(self.sched_key("leader-info"), vec!["id", "epoch", "since"])
            .await
            .map_err(store)?;
        let field = |i: usize| info.get(i).cloned().flatten();
        Ok(Some(LeaderInfo {
            id: field(0).unwrap_or_default(),
            epoch: field(1).and_then(|e| e.parse().ok()).unwrap_or(0),
            since_ms: field(2).and_then(|e| e.parse().ok()).unwrap_or(0),
        }))
    }

    async fn resignations(&self) -> Result<mpsc::Receiver<()>, BrokerError> {
        let sub = client_builder(self.inner.client.client_config())
            .build_subscriber_client()
            .map_err(store)?;
        sub.init().await.map_err(store)?;
        // Re-subscribes after a reconnect; messages published during the gap are lost, which
        // is why followers also poll the lock.
        let manager = sub.manage_subscriptions();
        let mut messages = sub.message_rx();
        sub.subscribe(self.sched_key("resign"))
            .await
            .map_err(store)?;
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
        let args: Vec<Value> = vec![epoch_arg(epoch).into()];
        let fence = self
            .run(|s| &s.fence, vec![sched(&keys, "fence")], args)
            .await?;
        Ok(reply::int(&fence, "fence")?.max(0) as u64)
    }

    async fn register_schedules(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> Result<Vec<i64>, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut out = Vec::with_capacity(schedule_ids.len());
        // Slices keep one script call short even with thousands of schedules.
        for chunk in schedule_ids.chunks(1000) {
            let args: Vec<Value> = chunk.iter().map(|id| id.as_str().into()).collect();
            let marks = reply::array(
                self.run(|s| &s.sched_register, vec![sched(&keys, "reg")], args)
                    .await?,
                "sched_register",
            )?;
            if marks.len() != chunk.len() {
                return Err(reply::bad(
                    "sched_register",
                    format!("{} marks for {} ids", marks.len(), chunk.len()),
                ));
            }
            for m in &marks {
                out.push(reply::int(m, "sched_register")?);
            }
        }
        Ok(out)
    }

    async fn fire(
        &self,
        queue: &QueueName,
        epoch: u64,
        triggers: Vec<Trigger>,
        dedup_ttl: Duration,
        missed: u64,
    ) -> Result<Vec<FireOutcome>, BrokerError> {
        for t in &triggers {
            if t.task.envelope.queue != queue.as_str() {
                return Err(BrokerError::InvalidOption(format!(
                    "trigger for queue {:?} fired into {queue}",
                    t.task.envelope.queue
                )));
            }
        }
        let ttl = ttl_ms(dedup_ttl)?;
        // A trigger whose task cannot be stored is answered `Invalid` on its own, so it never
        // blocks the other schedules of its queue.
        let mut outcomes = vec![FireOutcome::Invalid; triggers.len()];
        let mut sent = Vec::with_capacity(triggers.len());
        let mut encoded = Vec::with_capacity(triggers.len());
        for (i, t) in triggers.iter().enumerate() {
            let env = &t.task.envelope;
            if env.payload.len() > self.inner.max_payload {
                continue;
            }
            let Ok(bytes) = env.encode() else { continue };
            sent.push(i);
            encoded.push(bytes);
        }
        // Triggers that cannot be stored never fire: the counters call them missed.
        let missed = missed.saturating_add(triggers.len().saturating_sub(sent.len()) as u64);
        if sent.is_empty() && missed == 0 {
            return Ok(outcomes);
        }
        self.register_queue(queue).await?;
        let keys = self.queue_keys(queue);
        // The call id names the marker that answers a re-sent call (fred re-sends the same
        // bytes after a reconnect), so it is fixed once per call, here.
        let call = crate::new_task_id();
        let mut key_list = vec![
            keys.stream(),
            sched(&keys, "fence"),
            sched(&keys, "last"),
            sched(&keys, "task"),
            sched(&keys, "metrics"),
            sched(&keys, &format!("c:{call}")),
            sched(&keys, "fires"),
        ];
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut declare = |key_list: &mut Vec<String>, k: String| -> usize {
            if let Some(&i) = index.get(&k) {
                return i;
            }
            key_list.push(k.clone());
            index.insert(k, key_list.len());
            key_list.len()
        };
        let mut args: Vec<Value> =
            Vec::with_capacity(3 + super::protocol::FIRE_STRIDE * sent.len());
        args.push(epoch_arg(epoch).into());
        args.push(ttl.into());
        args.push(i64::try_from(missed).unwrap_or(i64::MAX).into());
        for (&i, bytes) in sent.iter().zip(encoded) {
            let Some(t) = triggers.get(i) else { continue };
            let env = &t.task.envelope;
            let dkey = declare(
                &mut key_list,
                sched(
                    &keys,
                    &format!("d:{}:{}", t.schedule_id, t.at_ms.div_euclid(1000)),
                ),
            );
            let tkey = declare(&mut key_list, keys.task(&env.id));
            let (ukey, uttl) = match (&env.unique_key, t.task.unique_ttl) {
                (Some(hash), Some(ttl)) => (
                    declare(&mut key_list, keys.unique(hash)),
                    duration_ms(ttl).max(1),
                ),
                _ => (0, 0),
            };
            if t.forbid_overlap {
                if let Some(prev) = &t.prev_task_id {
                    declare(&mut key_list, keys.task(prev));
                }
            }
            args.push(t.schedule_id.as_str().into());
            args.push(t.at_ms.into());
            args.push(env.id.as_str().into());
            args.push(Value::Bytes(bytes.into()));
            args.push(i64::from(env.max_retry).into());
            args.push(reply::flag(env.dead_letter == DeadLetter::Discard));
            args.push(reply::flag(t.forbid_overlap));
            args.push(env.deadline_ms.unwrap_or(0).max(0).into());
            args.push(i64::try_from(dkey).unwrap_or(0).into());
            args.push(i64::try_from(tkey).unwrap_or(0).into());
            args.push(i64::try_from(ukey).unwrap_or(0).into());
            args.push(uttl.into());
            args.push(super::enqueue::release_arg(&t.task).into());
        }
        // A schedule's stored previous task can differ from the caller's hint (a fire whose
        // outcome the caller never learnt): the script names it, and the call goes again with
        // it declared. Each round adds keys, so a few rounds always suffice.
        let mut codes = None;
        // The queue's event stream goes last, after every key the indexes above name.
        let events = self.event_stream(&keys).await?;
        for _ in 0..4 {
            let mut call_keys = key_list.clone();
            call_keys.extend(events.clone());
            let reply = reply::array(
                self.run(|s| &s.fire, call_keys, args.clone()).await?,
                "fire",
            )?;
            let missing = matches!(reply.first(), Some(Value::Bytes(_) | Value::String(_)));
            if !missing {
                codes = Some(reply);
                break;
            }
            for k in reply.into_iter().skip(1) {
                let k = reply::string(k, "fire")?;
                declare(&mut key_list, k);
            }
        }
        let Some(codes) = codes else {
            return Err(reply::bad(
                "fire",
                "previous tasks kept changing between calls".into(),
            ));
        };
        if codes.len() != sent.len() {
            return Err(reply::bad(
                "fire",
                format!("{} codes for {} triggers", codes.len(), sent.len()),
            ));
        }
        for (i, c) in sent.into_iter().zip(codes) {
            let code = reply::int(&c, "fire")?;
            let outcome = match FireCode::from_reply(code) {
                Some(c) => fire_outcome(c),
                None => return Err(reply::bad("fire", format!("unknown code {code}"))),
            };
            if let Some(o) = outcomes.get_mut(i) {
                *o = outcome;
            }
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
        let c = &self.inner.client;
        let (last, task, reg) = tokio::try_join!(
            c.hmget::<Vec<Option<i64>>, _, _>(sched(&keys, "last"), ids.clone()),
            c.hmget::<Vec<Option<String>>, _, _>(sched(&keys, "task"), ids.clone()),
            c.hmget::<Vec<Option<i64>>, _, _>(sched(&keys, "reg"), ids),
        )
        .map_err(store)?;
        Ok(last
            .into_iter()
            .zip(task)
            .zip(reg)
            .map(|((last_fired_ms, last_task_id), registered_ms)| FireState {
                last_fired_ms,
                last_task_id,
                registered_ms,
            })
            .collect())
    }

    async fn fire_history(
        &self,
        queue: &QueueName,
        schedule_id: &str,
    ) -> Result<Vec<FireRecord>, BrokerError> {
        let keys = self.queue_keys(queue);
        let raw: Option<Bytes> = self
            .inner
            .client
            .hget(sched(&keys, "fires"), schedule_id)
            .await
            .map_err(store)?;
        let Some(raw) = raw else {
            return Ok(Vec::new());
        };
        let Ok(text) = std::str::from_utf8(&raw) else {
            warn!(schedule = %schedule_id, "unreadable fire history");
            return Ok(Vec::new());
        };
        // Line by line (lib.lua `record_fire`): one of another shape (damaged, or a newer
        // version's) is left out alone.
        Ok(text.lines().filter_map(fire_line).collect())
    }

    async fn publish_schedule_defs(&self, defs: &[ScheduleDef]) -> Result<(), BrokerError> {
        for chunk in defs.chunks(500) {
            let mut pairs: Vec<(String, Value)> = Vec::with_capacity(chunk.len());
            for d in chunk {
                let bytes = d
                    .encode()
                    .map_err(|err| BrokerError::Encode(err.to_string()))?;
                pairs.push((d.id.clone(), Value::Bytes(bytes.into())));
            }
            let _: i64 = self
                .inner
                .client
                .hset(self.sched_key("registry:def"), pairs)
                .await
                .map_err(store)?;
        }
        Ok(())
    }

    async fn registered_defs(
        &self,
        instance: &str,
        live_within: Duration,
        known: &[String],
    ) -> Result<Vec<ScheduleDef>, BrokerError> {
        let c = &self.inner.client;
        let since = self
            .redis_now_ms()
            .await?
            .saturating_sub(duration_ms(live_within));
        let instances: Vec<String> = c
            .zrangebyscore(self.sched_key("registry:live"), since, "+inf", false, None)
            .await
            .map_err(store)?;
        let known: std::collections::HashSet<&str> = known.iter().map(String::as_str).collect();
        let mut ids = std::collections::BTreeSet::new();
        let own = self.instance_set(instance);
        for i in instances.iter().filter(|i| i.as_str() != instance) {
            // All instances of one deploy register the same ids: the difference, computed by
            // Redis, is usually empty, so the ids themselves do not travel.
            let registered: Vec<String> = c
                .sdiff(vec![self.instance_set(i), own.clone()])
                .await
                .map_err(store)?;
            ids.extend(
                registered
                    .into_iter()
                    .filter(|id| !known.contains(id.as_str())),
            );
        }
        let ids: Vec<String> = ids.into_iter().collect();
        let mut out = Vec::new();
        for chunk in ids.chunks(1000) {
            let raw: Vec<Option<Vec<u8>>> = c
                .hmget(self.sched_key("registry:def"), chunk.to_vec())
                .await
                .map_err(store)?;
            for (id, bytes) in chunk.iter().zip(raw) {
                let Some(bytes) = bytes else { continue };
                match ScheduleDef::decode(&bytes) {
                    Ok(d) if d.id == *id => out.push(d),
                    Ok(d) => {
                        warn!(schedule = %id, stored = %d.id, "registered definition under another id; ignored")
                    }
                    Err(err) => {
                        warn!(schedule = %id, error = %err, "unreadable registered definition")
                    }
                }
            }
        }
        Ok(out)
    }

    async fn publish_schedules(
        &self,
        instance: &str,
        entries: &[ScheduleEntry],
    ) -> Result<bool, BrokerError> {
        let mut args: Vec<Value> = Vec::with_capacity(1 + 2 * entries.len());
        args.push(instance.into());
        for e in entries {
            let bytes = e
                .encode()
                .map_err(|err| BrokerError::Encode(err.to_string()))?;
            args.push(e.id.as_str().into());
            args.push(Value::Bytes(bytes.into()));
        }
        let keys = vec![
            self.sched_key("registry"),
            self.sched_key("registry:live"),
            self.instance_set(instance),
        ];
        let r = self.run(|s| &s.registry_publish, keys, args).await?;
        Ok(PublishCode::from_reply(reply::int(&r, "registry_publish")?)
            == Some(PublishCode::Written))
    }

    async fn schedules(
        &self,
        stale_after: Duration,
        remove_after: Duration,
    ) -> Result<Vec<ScheduleEntry>, BrokerError> {
        let c = &self.inner.client;
        let now = self.redis_now_ms().await?;
        let live: Vec<(String, f64)> = c
            .zrange(
                self.sched_key("registry:live"),
                0,
                -1,
                None,
                false,
                None,
                true,
            )
            .await
            .map_err(store)?;
        // Last seen of each id: the latest of the instances that register it.
        let mut seen: HashMap<String, i64> = HashMap::new();
        let live_at: Vec<i64> = live.iter().map(|(_, score)| *score as i64).collect();
        for (instance, score) in live {
            let at = score as i64;
            if now.saturating_sub(at) > duration_ms(remove_after) {
                continue;
            }
            let ids: Vec<String> = c
                .smembers(self.instance_set(&instance))
                .await
                .map_err(store)?;
            for id in ids {
                let e = seen.entry(id).or_insert(at);
                *e = (*e).max(at);
            }
        }
        let raw: Vec<(String, Vec<u8>)> =
            c.hgetall(self.sched_key("registry")).await.map_err(store)?;
        let mut by_queue: BTreeMap<String, Vec<ScheduleEntry>> = BTreeMap::new();
        // Runtime schedules are fired by whichever instance leads: live while a leader holds
        // the lock, else last seen when any instance was.
        let leading: i64 = c.exists(self.sched_key("leader")).await.map_err(store)?;
        let any_seen = if leading > 0 {
            now
        } else {
            live_at.iter().copied().max().unwrap_or(0)
        };
        for d in self.schedule_defs().await? {
            let stale = leading == 0;
            let e = d.def.entry(now, any_seen, stale);
            by_queue.entry(e.queue.clone()).or_default().push(e);
        }
        for (id, bytes) in raw {
            match ScheduleEntry::decode(&bytes) {
                Ok(mut e) => {
                    // Entries of older versions name no instance set: their own mark counts.
                    let at = seen.get(&id).copied().unwrap_or(e.last_seen_ms);
                    if now.saturating_sub(at) > duration_ms(remove_after) {
                        continue;
                    }
                    e.last_seen_ms = at;
                    e.stale = now.saturating_sub(at) > duration_ms(stale_after);
                    if let Some(every) = e.every_ms.filter(|&m| m > 0) {
                        let every = i64::try_from(every).unwrap_or(i64::MAX);
                        e.next_run_ms = Some(
                            now.div_euclid(every)
                                .saturating_add(1)
                                .saturating_mul(every),
                        );
                    }
                    by_queue.entry(e.queue.clone()).or_default().push(e);
                }
                Err(err) => warn!(schedule = %id, error = %err, "unreadable registry entry"),
            }
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

    async fn prune_schedules(
        &self,
        remove_after: Duration,
        full: bool,
    ) -> Result<Vec<String>, BrokerError> {
        let c = &self.inner.client;
        let mut removed = None;
        // The script refuses when an instance appeared since the zset was read; read again.
        for _ in 0..5 {
            let instances: Vec<String> = c
                .zrange(
                    self.sched_key("registry:live"),
                    0,
                    -1,
                    None,
                    false,
                    None,
                    false,
                )
                .await
                .map_err(store)?;
            let mut keys = vec![
                self.sched_key("registry"),
                self.sched_key("registry:live"),
                self.sched_key("registry:def"),
            ];
            keys.extend(instances.iter().map(|i| self.instance_set(i)));
            let mut args: Vec<Value> = vec![duration_ms(remove_after).into(), reply::flag(full)];
            args.extend(instances.iter().map(|i| Value::from(i.as_str())));
            let r = reply::array(
                self.run(|s| &s.registry_prune, keys, args).await?,
                "registry_prune",
            )?;
            let retry = matches!(r.first(), Some(Value::String(s)) if &**s == "retry")
                || matches!(r.first(), Some(Value::Bytes(b)) if &b[..] == b"retry");
            if !retry {
                removed = Some(r);
                break;
            }
        }
        let Some(removed) = removed else {
            return Ok(Vec::new());
        };
        let mut ids = Vec::new();
        let mut by_queue: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut it = removed.into_iter();
        while let (Some(id), Some(bytes)) = (it.next(), it.next()) {
            let id = reply::string(id, "registry_prune")?;
            match ScheduleEntry::decode(&reply::bytes(bytes, "registry_prune")?) {
                Ok(e) => by_queue.entry(e.queue).or_default().push(id.clone()),
                Err(err) => warn!(schedule = %id, error = %err, "pruned an unreadable entry"),
            }
            ids.push(id);
        }
        // The fire state lives in the queue's slot, so it goes in separate commands; a
        // schedule registered again in between only loses its first-registration mark, which
        // its next catch-up writes afresh.
        for (queue, qids) in by_queue {
            let Ok(q) = QueueName::new(queue) else {
                continue;
            };
            let keys = self.queue_keys(&q);
            for name in ["last", "task", "reg", "fires"] {
                let _: i64 = c
                    .hdel(sched(&keys, name), qids.clone())
                    .await
                    .map_err(store)?;
            }
        }
        Ok(ids)
    }

    async fn scheduler_metrics(&self) -> Result<SchedulerMetrics, BrokerError> {
        let c = &self.inner.client;
        let queues: Vec<String> = c.smembers(self.inner.keys.queues()).await.map_err(store)?;
        let mut keys = vec![self.sched_key("metrics")];
        for q in queues {
            if let Ok(q) = QueueName::new(q) {
                keys.push(sched(&self.queue_keys(&q), "metrics"));
            }
        }
        let reads = keys.iter().map(|k| {
            c.hmget::<Vec<Option<u64>>, _, _>(k.as_str(), vec!["fired", "missed", "suppressed"])
        });
        let mut m = SchedulerMetrics::default();
        for v in futures::future::try_join_all(reads).await.map_err(store)? {
            let get = |i: usize| v.get(i).copied().flatten().unwrap_or(0);
            m.fired = m.fired.saturating_add(get(0));
            m.missed = m.missed.saturating_add(get(1));
            m.suppressed = m.suppressed.saturating_add(get(2));
        }
        Ok(m)
    }
}

impl RedisBroker {
    /// Redis' clock (unix ms), which the scheduler scripts stamp liveness and registrations
    /// with, so readers compare against the same clock.
    async fn redis_now_ms(&self) -> Result<i64, BrokerError> {
        let t: Vec<String> = self
            .inner
            .client
            .custom(
                fred::types::CustomCommand::new_static(
                    "TIME",
                    fred::types::ClusterHash::Random,
                    false,
                ),
                Vec::<String>::new(),
            )
            .await
            .map_err(store)?;
        let part = |i: usize| t.get(i).and_then(|s| s.parse::<i64>().ok());
        match (part(0), part(1)) {
            (Some(s), Some(us)) => Ok(s.saturating_mul(1000).saturating_add(us / 1000)),
            _ => Err(reply::bad("TIME", format!("unexpected reply {t:?}"))),
        }
    }
}

fn epoch_arg(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

pub(super) fn ttl_ms(ttl: Duration) -> Result<i64, BrokerError> {
    let ms = duration_ms(ttl);
    if ms <= 0 {
        return Err(BrokerError::InvalidDuration(ttl));
    }
    Ok(ms)
}

/// One line of a fire history, `<at ms> <code> <run_now 0|1> <task id>`; None for any other.
fn fire_line(line: &str) -> Option<FireRecord> {
    let mut cols = line.splitn(4, ' ');
    let at_ms = cols.next()?.parse::<i64>().ok()?;
    let code = cols.next()?.parse::<i64>().ok()?;
    let run_now = match cols.next()? {
        "1" => true,
        "0" => false,
        _ => return None,
    };
    let task_id = cols.next()?.to_string();
    // The code is the reply of the script that fired it.
    let outcome = if run_now {
        run_outcome(SchedRunCode::from_reply(code)?)?
    } else {
        fire_outcome(FireCode::from_reply(code)?)
    };
    Some(FireRecord {
        at_ms,
        outcome,
        run_now,
        task_id,
    })
}
