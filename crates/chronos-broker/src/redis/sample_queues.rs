//! Queue gauges over Redis: the counts script and the tenants script (sent together), and for
//! a queue with pending tasks two stream reads (O(1) and O(log n)) and `TIME`.

use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::RedisBroker;
use crate::redis::store::store;
use crate::GROUP;
use crate::{
    now_ms, BrokerError, Coordinate, Inspect, QueueName, QueueSample, SampleQueues, TenantPage,
    TenantSample, SAMPLED_TENANTS,
};

/// Tenants a sample reads one by one to find the oldest waiting task among those it sums
/// ([`QueueSample::other_tenants`]): the tenants script returns each listed tenant's oldest
/// task, but none over the rest. Past this many the sum's age covers the busiest of them only;
/// the counts are always exact. The script reads the busiest from the queue's load set, so a
/// sample costs O(this) reads however many tenants the queue has (issue 35, 2.11).
const TENANTS_READ: usize = 1_000;

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
        let (stats, tenants) = futures::try_join!(
            self.queue_stats(queue),
            self.tenant_page(queue, TENANTS_READ, false)
        )?;
        let (tenants, other_tenants) = tenant_samples(&tenants);
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
            tenants,
            other_tenants,
        })
    }
}

/// The [`SAMPLED_TENANTS`] busiest tenants of `page`, and the sum of the others (counts from
/// the page's totals, the oldest task from the rows read).
fn tenant_samples(page: &TenantPage) -> (Vec<TenantSample>, Option<TenantSample>) {
    let one = |t: &crate::TenantStats| TenantSample {
        tenant: t.tenant.clone(),
        tenants: 1,
        waiting: t.waiting,
        running: t.running,
        oldest_ms: t.oldest_ms,
    };
    let top: Vec<TenantSample> = page.tenants.iter().take(SAMPLED_TENANTS).map(one).collect();
    let rest = page.total.saturating_sub(top.len() as u64);
    if rest == 0 {
        return (top, None);
    }
    let sum = |f: fn(&TenantSample) -> u64| top.iter().map(f).sum::<u64>();
    let other = TenantSample {
        tenant: String::new(),
        tenants: rest,
        waiting: page.waiting.saturating_sub(sum(|t| t.waiting)),
        running: page.running.saturating_sub(sum(|t| t.running)),
        oldest_ms: page
            .tenants
            .iter()
            .skip(SAMPLED_TENANTS)
            .filter_map(|t| t.oldest_ms)
            .min(),
    };
    (top, Some(other))
}

impl RedisBroker {
    /// `<ns>:sampler`: the metrics sampler's lease (a string holding the holder's id, with a TTL).
    fn sampler_key(&self) -> String {
        format!("{}:sampler", self.inner.keys.namespace())
    }

    /// Redis' clock, the one stream entry ids are stamped with.
    pub(super) async fn server_time_ms(&self) -> Result<i64, BrokerError> {
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
