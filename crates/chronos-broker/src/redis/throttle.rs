//! Rate and concurrency limits over Redis: permit.lua, permit_return.lua, permit_keep.lua and
//! admit.lua, each one call on the queue's slot.

use std::time::Duration;

use fred::prelude::*;
use tracing::warn;

use super::reply::AdmitCode;
use super::{lane, reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, Admission, BrokerError, KeyRate, Lease, LeaseId, PermitLimit, Permits,
    QueueBlocks, QueueName, Throttle, GROUP,
};

/// How long a permit receipt lives: longer than any re-send can come (commands time out after
/// 10 s).
const RECEIPT_TTL: Duration = Duration::from_secs(60);

/// Most deliveries per admit.lua call (two keys each; Lua's `unpack` has a limit).
const ADMIT_CHUNK: usize = 500;

impl Throttle for RedisBroker {
    async fn acquire_permits(
        &self,
        queue: &QueueName,
        holder: &str,
        want: usize,
        limit: &PermitLimit,
    ) -> Result<Permits, BrokerError> {
        let keys = self.queue_keys(queue);
        let nonce = format!("{:016x}", rand::random::<u64>());
        let prefix = format!("{holder}:{nonce}:");
        let (rate, period) = rate_args(limit);
        let args: Vec<Value> = vec![
            (want.min(100_000) as i64).into(),
            rate.into(),
            period.into(),
            i64::from(limit.burst.max(1)).into(),
            limit.concurrency.map_or(0, i64::from).into(),
            duration_ms(limit.token_ttl).max(1).into(),
            prefix.as_str().into(),
            nonce.as_str().into(),
            duration_ms(RECEIPT_TTL).into(),
            duration_ms(limit.poll).max(1).into(),
        ];
        let declared = vec![keys.rate(), keys.active(), keys.permit_receipt(holder)];
        let row = reply::array(self.run(|s| &s.permit, declared, args).await?, "permit")?;
        let granted = row
            .first()
            .map(|v| reply::int(v, "permit"))
            .transpose()?
            .unwrap_or(0)
            .max(0) as usize;
        let wait = row
            .get(1)
            .map(|v| reply::int(v, "permit"))
            .transpose()?
            .unwrap_or(0)
            .max(0) as u64;
        let tokens = if limit.concurrency.is_some() {
            (1..=granted).map(|i| format!("{prefix}{i}")).collect()
        } else {
            Vec::new()
        };
        Ok(Permits {
            granted,
            wait: Duration::from_millis(wait),
            tokens,
            grant: nonce,
        })
    }

    async fn return_permits(
        &self,
        queue: &QueueName,
        holder: &str,
        limit: &PermitLimit,
        grant: Option<(&str, usize)>,
        tokens: &[String],
    ) -> Result<u64, BrokerError> {
        let (nonce, back) = grant.unwrap_or(("", 0));
        let (rate, period) = rate_args(limit);
        if tokens.is_empty() && back == 0 {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let declared = vec![keys.rate(), keys.active(), keys.permit_receipt(holder)];
        let mut args: Vec<Value> = Vec::with_capacity(5 + tokens.len());
        args.push(nonce.into());
        args.push((back as i64).into());
        args.push(rate.into());
        args.push(period.into());
        args.push(duration_ms(RECEIPT_TTL).into());
        args.extend(tokens.iter().map(|t| Value::from(t.as_str())));
        let n = self.run(|s| &s.permit_return, declared, args).await?;
        Ok(reply::int(&n, "permit_return")?.max(0) as u64)
    }

    async fn keep_permits(
        &self,
        queue: &QueueName,
        tokens: &[String],
        ttl: Duration,
    ) -> Result<u64, BrokerError> {
        if tokens.is_empty() {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = Vec::with_capacity(1 + tokens.len());
        args.push(duration_ms(ttl).max(1).into());
        args.extend(tokens.iter().map(|t| Value::from(t.as_str())));
        let n = self
            .run(|s| &s.permit_keep, vec![keys.active()], args)
            .await?;
        Ok(reply::int(&n, "permit_keep")?.max(0) as u64)
    }

    async fn admit(
        &self,
        queue: &QueueName,
        deliveries: &[(LeaseId, String)],
        limit: &KeyRate,
    ) -> Result<Vec<Admission>, BrokerError> {
        // A key that cannot name a Redis key would fail the whole call, and with it every
        // delivery of the batch, again at every retry: such a delivery runs unkeyed instead.
        let (valid, bad): (Vec<usize>, Vec<usize>) = (0..deliveries.len())
            .partition(|&i| crate::keys::check_rate_key(&deliveries[i].1).is_ok());
        for &i in &bad {
            let (lease, key) = &deliveries[i];
            warn!(task_id = %lease.task_id, queue = %queue, key = %key.escape_debug(),
                "invalid rate key; the task runs without its per-key limit");
        }
        let checked: Vec<(LeaseId, String)> =
            valid.iter().map(|&i| deliveries[i].clone()).collect();
        let mut answers = Vec::with_capacity(checked.len());
        for part in checked.chunks(ADMIT_CHUNK) {
            answers.extend(self.admit_chunk(queue, part, limit).await?);
        }
        let mut out = vec![Admission::Run; deliveries.len()];
        for (i, a) in valid.into_iter().zip(answers) {
            out[i] = a;
        }
        Ok(out)
    }
}

/// The rate and period (ms) script arguments of `limit` (rate 0: none).
fn rate_args(limit: &PermitLimit) -> (i64, i64) {
    match limit.rate {
        Some((n, p)) => (i64::from(n), duration_ms(p).max(1)),
        None => (0, 1000),
    }
}

impl RedisBroker {
    /// The handler-signalled blocks of `queue` in force now (by Redis' clock): the queue's own
    /// and its blocked rate keys, soonest end first, at most `max_keys` of them, and today's
    /// count of blocks. A few reads, no SCAN; ended key blocks are skipped (backoff.lua trims
    /// them).
    pub async fn queue_blocks(
        &self,
        queue: &QueueName,
        max_keys: usize,
    ) -> Result<QueueBlocks, BrokerError> {
        let keys = self.queue_keys(queue);
        let client = &self.inner.client;
        let now = self.server_time_ms().await?;
        let queue_until: Option<String> = client
            .get(keys.queue_block())
            .await
            // A key of the wrong type blocks nothing (claim.lua reads it the same way).
            .unwrap_or(None);
        let queue_until_ms = queue_until
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|&e| e > now);
        let rows: Vec<(String, f64)> = client
            .zrangebyscore(
                keys.key_blocks(),
                format!("({now}"),
                "+inf",
                true,
                Some((0, max_keys.min(10_000) as i64)),
            )
            .await
            .unwrap_or_default();
        let today: Option<u64> = client
            .get(keys.throttled_day(now.div_euclid(crate::keys::DAY_MS)))
            .await
            .unwrap_or(None);
        Ok(QueueBlocks {
            queue_until_ms,
            keys: rows.into_iter().map(|(k, e)| (k, e as i64)).collect(),
            throttled_today: today.unwrap_or(0),
        })
    }

    /// Lifts a handler-signalled block at once: rate key `key`'s, or the queue's own when None.
    /// Tasks already held back stay scheduled until the time they were given (they are not
    /// pulled forward). True when a block was in place.
    pub async fn unblock(&self, queue: &QueueName, key: Option<&str>) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(queue);
        let client = &self.inner.client;
        let n: i64 = match key {
            None => client.del(keys.queue_block()).await.map_err(store)?,
            Some(k) => client.zrem(keys.key_blocks(), k).await.map_err(store)?,
        };
        if n > 0 {
            // Fetchers of a blocked queue sleep until its end (up to an hour): the queue's
            // settings signal wakes them to read again. A lost signal costs at most the
            // worker's recheck interval.
            self.signal_settings(queue).await?;
        }
        Ok(n > 0)
    }

    /// Holds back deliveries a blocking read took while their queue or their rate key is
    /// blocked (hold.lua): returns those to run. Costs one call (an `EVALSHA` and an `EXISTS`)
    /// per lane that delivered something. A failed call is logged and the deliveries run: a block set during a read is
    /// a race this narrows, and dropping the deliveries would strand them until recovery.
    pub(super) async fn hold(&self, queue: &QueueName, leases: Vec<Lease>) -> Vec<Lease> {
        if leases.is_empty() {
            return leases;
        }
        let keys = self.queue_keys(queue);
        let mut run = vec![true; leases.len()];
        for (level, idx) in lane::by_lane(leases.iter().map(|l| l.id.msg_id.as_str())) {
            let mut declared = Vec::with_capacity(3 + idx.len());
            declared.push(keys.lane(level));
            declared.push(keys.scheduled());
            declared.push(keys.queue_block());
            declared.push(keys.key_blocks());
            let mut args: Vec<Value> = Vec::with_capacity(1 + 3 * idx.len());
            args.push(GROUP.into());
            for &i in &idx {
                let id = &leases[i].id;
                // A key that is not valid was never blocked (back_off checks it).
                let key = leases[i]
                    .envelope
                    .as_ref()
                    .ok()
                    .and_then(|e| e.rate_key.as_deref())
                    .filter(|k| crate::keys::check_rate_key(k).is_ok())
                    .unwrap_or("");
                declared.push(keys.task(&id.task_id));
                args.push(id.task_id.as_str().into());
                args.push(lane::split(&id.msg_id).1.into());
                args.push(key.into());
            }
            if lane::is_tenant(level) {
                declared.extend(keys.tenants());
            }
            match self.event_stream(&keys).await {
                Ok(events) => declared.extend(events),
                Err(e) => {
                    warn!(queue = %queue, error = %e, "could not check the queue's block; running what was read");
                    continue;
                }
            }
            let rows = match self.run(|s| &s.hold, declared, args).await {
                Ok(v) => reply::array(v, "hold").unwrap_or_default(),
                Err(e) => {
                    warn!(queue = %queue, error = %e, "could not check the queue's block; running what was read");
                    continue;
                }
            };
            for (i, row) in idx.into_iter().zip(rows) {
                let code = reply::array(row, "hold")
                    .ok()
                    .and_then(|c| c.first().and_then(Value::as_i64));
                run[i] = matches!(
                    code.and_then(AdmitCode::from_reply),
                    Some(AdmitCode::Run) | None
                );
            }
        }
        leases
            .into_iter()
            .zip(run)
            .filter_map(|(l, r)| r.then_some(l))
            .collect()
    }

    async fn admit_chunk(
        &self,
        queue: &QueueName,
        deliveries: &[(LeaseId, String)],
        limit: &KeyRate,
    ) -> Result<Vec<Admission>, BrokerError> {
        let keys = self.queue_keys(queue);
        // One call per lane (a level's deliveries are entries of its own stream, lane.rs).
        let lanes = lane::by_lane(deliveries.iter().map(|(l, _)| l.msg_id.as_str()));
        if lanes.len() > 1 {
            let mut out = vec![Admission::Gone; deliveries.len()];
            for (_, idx) in lanes {
                let part: Vec<(LeaseId, String)> =
                    idx.iter().map(|&i| deliveries[i].clone()).collect();
                let got = Box::pin(self.admit_chunk(queue, &part, limit)).await?;
                for (i, a) in idx.into_iter().zip(got) {
                    out[i] = a;
                }
            }
            return Ok(out);
        }
        let level = lanes.first().and_then(|(l, _)| *l);
        let mut declared = Vec::with_capacity(2 + 2 * deliveries.len());
        declared.push(keys.lane(level));
        declared.push(keys.scheduled());
        declared.push(keys.key_blocks());
        let mut args: Vec<Value> = Vec::with_capacity(3 + 2 * deliveries.len());
        args.push(GROUP.into());
        // Rate 0: no per-key rate, blocks only (admit.lua).
        args.push(i64::from(limit.rate).into());
        args.push(duration_ms(limit.period).max(1).into());
        for (lease, key) in deliveries {
            crate::keys::check_rate_key(key)?;
            declared.push(keys.task(&lease.task_id));
            declared.push(keys.rate_key(key));
            args.push(lease.task_id.as_str().into());
            args.push(lane::split(&lease.msg_id).1.into());
            args.push(key.as_str().into());
        }
        if lane::is_tenant(level) {
            declared.extend(keys.tenants());
        }
        declared.extend(self.event_stream(&keys).await?);
        let rows = reply::array(self.run(|s| &s.admit, declared, args).await?, "admit")?;
        if rows.len() != deliveries.len() {
            return Err(reply::bad(
                "admit",
                format!("{} rows for {} deliveries", rows.len(), deliveries.len()),
            ));
        }
        rows.into_iter()
            .map(|row| {
                let cols = reply::array(row, "admit")?;
                let code = cols.first().map(|v| reply::int(v, "admit")).transpose()?;
                Ok(match code.and_then(AdmitCode::from_reply) {
                    Some(AdmitCode::Run) => Admission::Run,
                    Some(AdmitCode::Deferred) => Admission::Deferred {
                        due_ms: cols
                            .get(1)
                            .map(|v| reply::int(v, "admit"))
                            .transpose()?
                            .unwrap_or(0),
                    },
                    Some(AdmitCode::Gone) | None => Admission::Gone,
                })
            })
            .collect()
    }
}
