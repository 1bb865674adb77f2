use std::collections::BTreeMap;

use fred::prelude::*;

use super::{reply, RedisBroker};
use crate::{
    duration_ms, now_ms, BrokerError, DeadLetter, Enqueue, NewTask, QueueName, TaskInfo, TaskState,
};

/// Tasks per script call: large enough to amortise the round trip, small enough that one call
/// does not hold Redis for long (about 5 ms at 1000 tasks).
const CHUNK: usize = 1000;

impl Enqueue for RedisBroker {
    async fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        let now = now_ms();
        let mut results: Vec<Option<Result<TaskInfo, BrokerError>>> =
            (0..tasks.len()).map(|_| None).collect();
        // Per queue: (index in the batch, encoded envelope, task).
        let mut by_queue: BTreeMap<QueueName, Vec<(usize, Vec<u8>, NewTask)>> = BTreeMap::new();
        for (i, task) in tasks.into_iter().enumerate() {
            match self.prepare(&task) {
                Ok((queue, bytes)) => by_queue.entry(queue).or_default().push((i, bytes, task)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let calls = by_queue.iter().flat_map(|(queue, items)| {
            items
                .chunks(CHUNK)
                .map(move |chunk| self.enqueue_chunk(queue, chunk, now))
        });
        let outcomes = futures::future::join_all(calls).await;
        for outcome in outcomes {
            for (i, r) in outcome? {
                results[i] = Some(r);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(reply::bad("enqueue", "task without result".into()))))
            .collect())
    }
}

impl RedisBroker {
    fn prepare(&self, task: &NewTask) -> Result<(QueueName, Vec<u8>), BrokerError> {
        let queue = QueueName::new(task.envelope.queue.clone())?;
        if task.envelope.payload.len() > self.inner.max_payload {
            return Err(BrokerError::PayloadTooLarge {
                size: task.envelope.payload.len(),
                limit: self.inner.max_payload,
            });
        }
        let bytes = task
            .envelope
            .encode()
            .map_err(|e| BrokerError::Encode(e.to_string()))?;
        Ok((queue, bytes))
    }

    async fn enqueue_chunk(
        &self,
        queue: &QueueName,
        chunk: &[(usize, Vec<u8>, NewTask)],
        now: i64,
    ) -> Result<Vec<(usize, Result<TaskInfo, BrokerError>)>, BrokerError> {
        self.register_queue(queue).await?;
        let keys = self.queue_keys(queue);
        let mut args: Vec<Value> = Vec::with_capacity(2 + 7 * chunk.len());
        args.push(keys.prefix().into());
        args.push(now.into());
        for (_, bytes, task) in chunk {
            let env = &task.envelope;
            args.push(env.id.as_str().into());
            args.push(Value::Bytes(bytes.clone().into()));
            args.push(task.run_at_ms.into());
            args.push(env.unique_key.as_deref().unwrap_or("").into());
            args.push(task.unique_ttl.map(duration_ms).unwrap_or(0).into());
            args.push(i64::from(env.max_retry).into());
            args.push(
                if env.dead_letter == DeadLetter::Discard {
                    "1"
                } else {
                    "0"
                }
                .into(),
            );
        }
        let codes = reply::array(
            self.run(|s| &s.enqueue, keys.stream(), args).await?,
            "enqueue",
        )?;
        if codes.len() != chunk.len() {
            return Err(reply::bad(
                "enqueue",
                format!("{} codes for {} tasks", codes.len(), chunk.len()),
            ));
        }
        let mut out = Vec::with_capacity(chunk.len());
        for ((i, _, task), code) in chunk.iter().zip(codes) {
            let env = &task.envelope;
            let r = match reply::int(&code, "enqueue")? {
                1 | 2 => Ok(TaskInfo {
                    id: env.id.clone(),
                    queue: env.queue.clone(),
                    kind: env.kind.clone(),
                    state: if task.run_at_ms > now {
                        TaskState::Scheduled
                    } else {
                        TaskState::Pending
                    },
                    run_at_ms: task.run_at_ms.max(now),
                }),
                -1 => Err(BrokerError::DuplicateTask {
                    queue: env.queue.clone(),
                }),
                -2 => Err(BrokerError::TaskIdConflict {
                    id: env.id.clone(),
                    queue: env.queue.clone(),
                }),
                other => Err(reply::bad("enqueue", format!("unknown code {other}"))),
            };
            out.push((*i, r));
        }
        Ok(out)
    }
}
