use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::lease::decode_envelope;
use super::protocol::UNIQUE;
use super::record::Record;
use super::{lane, reply, RedisBroker};
use crate::keys::DAY_MS;
use crate::redis::store::{says, store};
use crate::{
    duration_ms, now_ms, BrokerError, DeadTask, Forwarded, HistoryCounter, Maintain,
    ProgressUpdate, QueueKeys, QueueName, Reclaimed, ServerRecord, Signals, GROUP,
};

/// How long the reclaim outbox outlives its last write: as long as a group's default TTL, so
/// a member dead-lettered while no recoverer runs is still counted when one comes back in time
/// to matter, while an outbox nobody drains (a queue no server consumes any more) goes away.
const OUTBOX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl Maintain for RedisBroker {
    async fn forward_due(&self, queue: &QueueName, limit: usize) -> Result<u64, BrokerError> {
        Ok(self.forward_due_next(queue, limit).await?.moved)
    }

    async fn forward_due_next(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> Result<Forwarded, BrokerError> {
        let keys = self.queue_keys(queue);
        let (scheduled, retry, next) = self.due(&keys, "f", limit, Duration::ZERO, 0).await?;
        // Ms until the earliest task left is due, -1 when none is left.
        let next = match next {
            Some(v) => Some(reply::int(&v, "due")?).filter(|&ms| ms >= 0),
            None => None,
        };
        let next = next.map(|ms| Duration::from_millis(ms.max(0) as u64));
        if scheduled.is_empty() && retry.is_empty() {
            return Ok(Forwarded { moved: 0, next });
        }
        let mut declared = vec![keys.stream(), keys.scheduled(), keys.retry()];
        let mut args: Vec<Value> = Vec::new();
        for (set, ids) in [("s", scheduled), ("r", retry)] {
            for id in ids {
                declared.push(keys.task(&id));
                args.push(set.into());
                args.push(id.into());
            }
        }
        declared.extend(keys.lanes());
        declared.push(keys.settings());
        declared.extend(keys.tenants());
        declared.extend(self.event_stream(&keys).await?);
        let n = self.run(|s| &s.forward, declared, args).await?;
        // `next` was read before this move, from sets that still held what it moved: a task
        // added between the two calls, due before those (a retry of no delay), pushed no
        // wake-up (lib.lua `wake` compares with the set's first member), and is not in `next`
        // either. So a pass that moved something is followed by another, which reads the sets
        // as they are now.
        Ok(Forwarded {
            moved: reply::int(&n, "forward")?.max(0) as u64,
            next: Some(Duration::ZERO),
        })
    }

    async fn signals(&self) -> Result<Option<Signals>, BrokerError> {
        Ok(Some(self.subscribe_signals().await?))
    }

    async fn reclaim_idle(
        &self,
        queue: &QueueName,
        min_idle: Duration,
        limit: usize,
    ) -> Result<Reclaimed, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut out = Reclaimed::default();
        // The main stream, then each level's and the tenants' streams, as the queue's level
        // hash lists them now: not what this process's fetches last saw, which a blocked
        // queue's or a re-sent call's answer does not say, and which a recoverer that never
        // fetched this queue does not know.
        let mut lanes = vec![None];
        let fields: Vec<String> = self
            .inner
            .client
            .hkeys(keys.levels())
            .await
            .map_err(store)?;
        let mut levels: Vec<u8> = fields.iter().filter_map(|f| f.parse().ok()).collect();
        levels.sort_unstable();
        lanes.extend(levels.into_iter().map(Some));
        for level in lanes {
            self.reclaim_lane(&keys, level, min_idle, limit, &mut out)
                .await?;
        }
        Ok(out)
    }

    async fn keep_alive(
        &self,
        queue: &QueueName,
        consumer: &str,
        msg_ids: &[String],
        updates: &[ProgressUpdate],
    ) -> Result<Vec<String>, BrokerError> {
        self.beat(queue, consumer, msg_ids, updates).await
    }

    async fn trim(
        &self,
        queue: &QueueName,
        archive_max_age: Duration,
        archive_max_len: u64,
        limit: usize,
    ) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let max_len = i64::try_from(archive_max_len).unwrap_or(i64::MAX);
        let (completed, archived, rest) = self
            .due(&keys, "j", limit, archive_max_age, max_len)
            .await?;
        let cancelled = ids_of(rest.unwrap_or(Value::Null))?;
        if completed.is_empty() && archived.is_empty() && cancelled.is_empty() {
            return Ok(0);
        }
        let mut declared = vec![keys.completed(), keys.archived()];
        let mut args: Vec<Value> = vec![duration_ms(archive_max_age).into(), max_len.into()];
        for (set, ids) in [("c", completed), ("a", archived), ("x", cancelled)] {
            for id in ids {
                declared.push(keys.task(&id));
                args.push(set.into());
                args.push(id.into());
            }
        }
        declared.push(keys.cancelled());
        let n = self.run(|s| &s.janitor, declared, args).await?;
        Ok(reply::int(&n, "janitor")?.max(0) as u64)
    }

    async fn consumers(&self, queue: &QueueName) -> Result<Vec<(String, u64, u64)>, BrokerError> {
        // Every lane's group: a consumer's deliveries of every level are summed, and its idle
        // time is its least idle lane's.
        let keys = self.queue_keys(queue);
        let mut out: Vec<(String, u64, u64)> = Vec::new();
        for level in self.lane_order(&keys).await? {
            for (name, pending, idle) in self.lane_consumers(&keys.lane(level)).await? {
                // The tenant stream's parking consumer holds waiting tasks, not deliveries.
                if name == super::protocol::TENANT_PARK {
                    continue;
                }
                match out.iter_mut().find(|(n, _, _)| *n == name) {
                    Some(c) => {
                        c.1 += pending;
                        c.2 = c.2.min(idle);
                    }
                    None => out.push((name, pending, idle)),
                }
            }
        }
        Ok(out)
    }

    async fn record_timings(
        &self,
        queue: &QueueName,
        deltas: &[crate::TimingDelta],
    ) -> Result<(), BrokerError> {
        self.write_timings(queue, deltas).await
    }

    async fn publish_server(
        &self,
        record: &ServerRecord,
        ttl: Duration,
    ) -> Result<(), BrokerError> {
        let ms = ttl_ms(ttl)?;
        let bytes = record
            .encode()
            .map_err(|e| BrokerError::Encode(e.to_string()))?;
        let keys = &self.inner.keys;
        let _: () = self
            .inner
            .client
            .set(
                keys.server(&record.id),
                Value::Bytes(bytes.into()),
                Some(Expiration::PX(ms)),
                None,
                false,
            )
            .await
            .map_err(store)?;
        let expires = (now_ms() + ms) as f64;
        let _: i64 = self
            .inner
            .client
            .zadd(
                keys.servers(),
                None,
                None,
                false,
                false,
                (expires, record.id.as_str()),
            )
            .await
            .map_err(store)?;
        Ok(())
    }

    async fn cancel_requested(
        &self,
        queue: &QueueName,
        msg_ids: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        self.cancel_requests(queue, msg_ids).await
    }

    async fn remove_server(&self, id: &str) -> Result<(), BrokerError> {
        let keys = &self.inner.keys;
        let _: i64 = self
            .inner
            .client
            .del(keys.server(id))
            .await
            .map_err(store)?;
        let _: i64 = self
            .inner
            .client
            .zrem(keys.servers(), id)
            .await
            .map_err(store)?;
        Ok(())
    }

    async fn remove_consumer(
        &self,
        queue: &QueueName,
        consumer: &str,
    ) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(queue);
        let lanes = self.lane_order(&keys).await?;
        // Kept while it holds a delivery of any level (each lane's script checks its own
        // again, atomically); then removed from every level's group.
        if lanes.len() > 1 {
            for level in &lanes {
                let stream = keys.lane(*level);
                if self
                    .lane_consumers(&stream)
                    .await?
                    .iter()
                    .any(|(n, pending, _)| n == consumer && *pending > 0)
                {
                    return Ok(false);
                }
            }
        }
        let mut removed = false;
        for level in lanes {
            let args: Vec<Value> = vec![GROUP.into(), consumer.into()];
            let mut declared = vec![keys.lane(level)];
            if level.is_none() {
                // The counts its receipt still owes are paid as it goes (drop_consumer.lua).
                let day = now_ms().div_euclid(DAY_MS);
                declared.extend([
                    keys.receipt(consumer),
                    keys.processed(),
                    keys.history_minutes(HistoryCounter::Processed, day),
                    keys.history_day(HistoryCounter::Processed, day),
                ]);
            }
            let n = self.run(|s| &s.drop_consumer, declared, args).await?;
            if level.is_none() {
                removed = reply::int(&n, "drop_consumer")? == 1;
            }
        }
        Ok(removed)
    }

    async fn reclaimed_dead(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> Result<Vec<DeadTask>, BrokerError> {
        // One HSCAN step, going on from where the last read of this queue's outbox ended: the
        // caller removes what it handled, and entries it cannot handle yet (a group report
        // failing) must not be all that every pass sees. A small outbox (the usual case) comes
        // back whole from cursor 0.
        let cursor = self
            .inner
            .outbox_cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(queue)
            .cloned()
            .unwrap_or_else(|| "0".to_string());
        let cmd = CustomCommand::new_static("HSCAN", ClusterHash::FirstKey, false);
        let args: Vec<Value> = vec![
            self.queue_keys(queue).reclaimed().into(),
            cursor.into(),
            "COUNT".into(),
            i64::try_from(limit.clamp(1, 10_000)).unwrap_or(1000).into(),
        ];
        let reply = reply::array(
            self.inner.client.custom(cmd, args).await.map_err(store)?,
            "hscan",
        )?;
        let mut reply = reply.into_iter();
        let next = reply::string(reply.next().unwrap_or(Value::Null), "hscan")?;
        self.inner
            .outbox_cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue.clone(), next);
        let flat = reply::array(reply.next().unwrap_or(Value::Null), "hscan")?;
        let mut out = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let task_id = reply::string(k, "hscan")?;
            let v = reply::bytes(v, "hscan")?;
            let (discarded, env) = match v.split_first() {
                Some((flag, env)) => (*flag == b'1', env),
                None => (false, &[][..]),
            };
            let envelope = if env.is_empty() {
                Err(crate::DecodeError::Empty)
            } else {
                crate::TaskEnvelope::decode(env).map(|e| e.with_id(&task_id))
            };
            out.push(DeadTask {
                task_id,
                envelope,
                discarded,
            });
        }
        Ok(out)
    }

    async fn ack_reclaimed(
        &self,
        queue: &QueueName,
        task_ids: &[String],
    ) -> Result<u64, BrokerError> {
        if task_ids.is_empty() {
            return Ok(0);
        }
        let key = self.queue_keys(queue).reclaimed();
        let mut n = 0;
        for part in task_ids.chunks(1000) {
            let got: i64 = self
                .inner
                .client
                .hdel(&key, part.to_vec())
                .await
                .map_err(store)?;
            n += got.max(0) as u64;
        }
        Ok(n)
    }
}

/// A list of ids in a reply of due.lua.
fn ids_of(list: Value) -> Result<Vec<String>, BrokerError> {
    if list.is_null() {
        return Ok(Vec::new());
    }
    reply::array(list, "due")?
        .into_iter()
        .map(|v| reply::string(v, "due"))
        .collect()
}

impl RedisBroker {
    /// What is due in one queue by Redis's clock (due.lua): for `which` = "f" the due scheduled
    /// and retry ids and the ms until the next is due (an int), for "j" the expired retained
    /// ids, the archived ids to trim and the cancelled ids to trim (a list).
    async fn due(
        &self,
        keys: &QueueKeys,
        which: &str,
        limit: usize,
        max_age: Duration,
        max_len: i64,
    ) -> Result<(Vec<String>, Vec<String>, Option<Value>), BrokerError> {
        let declared = vec![
            keys.scheduled(),
            keys.retry(),
            keys.completed(),
            keys.archived(),
            keys.cancelled(),
        ];
        let args: Vec<Value> = vec![
            (limit.max(1) as i64).into(),
            duration_ms(max_age).into(),
            max_len.into(),
            which.into(),
        ];
        let mut lists =
            reply::array(self.run(|s| &s.due, declared, args).await?, "due")?.into_iter();
        let a = ids_of(lists.next().unwrap_or(Value::Null))?;
        let b = ids_of(lists.next().unwrap_or(Value::Null))?;
        Ok((a, b, lists.next()))
    }

    /// [`Maintain::reclaim_idle`] on one lane of the queue (`level`'s stream; None: the main
    /// one): up to `limit` of its idle deliveries, added to `out`.
    async fn reclaim_lane(
        &self,
        keys: &QueueKeys,
        level: Option<u8>,
        min_idle: Duration,
        limit: usize,
        out: &mut Reclaimed,
    ) -> Result<(), BrokerError> {
        let stream = keys.lane(level);
        let tenant = lane::is_tenant(level);
        // One plain command decides the usual case, nothing idle: the script's page (XPENDING
        // again plus a lookup per entry) runs only when something is. Not on the tenant
        // stream, whose parked entries (waiting tasks) are always idle: idle.lua skips them.
        let probe = CustomCommand::new_static("XPENDING", ClusterHash::FirstKey, false);
        let args: Vec<Value> = vec![
            stream.as_str().into(),
            GROUP.into(),
            "IDLE".into(),
            duration_ms(min_idle).into(),
            "-".into(),
            "+".into(),
            1.into(),
        ];
        if !tenant {
            match self.inner.client.custom::<Value, _>(probe, args).await {
                Ok(v) => {
                    if reply::array(v, "xpending")?.is_empty() {
                        return Ok(());
                    }
                }
                Err(e) if e.details().contains("NOGROUP") => return Ok(()),
                Err(e) => return Err(store(e)),
            }
        }
        let mut from = "-".to_string();
        let mut left = limit.max(1);
        // Pages of at most 100: each script call holds Redis for well under a millisecond.
        while left > 0 {
            let page = left.min(100);
            let args: Vec<Value> = vec![
                GROUP.into(),
                duration_ms(min_idle).into(),
                (page as i64).into(),
                from.as_str().into(),
                reply::flag(tenant),
            ];
            let listed = match self.run(|s| &s.idle, stream.as_str(), args).await {
                Err(e) if says(&e, "NOGROUP") => return Ok(()),
                other => reply::array(other?, "idle")?,
            };
            let n = listed.len();
            let mut idle = Vec::with_capacity(n);
            for row in listed {
                let mut cols = reply::array(row, "idle")?.into_iter();
                let mid = reply::string(cols.next().unwrap_or(Value::Null), "idle")?;
                // An id that is not text cannot be a task of ours: reclaim.lua drops its entry.
                let id =
                    reply::string(cols.next().unwrap_or(Value::Null), "idle").unwrap_or_default();
                idle.push((mid, id));
            }
            let Some((last, _)) = idle.last() else {
                return Ok(());
            };
            from = format!("({last}");
            self.reclaim_page(keys, level, min_idle, idle, out).await?;
            left = left.saturating_sub(n);
            if n < page {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Reclaims one page of idle deliveries (reclaim.lua), declaring each task's hash, its
    /// unique lock as read from the hash just before, and its done marker.
    async fn reclaim_page(
        &self,
        keys: &QueueKeys,
        level: Option<u8>,
        min_idle: Duration,
        idle: Vec<(String, String)>,
        out: &mut Reclaimed,
    ) -> Result<(), BrokerError> {
        let locks = futures::future::join_all(idle.iter().map(|(_, id)| async move {
            if id.is_empty() {
                return None;
            }
            let rec = Record::read(&self.inner.client, keys.task(id), &[UNIQUE])
                .await
                .ok()?;
            rec.text(UNIQUE, "reclaim")
                .ok()
                .flatten()
                .filter(|k| keys.owns(k))
        }))
        .await;
        let stream = keys.lane(level);
        let mut declared = vec![stream.clone(), keys.archived(), keys.failed()];
        declared.extend(super::settle::failed_history(keys));
        declared.push(keys.reclaimed());
        let mut args: Vec<Value> = vec![
            GROUP.into(),
            duration_ms(min_idle).into(),
            duration_ms(self.inner.idempotency_window).into(),
            duration_ms(OUTBOX_TTL).into(),
        ];
        for ((mid, id), lock) in idle.into_iter().zip(locks) {
            // An entry without a task id still needs three key slots; it names the stream again.
            let (tkey, dkey) = if id.is_empty() {
                (stream.clone(), stream.clone())
            } else {
                (keys.task(&id), keys.done(&id))
            };
            declared.push(tkey.clone());
            declared.push(lock.unwrap_or(tkey));
            declared.push(dkey);
            args.push(mid.into());
            args.push(id.into());
        }
        if lane::is_tenant(level) {
            declared.extend(keys.tenants());
        }
        declared.extend(self.event_stream(keys).await?);
        let res = self.run(|s| &s.reclaim, declared, args).await?;
        let mut parts = reply::array(res, "reclaim")?.into_iter();
        out.requeued += reply::int(&parts.next().unwrap_or(Value::Null), "reclaim")?.max(0) as u64;
        for d in reply::array(parts.next().unwrap_or(Value::Null), "reclaim")? {
            let mut cols = reply::array(d, "reclaim")?.into_iter();
            let task_id = reply::string(cols.next().unwrap_or(Value::Null), "reclaim")?;
            let envelope =
                decode_envelope(cols.next().unwrap_or(Value::Null)).map(|e| e.with_id(&task_id));
            let discarded = reply::string(cols.next().unwrap_or(Value::Null), "reclaim")? == "1";
            out.dead.push(DeadTask {
                task_id,
                envelope,
                discarded,
            });
        }
        Ok(())
    }
}

pub(super) fn ttl_ms(ttl: Duration) -> Result<i64, BrokerError> {
    let ms = duration_ms(ttl);
    if ms <= 0 {
        return Err(BrokerError::InvalidDuration(ttl));
    }
    Ok(ms)
}

impl RedisBroker {
    /// `(name, pending, idle ms)` of each consumer of the group of one stream.
    async fn lane_consumers(&self, stream: &str) -> Result<Vec<(String, u64, u64)>, BrokerError> {
        let v: Value = match self.inner.client.xinfo_consumers(stream, GROUP).await {
            Ok(v) => v,
            Err(e) if e.details().contains("NOGROUP") || e.details().contains("no such key") => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(store(e)),
        };
        let mut out = Vec::new();
        for c in reply::array(v, "xinfo consumers")? {
            let (mut name, mut pending, mut idle) = (String::new(), 0u64, 0u64);
            let fields = c.into_array();
            for pair in fields.chunks(2) {
                if let [k, v] = pair {
                    match k.as_str().as_deref() {
                        Some("name") => {
                            name = v.as_str().map(|s| s.to_string()).unwrap_or_default()
                        }
                        Some("pending") => pending = v.as_i64().unwrap_or(0).max(0) as u64,
                        Some("idle") => idle = v.as_i64().unwrap_or(0).max(0) as u64,
                        _ => {}
                    }
                }
            }
            out.push((name, pending, idle));
        }
        Ok(out)
    }
}
