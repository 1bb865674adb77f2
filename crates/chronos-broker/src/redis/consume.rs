use std::time::Duration;

use fred::bytes::Bytes;
use fred::prelude::*;

use super::{client_builder, reply, RedisBroker, MAX_BLOCK};
use crate::{
    duration_ms, now_ms, BrokerError, Completion, Consume, DeadOutcome, DecodeError, Fetched,
    Lease, LeaseId, QueueName, TaskEnvelope, GROUP,
};

/// A connection reserved for blocking reads.
#[derive(Debug)]
pub struct RedisReader {
    client: Client,
}

/// `(entry id, fields)`; fields are None for an entry deleted while pending.
type Entries = Vec<(String, Option<Vec<(String, Bytes)>>)>;
/// None on a block timeout.
type ReadReply = Option<Vec<(String, Entries)>>;

impl Consume for RedisBroker {
    type Reader = RedisReader;

    async fn open_reader(&self) -> Result<RedisReader, BrokerError> {
        let client = client_builder(self.inner.client.client_config()).build()?;
        client.init().await?;
        Ok(RedisReader { client })
    }

    async fn close_reader(&self, reader: RedisReader) {
        let _ = reader.client.quit().await;
    }

    async fn ensure_queue(&self, queue: &QueueName) -> Result<(), BrokerError> {
        self.register_queue(queue).await
    }

    async fn fetch(
        &self,
        reader: &mut RedisReader,
        queue: &QueueName,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Fetched, BrokerError> {
        if block.is_zero() {
            return self.claim(queue, consumer, count).await;
        }
        let keys = self.queue_keys(queue);
        let block_ms = block.min(MAX_BLOCK).as_millis().max(1) as u64;
        let read = reader
            .client
            .xreadgroup::<ReadReply, _, _, _, _>(
                GROUP,
                consumer,
                Some(count.max(1) as u64),
                Some(block_ms),
                false,
                keys.stream(),
                ">",
            )
            .await;
        let streams = match read {
            Ok(r) => r.unwrap_or_default(),
            Err(e) if e.details().starts_with("NOGROUP") => return self.regroup(queue).await,
            Err(e) => return Err(e.into()),
        };
        let entries: Entries = streams.into_iter().flat_map(|(_, e)| e).collect();
        if entries.is_empty() {
            return Ok(Fetched::default());
        }
        let mut args: Vec<Value> = Vec::with_capacity(2 + 2 * entries.len());
        args.push(keys.prefix().into());
        args.push(GROUP.into());
        for (mid, fields) in &entries {
            let id = fields
                .as_ref()
                .and_then(|f| f.iter().find(|(k, _)| k == "i"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .unwrap_or("");
            args.push(mid.as_str().into());
            args.push(id.into());
        }
        let rows = self.run(|s| &s.activate, keys.stream(), args).await?;
        let mut fetched = Fetched::default();
        for ((mid, fields), row) in entries.into_iter().zip(reply::array(rows, "activate")?) {
            match row {
                Value::Array(cols) => {
                    // The envelope travels in the entry's `e` field; activate returns only what
                    // the hash adds (or a hash-held envelope, for tasks of the older layout).
                    let env = fields
                        .and_then(|f| f.into_iter().find(|(k, _)| k == "e"))
                        .map(|(_, v)| v);
                    fetched
                        .leases
                        .push(lease(queue, mid, cols.into_iter(), env)?)
                }
                _ => fetched.dropped += 1,
            }
        }
        Ok(fetched)
    }

    async fn complete(&self, queue: &QueueName, done: &[Completion]) -> Result<u64, BrokerError> {
        if done.is_empty() {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = Vec::with_capacity(3 + 3 * done.len());
        args.push(keys.prefix().into());
        args.push(GROUP.into());
        args.push(now_ms().into());
        for c in done {
            args.push(c.lease.task_id.as_str().into());
            args.push(c.lease.msg_id.as_str().into());
            args.push(c.retention.map(duration_ms).unwrap_or(0).into());
        }
        let n = self.run(|s| &s.complete, keys.stream(), args).await?;
        Ok(reply::int(&n, "complete")?.max(0) as u64)
    }

    async fn retry(
        &self,
        lease: &LeaseId,
        retry_at_ms: i64,
        error: &str,
    ) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let args: Vec<Value> = vec![
            keys.prefix().into(),
            GROUP.into(),
            now_ms().into(),
            lease.task_id.as_str().into(),
            lease.msg_id.as_str().into(),
            retry_at_ms.into(),
            error.into(),
        ];
        Ok(reply::int(&self.run(|s| &s.retry, keys.stream(), args).await?, "retry")? == 1)
    }

    async fn dead_letter(
        &self,
        lease: &LeaseId,
        error: &str,
        count_attempt: bool,
    ) -> Result<DeadOutcome, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let args: Vec<Value> = vec![
            keys.prefix().into(),
            GROUP.into(),
            now_ms().into(),
            lease.task_id.as_str().into(),
            lease.msg_id.as_str().into(),
            error.into(),
            reply::flag(count_attempt),
        ];
        Ok(
            match reply::int(&self.run(|s| &s.dead, keys.stream(), args).await?, "dead")? {
                1 => DeadOutcome::Archived,
                2 => DeadOutcome::Discarded,
                _ => DeadOutcome::Stale,
            },
        )
    }

    async fn requeue(&self, queue: &QueueName, leases: &[LeaseId]) -> Result<u64, BrokerError> {
        if leases.is_empty() {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = vec![keys.prefix().into(), GROUP.into()];
        for l in leases {
            args.push(l.task_id.as_str().into());
            args.push(l.msg_id.as_str().into());
        }
        let n = self.run(|s| &s.requeue, keys.stream(), args).await?;
        Ok(reply::int(&n, "requeue")?.max(0) as u64)
    }
}

impl RedisBroker {
    /// The non-blocking fetch: read and activate in one script call, one round trip per batch.
    async fn claim(
        &self,
        queue: &QueueName,
        consumer: &str,
        count: usize,
    ) -> Result<Fetched, BrokerError> {
        let keys = self.queue_keys(queue);
        let args: Vec<Value> = vec![
            keys.prefix().into(),
            GROUP.into(),
            consumer.into(),
            (count.max(1) as i64).into(),
        ];
        let rows = match self.run(|s| &s.claim, keys.stream(), args).await {
            Ok(v) => reply::array(v, "claim")?,
            Err(BrokerError::Redis(e)) if e.details().contains("NOGROUP") => {
                return self.regroup(queue).await
            }
            Err(e) => return Err(e),
        };
        let mut fetched = Fetched::default();
        for row in rows {
            let mut cols = reply::array(row, "claim")?.into_iter();
            let mid = reply::string(cols.next().unwrap_or(Value::Null), "claim")?;
            if cols.len() == 0 {
                fetched.dropped += 1;
            } else {
                fetched.leases.push(lease(queue, mid, cols, None)?);
            }
        }
        Ok(fetched)
    }

    /// Redis lost its data (a restart without persistence): recreate the group and go on.
    async fn regroup(&self, queue: &QueueName) -> Result<Fetched, BrokerError> {
        self.forget_queues();
        self.register_queue(queue).await?;
        Ok(Fetched::default())
    }
}

/// Builds a lease from a script row `task id, envelope, retried, last error, last failed at`.
/// An empty envelope column means "the envelope is in the stream entry": `entry_env`, the `e`
/// field the caller read with the entry (None when it has none, or did not read it).
fn lease(
    queue: &QueueName,
    msg_id: String,
    mut cols: impl Iterator<Item = Value>,
    entry_env: Option<Bytes>,
) -> Result<Lease, BrokerError> {
    let mut next = || cols.next().unwrap_or(Value::Null);
    let task_id = reply::string(next(), "fetch")?;
    let env = reply::bytes(next(), "fetch")?;
    let retried = reply::int(&next(), "fetch")?;
    let last_error = reply::opt_string(next(), "fetch")?;
    let failed_at = reply::int(&next(), "fetch")?;
    let env: &[u8] = match &entry_env {
        Some(e) if env.is_empty() => e,
        _ => &env,
    };
    let envelope = TaskEnvelope::decode(env).map(|mut e| {
        e.retried = u32::try_from(retried).unwrap_or(u32::MAX);
        e.last_error = last_error;
        e.last_failed_at_ms = (failed_at > 0).then_some(failed_at);
        e
    });
    Ok(Lease {
        id: LeaseId {
            queue: queue.clone(),
            task_id,
            msg_id,
        },
        envelope,
    })
}

/// Decodes an envelope returned by a script.
pub(super) fn decode_envelope(v: Value) -> Result<TaskEnvelope, DecodeError> {
    match v {
        Value::Bytes(b) => TaskEnvelope::decode(&b),
        Value::String(s) => TaskEnvelope::decode(s.as_bytes()),
        _ => Err(DecodeError::Empty),
    }
}
