//! Runtime schedules: definitions stored in the scheduler's slot (`{scheduler}:runtime`, with
//! the revision counter `{scheduler}:runtime:rev`), changed by compare-and-set, and run-now of
//! one schedule into its queue.

use std::time::Duration;

use fred::prelude::*;
use tracing::warn;

use super::reply::{SchedPutCode, SchedRunCode};
use super::schedules::{sched, ttl_ms};
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, BrokerError, DeadLetter, FireOutcome, ManageSchedules, NewTask, PutOutcome,
    QueueName, ScheduleDef, StoredDef,
};

/// How long a run-now request id is remembered: a call re-sent (or repeated) within it
/// enqueues nothing more.
const RUN_REQUEST_TTL: Duration = Duration::from_secs(86_400);

impl RedisBroker {
    fn runtime_key(&self) -> String {
        self.sched_key("runtime")
    }
}

fn stored(id: &str, raw: Vec<u8>) -> Option<StoredDef> {
    match ScheduleDef::decode(&raw) {
        Ok(def) => Some(StoredDef { def, raw }),
        Err(e) => {
            warn!(schedule = %id, error = %e, "unreadable runtime schedule; skipped");
            None
        }
    }
}

impl ManageSchedules for RedisBroker {
    async fn schedule_revision(&self) -> Result<u64, BrokerError> {
        let rev: Option<i64> = self
            .inner
            .client
            .get(self.sched_key("runtime:rev"))
            .await
            .map_err(store)?;
        Ok(rev.unwrap_or(0).max(0) as u64)
    }

    async fn schedule_defs(&self) -> Result<Vec<StoredDef>, BrokerError> {
        let raw: Vec<(String, Vec<u8>)> = self
            .inner
            .client
            .hgetall(self.runtime_key())
            .await
            .map_err(store)?;
        let mut out: Vec<StoredDef> = raw
            .into_iter()
            .filter_map(|(id, bytes)| stored(&id, bytes))
            .collect();
        out.sort_by(|a, b| a.def.id.cmp(&b.def.id));
        Ok(out)
    }

    async fn schedule_def(&self, id: &str) -> Result<Option<StoredDef>, BrokerError> {
        let raw: Option<Vec<u8>> = self
            .inner
            .client
            .hget(self.runtime_key(), id)
            .await
            .map_err(store)?;
        Ok(raw.and_then(|b| stored(id, b)))
    }

    async fn put_schedule_def(
        &self,
        id: &str,
        expected: Option<&[u8]>,
        new: Option<&ScheduleDef>,
    ) -> Result<PutOutcome, BrokerError> {
        if new.is_some_and(|d| d.id != id) {
            return Err(BrokerError::InvalidOption(format!(
                "definition of {:?} stored under id {id:?}",
                new.map(|d| d.id.as_str()).unwrap_or_default()
            )));
        }
        let bytes = match new {
            Some(d) => d.encode().map_err(|e| BrokerError::Encode(e.to_string()))?,
            None => Vec::new(),
        };
        let args: Vec<Value> = vec![
            id.into(),
            reply::flag(expected.is_some()),
            Value::Bytes(expected.unwrap_or_default().to_vec().into()),
            reply::flag(new.is_some()),
            Value::Bytes(bytes.into()),
        ];
        let keys = vec![
            self.runtime_key(),
            self.sched_key("runtime:rev"),
            self.sched_key("registry"),
        ];
        let r = self.run(|s| &s.sched_put, keys, args).await?;
        let code = reply::int(&r, "sched_put")?;
        Ok(match SchedPutCode::from_reply(code) {
            Some(SchedPutCode::Written) => PutOutcome::Written,
            Some(SchedPutCode::Unchanged) => PutOutcome::Unchanged,
            Some(SchedPutCode::Conflict) => PutOutcome::Conflict,
            Some(SchedPutCode::CodeOwned) => PutOutcome::CodeOwned,
            None => return Err(reply::bad("sched_put", format!("unknown code {code}"))),
        })
    }

    async fn run_schedule(
        &self,
        queue: &QueueName,
        schedule_id: &str,
        request: &str,
        task: NewTask,
    ) -> Result<FireOutcome, BrokerError> {
        let env = &task.envelope;
        if env.queue != queue.as_str() {
            return Err(BrokerError::InvalidOption(format!(
                "task for queue {:?} run in {queue}",
                env.queue
            )));
        }
        if env.payload.len() > self.inner.max_payload {
            return Err(BrokerError::PayloadTooLarge {
                size: env.payload.len(),
                limit: self.inner.max_payload,
            });
        }
        let bytes = env
            .encode()
            .map_err(|e| BrokerError::Encode(e.to_string()))?;
        self.register_queue(queue).await?;
        let keys = self.queue_keys(queue);
        let mut key_list = vec![
            keys.stream(),
            sched(&keys, "metrics"),
            sched(&keys, &format!("r:{schedule_id}:{request}")),
            keys.task(&env.id),
            sched(&keys, "fires"),
        ];
        let uttl = match (&env.unique_key, task.unique_ttl) {
            (Some(hash), Some(ttl)) => {
                key_list.push(keys.unique(hash));
                duration_ms(ttl).max(1)
            }
            _ => 0,
        };
        // Random per call and part of the command, so a re-send by fred (after a lost reply)
        // carries it too and is told its own first outcome instead of "already ran".
        let token = format!("{:016x}", rand::random::<u64>());
        let args: Vec<Value> = vec![
            env.id.as_str().into(),
            Value::Bytes(bytes.into()),
            i64::from(env.max_retry).into(),
            reply::flag(env.dead_letter == DeadLetter::Discard),
            uttl.into(),
            ttl_ms(RUN_REQUEST_TTL)?.into(),
            token.as_str().into(),
            super::enqueue::release_arg(&task).into(),
            schedule_id.into(),
        ];
        key_list.extend(self.event_stream(&keys).await?);
        let r = self.run(|s| &s.sched_run, key_list, args).await?;
        let code = reply::int(&r, "sched_run")?;
        match SchedRunCode::from_reply(code) {
            Some(c) => super::schedules::run_outcome(c).ok_or_else(|| {
                reply::bad(
                    "sched_run",
                    "the queue's stream, scheduler counters, run marker or unique lock has the \
                     wrong type"
                        .into(),
                )
            }),
            None => Err(reply::bad("sched_run", format!("unknown code {code}"))),
        }
    }

    async fn forget_fire_state(
        &self,
        queue: &QueueName,
        schedule_ids: &[String],
    ) -> Result<(), BrokerError> {
        if schedule_ids.is_empty() {
            return Ok(());
        }
        let keys = self.queue_keys(queue);
        let c = &self.inner.client;
        for name in ["last", "task", "reg", "fires"] {
            let _: i64 = c
                .hdel(sched(&keys, name), schedule_ids.to_vec())
                .await
                .map_err(store)?;
        }
        Ok(())
    }
}
