use std::time::Duration;

use fred::prelude::*;

use super::consume::decode_envelope;
use super::{reply, RedisBroker};
use crate::{
    duration_ms, now_ms, BrokerError, Coordinate, DeadTask, Maintain, QueueName, Reclaimed,
    ServerRecord, GROUP,
};

/// The consumer the recoverer claims into; it never keeps anything pending.
const RECOVERER: &str = "recoverer";

impl Maintain for RedisBroker {
    async fn forward_due(
        &self,
        queue: &QueueName,
        now_ms: i64,
        limit: usize,
    ) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let args: Vec<Value> = vec![
            keys.prefix().into(),
            now_ms.into(),
            (limit.max(1) as i64).into(),
        ];
        let n = self.run(|s| &s.forward, keys.stream(), args).await?;
        Ok(reply::int(&n, "forward")?.max(0) as u64)
    }

    async fn reclaim_idle(
        &self,
        queue: &QueueName,
        min_idle: Duration,
        limit: usize,
    ) -> Result<Reclaimed, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut out = Reclaimed::default();
        let mut cursor = "0-0".to_string();
        let mut scanned = 0usize;
        // XAUTOCLAIM scans the PEL in pages; stop after `limit` entries or a full pass.
        loop {
            let args: Vec<Value> = vec![
                keys.prefix().into(),
                GROUP.into(),
                RECOVERER.into(),
                duration_ms(min_idle).into(),
                cursor.as_str().into(),
                (limit.clamp(1, 100) as i64).into(),
                now_ms().into(),
            ];
            let res = match self.run(|s| &s.reclaim, keys.stream(), args).await {
                Err(BrokerError::Redis(e)) if e.details().contains("NOGROUP") => return Ok(out),
                other => other?,
            };
            let mut parts = reply::array(res, "reclaim")?.into_iter();
            cursor = reply::string(parts.next().unwrap_or(Value::Null), "reclaim")?;
            out.requeued +=
                reply::int(&parts.next().unwrap_or(Value::Null), "reclaim")?.max(0) as u64;
            for d in reply::array(parts.next().unwrap_or(Value::Null), "reclaim")? {
                let mut cols = reply::array(d, "reclaim")?.into_iter();
                let task_id = reply::string(cols.next().unwrap_or(Value::Null), "reclaim")?;
                let envelope = decode_envelope(cols.next().unwrap_or(Value::Null));
                let discarded =
                    reply::string(cols.next().unwrap_or(Value::Null), "reclaim")? == "1";
                out.dead.push(DeadTask {
                    task_id,
                    envelope,
                    discarded,
                });
            }
            scanned += limit.clamp(1, 100);
            if cursor == "0-0" || scanned >= limit {
                return Ok(out);
            }
        }
    }

    async fn extend_leases(
        &self,
        queue: &QueueName,
        consumer: &str,
        msg_ids: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        if msg_ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = vec![GROUP.into(), consumer.into()];
        args.extend(msg_ids.iter().map(|m| Value::from(m.as_str())));
        let owned = reply::array(
            self.run(|s| &s.heartbeat, keys.stream(), args).await?,
            "heartbeat",
        )?;
        owned
            .into_iter()
            .map(|v| reply::string(v, "heartbeat"))
            .collect()
    }

    async fn trim(
        &self,
        queue: &QueueName,
        archive_max_age: Duration,
        archive_max_len: u64,
        limit: usize,
    ) -> Result<u64, BrokerError> {
        let keys = self.queue_keys(queue);
        let args: Vec<Value> = vec![
            keys.prefix().into(),
            now_ms().into(),
            duration_ms(archive_max_age).into(),
            i64::try_from(archive_max_len).unwrap_or(i64::MAX).into(),
            (limit.max(1) as i64).into(),
        ];
        let n = self.run(|s| &s.janitor, keys.stream(), args).await?;
        Ok(reply::int(&n, "janitor")?.max(0) as u64)
    }

    async fn consumers(&self, queue: &QueueName) -> Result<Vec<(String, u64, u64)>, BrokerError> {
        let stream = self.queue_keys(queue).stream();
        let v: Value = match self.inner.client.xinfo_consumers(stream, GROUP).await {
            Ok(v) => v,
            Err(e) if e.details().contains("NOGROUP") || e.details().contains("no such key") => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(e.into()),
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
            .await?;
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
            .await?;
        Ok(())
    }

    async fn remove_server(&self, id: &str) -> Result<(), BrokerError> {
        let keys = &self.inner.keys;
        let _: i64 = self.inner.client.del(keys.server(id)).await?;
        let _: i64 = self.inner.client.zrem(keys.servers(), id).await?;
        Ok(())
    }

    async fn remove_consumer(
        &self,
        queue: &QueueName,
        consumer: &str,
    ) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(queue);
        let args: Vec<Value> = vec![GROUP.into(), consumer.into()];
        let n = self.run(|s| &s.drop_consumer, keys.stream(), args).await?;
        Ok(reply::int(&n, "drop_consumer")? == 1)
    }
}

impl Coordinate for RedisBroker {
    async fn try_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let ms = ttl_ms(ttl)?;
        let got: Option<String> = self
            .inner
            .client
            .set(
                key,
                token,
                Some(Expiration::PX(ms)),
                Some(SetOptions::NX),
                false,
            )
            .await?;
        Ok(got.is_some())
    }

    async fn renew_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), ttl_ms(ttl)?.into()];
        let n = self.run(|s| &s.lock_renew, key.to_string(), args).await?;
        Ok(reply::int(&n, "lock_renew")? == 1)
    }

    async fn release_lock(
        &self,
        key: &str,
        token: &str,
        channel: Option<&str>,
    ) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), channel.unwrap_or("").into()];
        let n = self.run(|s| &s.lock_release, key.to_string(), args).await?;
        Ok(reply::int(&n, "lock_release")? == 1)
    }
}

fn ttl_ms(ttl: Duration) -> Result<i64, BrokerError> {
    let ms = duration_ms(ttl);
    if ms <= 0 {
        return Err(BrokerError::InvalidDuration(ttl));
    }
    Ok(ms)
}
