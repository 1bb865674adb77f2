//! Queue gauges over Redis: the counts script, and for a queue with pending tasks two stream
//! reads (O(1) and O(log n)) and `TIME`.

use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::RedisBroker;
use crate::redis::store::store;
use crate::GROUP;
use crate::{now_ms, BrokerError, Coordinate, Inspect, QueueName, QueueSample, SampleQueues};

impl SampleQueues for RedisBroker {
    async fn sampler_lease(&self, holder: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let key = self.sampler_key();
        // Renew first: the holder keeps its lease through every period without a gap.
        if self.renew_lock(&key, holder, ttl).await? {
            return Ok(true);
        }
        self.try_lock(&key, holder, ttl).await
    }

    async fn release_sampler_lease(&self, holder: &str) -> Result<(), BrokerError> {
        self.release_lock(&self.sampler_key(), holder, None)
            .await
            .map(|_| ())
    }

    async fn sample_queue(&self, queue: &QueueName) -> Result<QueueSample, BrokerError> {
        let stats = self.queue_stats(queue).await?;
        // Redis' clock only when there is an age to measure with it: an idle queue costs one
        // script call per sample.
        let (oldest_pending_ms, sampled_at_ms) = if stats.pending > 0 {
            let now = self.server_time_ms().await.unwrap_or_else(|_| now_ms());
            // With levels, each level's oldest waiting task came with the counts.
            let oldest = if stats.levels.is_empty() {
                self.oldest_pending_ms(queue).await?
            } else {
                stats
                    .levels
                    .iter()
                    .filter_map(|l| l.oldest_pending_ms)
                    .max()
                    .map(|age| now.saturating_sub(i64::try_from(age).unwrap_or(i64::MAX)))
            };
            (oldest, now)
        } else {
            (None, now_ms())
        };
        Ok(QueueSample {
            stats,
            oldest_pending_ms,
            sampled_at_ms,
        })
    }
}

impl RedisBroker {
    /// `<ns>:sampler`: the metrics sampler's lease (a string holding the holder's id, with a TTL).
    fn sampler_key(&self) -> String {
        format!("{}:sampler", self.inner.keys.namespace())
    }

    /// Redis' clock, the one stream entry ids are stamped with.
    async fn server_time_ms(&self) -> Result<i64, BrokerError> {
        let cmd = CustomCommand::new_static("TIME", ClusterHash::Random, false);
        let t: Vec<String> = self
            .inner
            .client
            .custom(cmd, Vec::<String>::new())
            .await
            .map_err(store)?;
        let secs: i64 = t.first().and_then(|s| s.parse().ok()).unwrap_or(0);
        let micros: i64 = t.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if secs == 0 {
            return Ok(now_ms());
        }
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
    }

    /// When the first entry the group has not delivered yet was added (the millisecond part of
    /// its id, which Redis stamps at XADD: enqueue, forward or requeue, so the age counts from
    /// when the task became ready). Two reads whatever the stream's length: the group's last
    /// delivered id, then one entry after it.
    async fn oldest_pending_ms(&self, queue: &QueueName) -> Result<Option<i64>, BrokerError> {
        let stream = self.queue_keys(queue).stream();
        let groups: Value = match self.inner.client.xinfo_groups(stream.as_str()).await {
            Ok(v) => v,
            // No stream or no group yet: nothing has been delivered, and nothing is pending.
            Err(e) if e.details().contains("no such key") => return Ok(None),
            Err(e) => return Err(store(e)),
        };
        let last = last_delivered(groups).unwrap_or_else(|| "0-0".to_string());
        let after = format!("({last}");
        let first: Vec<(String, Value)> = self
            .inner
            .client
            .xrange(stream.as_str(), after.as_str(), "+", Some(1))
            .await
            .map_err(store)?;
        Ok(first
            .first()
            .and_then(|(id, _)| id.split('-').next())
            .and_then(|ms| ms.parse().ok()))
    }
}

/// The `last-delivered-id` of the workers' group in an `XINFO GROUPS` reply (RESP2: an array
/// of flat field/value arrays; RESP3: an array of maps).
fn last_delivered(groups: Value) -> Option<String> {
    let Value::Array(groups) = groups else {
        return None;
    };
    for g in groups {
        let pairs: Vec<(String, Value)> = match g {
            Value::Array(flat) => {
                let mut out = Vec::new();
                let mut it = flat.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    if let Some(k) = k.as_string() {
                        out.push((k, v));
                    }
                }
                out
            }
            Value::Map(m) => m
                .inner()
                .into_iter()
                .filter_map(|(k, v)| k.as_str().map(|k| (k.to_string(), v)))
                .collect(),
            _ => continue,
        };
        let field = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_string())
        };
        if field("name").as_deref() == Some(GROUP) {
            return field("last-delivered-id");
        }
    }
    None
}
