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
        let keys = self.queue_keys(queue);
        // Zero means a plain read that returns at once; otherwise block, capped at MAX_BLOCK.
        let block_ms = (!block.is_zero()).then(|| block.min(MAX_BLOCK).as_millis().max(1) as u64);
        let read = reader
            .client
            .xreadgroup::<ReadReply, _, _, _, _>(
                GROUP,
                consumer,
                Some(count.max(1) as u64),
                block_ms,
                false,
                keys.stream(),
                ">",
            )
            .await;
        let streams = match read {
            Ok(r) => r.unwrap_or_default(),
            // Redis lost its data (restart without persistence): recreate the group and go on.
            Err(e) if e.details().starts_with("NOGROUP") => {
                self.forget_queues();
                self.register_queue(queue).await?;
                return Ok(Fetched::default());
            }
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
        let rows = reply::array(
            self.run(|s| &s.activate, keys.stream(), args).await?,
            "activate",
        )?;
        let mut fetched = Fetched::default();
        for ((mid, _), row) in entries.into_iter().zip(rows) {
            if !matches!(row, Value::Array(_)) {
                fetched.dropped += 1;
                continue;
            }
            let mut cols = reply::array(row, "activate")?.into_iter();
            let mut next = || cols.next().unwrap_or(Value::Null);
            let task_id = reply::string(next(), "activate")?;
            let env = reply::bytes(next(), "activate")?;
            let retried = reply::int(&next(), "activate")?;
            let last_error = reply::opt_string(next(), "activate")?;
            let failed_at = reply::int(&next(), "activate")?;
            let envelope = TaskEnvelope::decode(&env).map(|mut e| {
                e.retried = u32::try_from(retried).unwrap_or(u32::MAX);
                e.last_error = last_error;
                e.last_failed_at_ms = (failed_at > 0).then_some(failed_at);
                e
            });
            fetched.leases.push(Lease {
                id: LeaseId {
                    queue: queue.clone(),
                    task_id,
                    msg_id: mid,
                },
                envelope,
            });
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
            if count_attempt { "1" } else { "0" }.into(),
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

/// Decodes an envelope returned by a script.
pub(super) fn decode_envelope(v: Value) -> Result<TaskEnvelope, DecodeError> {
    match v {
        Value::Bytes(b) => TaskEnvelope::decode(&b),
        Value::String(s) => TaskEnvelope::decode(s.as_bytes()),
        _ => Err(DecodeError::Empty),
    }
}
