use std::collections::BTreeMap;

use fred::prelude::*;

use super::edit::Change;
use super::protocol::STATE;
use super::reply::{EditCode, EnqueueCode, PushCode};
use super::{durable, reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, now_ms, BrokerError, DeadLetter, Dedup, DedupMode, Enqueue, EnqueueOutcome,
    NewTask, QueueKeys, QueueName, Release, TaskInfo, TaskState,
};
use crate::{Due, DEFAULT_MAX_RETRY};

/// The name of one enqueue call's receipt: random per call and the same in a client's re-send
/// of it, so a re-send (its first reply lost on a reconnect) answers from the receipt without
/// writing again, even after a fast worker already ran and deleted the tasks.
fn call_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Tasks of one script call, each with its index in the caller's batch.
type Batch = Vec<(usize, NewTask)>;
/// What one script call answers per task, by its index in the caller's batch.
type Placed = Vec<(usize, Result<TaskInfo, BrokerError>)>;

/// One enqueue.lua call being made: its keys, its arguments and the tasks it carries.
struct Call {
    declared: Vec<String>,
    args: Vec<Value>,
    /// The tasks sent, each with its index in the caller's batch, in the order of the rows
    /// the script answers.
    sent: Batch,
}

/// One task's row of enqueue.lua's reply.
enum Row {
    /// The task's code with its run time and state. A task already there answers its own state
    /// and run time (a re-send, or the same task again), not the ones this call asked for.
    Placed {
        code: i64,
        run_at: i64,
        state: TaskState,
    },
    /// A deduplication key held by task `holder` (`offer`: replace or debounce it).
    Held { holder: String, offer: bool },
}

impl Row {
    /// Takes apart the row of `task`, which enqueue.lua answered at `now` (unix ms).
    fn read(row: Value, task: &NewTask, now: i64) -> Result<Row, BrokerError> {
        let (code, run_at, state) = match row {
            Value::Array(cols) => {
                let mut cols = cols.into_iter();
                let mut next = || cols.next().unwrap_or(Value::Null);
                let code = reply::int(&next(), "enqueue")?;
                if let Some(c @ (EnqueueCode::Duplicate | EnqueueCode::Offer)) =
                    EnqueueCode::from_reply(code)
                {
                    let holder = reply::string(next(), "enqueue")?;
                    return Ok(Row::Held {
                        holder,
                        offer: c == EnqueueCode::Offer,
                    });
                }
                let at = reply::int(&next(), "enqueue")?;
                let state = reply::string(next(), "enqueue")?;
                (
                    code,
                    at,
                    TaskState::parse(&state).unwrap_or(TaskState::Pending),
                )
            }
            v => {
                let code = reply::int(&v, "enqueue")?;
                let (at, state) = match (EnqueueCode::from_reply(code), task.due()) {
                    (Some(EnqueueCode::Scheduled), Due::At(at)) => (at, TaskState::Scheduled),
                    (Some(EnqueueCode::Scheduled), Due::In(d)) => {
                        (now.saturating_add(d), TaskState::Scheduled)
                    }
                    _ => (now, TaskState::Pending),
                };
                (code, at, state)
            }
        };
        Ok(Row::Placed {
            code,
            run_at,
            state,
        })
    }
}

/// What code `code` of enqueue.lua means for `task`, placed with `run_at` and `state`, when
/// `replicated` replicas acknowledged the call.
fn placed(
    code: i64,
    run_at: i64,
    state: TaskState,
    task: NewTask,
    replicated: u32,
) -> Result<TaskInfo, BrokerError> {
    let wanted = task.durable().map(|(n, _)| n);
    let tenant = task.tenant().map(str::to_string);
    let env = task.envelope;
    use EnqueueCode::{
        CorruptKeys, Duplicate, Exists, IdConflict, Offer, Ready, Scheduled, TenantFull, UniqueHeld,
    };
    match EnqueueCode::from_reply(code) {
        Some(Ready | Exists | Scheduled) if wanted.is_some_and(|w| replicated < w) => {
            Err(BrokerError::NotReplicated {
                id: env.id,
                queue: env.queue,
                acked: replicated,
                wanted: wanted.unwrap_or_default(),
            })
        }
        Some(Ready | Exists | Scheduled) => Ok(TaskInfo {
            id: env.id,
            queue: env.queue,
            kind: env.kind,
            state,
            run_at_ms: run_at,
            outcome: EnqueueOutcome::Created,
        }),
        // Rows of these codes are read as `Row::Held`.
        Some(Duplicate | Offer) => Err(reply::bad("enqueue", "bad dedup row".into())),
        Some(UniqueHeld) => Err(BrokerError::DuplicateTask { queue: env.queue }),
        Some(TenantFull) => Err(BrokerError::TenantFull {
            queue: env.queue,
            tenant: tenant.unwrap_or_default(),
        }),
        Some(IdConflict) => Err(BrokerError::TaskIdConflict {
            id: env.id,
            queue: env.queue,
        }),
        Some(CorruptKeys) => Err(reply::bad(
            "enqueue",
            "the queue's stream or scheduled set has the wrong type".into(),
        )),
        None => Err(reply::bad("enqueue", format!("unknown code {code}"))),
    }
}

/// Tasks per script call. A batch is split into calls of this size that go out together on the
/// auto-pipelined connection (still one round trip): Redis runs one call while the client encodes
/// the next, which on a 2-core host gave ~1.4x the batch throughput of one call per 1000 tasks.
/// Each call holds Redis for under 1 ms.
const CHUNK: usize = 125;
/// Plain tasks per push.lua call: a plain task is one argument and one XADD (about 2 µs of
/// Redis time), so a call of this many holds Redis for about 1 ms, as one enqueue.lua call of
/// [`CHUNK`] does.
const PUSH_CHUNK: usize = 500;

impl Enqueue for RedisBroker {
    async fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        let mut results: Vec<Option<Result<TaskInfo, BrokerError>>> =
            (0..tasks.len()).map(|_| None).collect();
        // Per queue: (index in the batch, task). Each distinct queue name is validated once.
        let mut by_name: BTreeMap<String, Vec<(usize, NewTask)>> = BTreeMap::new();
        for (i, task) in tasks.into_iter().enumerate() {
            match by_name.get_mut(&task.envelope.queue) {
                Some(items) => items.push((i, task)),
                None => {
                    by_name.insert(task.envelope.queue.clone(), vec![(i, task)]);
                }
            }
        }
        let mut chunks: Vec<(QueueName, bool, Batch)> = Vec::new();
        for (name, items) in by_name {
            let queue = match QueueName::new(name) {
                Ok(q) => q,
                Err(BrokerError::InvalidQueue { name, reason }) => {
                    for (i, _) in items {
                        let name = name.clone();
                        results[i] = Some(Err(BrokerError::InvalidQueue { name, reason }));
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Plain tasks (one stream entry each, see `NewTask::is_plain`) go by push.lua, the
            // others by enqueue.lua.
            let plain_on = self.inner.plain_tasks;
            let (plain, full): (Vec<_>, Vec<_>) = items
                .into_iter()
                .partition(|(_, t)| plain_on && t.is_plain());
            let mut plain = plain.into_iter().peekable();
            while plain.peek().is_some() {
                chunks.push((
                    queue.clone(),
                    true,
                    plain.by_ref().take(PUSH_CHUNK).collect(),
                ));
            }
            let mut full = full.into_iter().peekable();
            while full.peek().is_some() {
                chunks.push((queue.clone(), false, full.by_ref().take(CHUNK).collect()));
            }
        }
        // Envelopes are encoded inside each call, so the first call is on the wire before the
        // last chunk is encoded.
        let calls = chunks.into_iter().map(|(queue, plain, chunk)| async move {
            if plain {
                self.push_chunk(queue, chunk).await
            } else {
                self.enqueue_chunk(queue, chunk, DEDUP_ROUNDS).await
            }
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

/// A task's level as the scripts take it: `''` for the default level (no `p` in its record,
/// deliveries on the main stream).
pub(super) fn level_arg(p: chronos_core::Priority) -> Value {
    if p.is_normal() {
        Value::from("")
    } else {
        Value::from(p.to_string())
    }
}

impl RedisBroker {
    /// The stored bytes of a task's envelope, after the payload limit check.
    pub(super) fn encode_task(&self, task: &NewTask) -> Result<Vec<u8>, BrokerError> {
        if task.envelope.payload.len() > self.inner.max_payload {
            return Err(BrokerError::PayloadTooLarge {
                size: task.envelope.payload.len(),
                limit: self.inner.max_payload,
            });
        }
        task.envelope
            .encode()
            .map_err(|e| BrokerError::Encode(e.to_string()))
    }

    /// One push.lua call for plain tasks of one queue: each becomes one stream entry holding
    /// its envelope, which leaves the id out (the id is the entry's, returned by the script).
    async fn push_chunk(&self, queue: QueueName, chunk: Batch) -> Result<Placed, BrokerError> {
        let mut out = Vec::with_capacity(chunk.len());
        let mut sent = Vec::with_capacity(chunk.len());
        let keys = self.queue_keys(&queue);
        let token = call_token();
        let mut declared = vec![keys.stream(), keys.enqueue_receipt(&token)];
        // Each task's policy travels only when one of them differs from the default.
        let policy = chunk.iter().any(|(_, t)| {
            t.envelope.max_retry != DEFAULT_MAX_RETRY
                || t.envelope.dead_letter == DeadLetter::Discard
        });
        let mut args: Vec<Value> = Vec::with_capacity(2 + chunk.len() * if policy { 3 } else { 1 });
        args.push(duration_ms(self.inner.idempotency_window).into());
        args.push(reply::flag(policy));
        for (i, mut task) in chunk {
            task.envelope.id.clear();
            let bytes = match self.encode_task(&task) {
                Ok(b) => b,
                Err(e) => {
                    out.push((i, Err(e)));
                    continue;
                }
            };
            args.push(Value::Bytes(bytes.into()));
            if policy {
                let env = &task.envelope;
                args.push(if env.max_retry == DEFAULT_MAX_RETRY {
                    Value::from("")
                } else {
                    i64::from(env.max_retry).into()
                });
                args.push(if env.dead_letter == DeadLetter::Discard {
                    Value::from("1")
                } else {
                    Value::from("")
                });
            }
            sent.push((i, task));
        }
        if sent.is_empty() {
            return Ok(out);
        }
        self.register_queue(&queue).await?;
        declared.extend(self.event_stream(&keys).await?);
        let first = self.run(|s| &s.push, declared, args).await?;
        let code = reply::int(&first, "push")
            .ok()
            .and_then(PushCode::from_reply);
        if code == Some(PushCode::CorruptStream) {
            for (i, _) in sent {
                out.push((
                    i,
                    Err(reply::bad(
                        "enqueue",
                        "the queue's stream has the wrong type".into(),
                    )),
                ));
            }
            return Ok(out);
        }
        let ids: Vec<String> = match first {
            Value::Array(ids) => ids
                .into_iter()
                .map(|v| reply::string(v, "push"))
                .collect::<Result<_, _>>()?,
            first => {
                let first = reply::string(first, "push")?;
                let Some((ms, seq)) = first.split_once('-').and_then(|(ms, seq)| {
                    Some((ms.parse::<u64>().ok()?, seq.parse::<u64>().ok()?))
                }) else {
                    return Err(reply::bad("push", format!("bad first id {first:?}")));
                };
                (0..sent.len() as u64)
                    .map(|k| format!("{ms}-{}", seq + k))
                    .collect()
            }
        };
        if ids.len() != sent.len() {
            return Err(reply::bad(
                "push",
                format!("{} ids for {} tasks", ids.len(), sent.len()),
            ));
        }
        for ((i, task), id) in sent.into_iter().zip(ids) {
            let env = task.envelope;
            let run_at_ms = id
                .split_once('-')
                .and_then(|(ms, _)| ms.parse().ok())
                .unwrap_or_else(now_ms);
            out.push((
                i,
                Ok(TaskInfo {
                    id,
                    queue: env.queue,
                    kind: env.kind,
                    state: TaskState::Pending,
                    run_at_ms,
                    outcome: EnqueueOutcome::Created,
                }),
            ));
        }
        Ok(out)
    }

    async fn enqueue_chunk(
        &self,
        queue: QueueName,
        chunk: Batch,
        rounds: u8,
    ) -> Result<Placed, BrokerError> {
        let keys = self.queue_keys(&queue);
        let (call, mut out) = self.enqueue_call(&keys, chunk);
        let Call {
            mut declared,
            args,
            sent,
        } = call;
        if sent.is_empty() {
            return Ok(out);
        }
        self.register_queue(&queue).await?;
        declared.extend(self.event_stream(&keys).await?);
        let durable = durable::wanted(sent.iter().map(|(_, t)| t));
        let script = self.run(|s| &s.enqueue, declared, args);
        let (writer, reply) = match durable {
            // Polled first, so `CLIENT INFO` is on the wire ahead of the script, in the same
            // round trip: it names the connection the script can only follow.
            Some(_) => {
                let (writer, reply) =
                    futures::future::join(self.connection(&keys.stream()), script).await;
                (writer?, reply?)
            }
            None => (None, script.await?),
        };
        let reply = reply::array(reply, "enqueue")?;
        if reply.len() != 1 + sent.len() {
            return Err(reply::bad(
                "enqueue",
                format!("{} values for {} tasks", reply.len(), sent.len()),
            ));
        }
        let replicated = match durable {
            Some(wanted) => self.wait_replicas(&keys.stream(), wanted, writer).await?,
            None => 0,
        };
        let mut rows = reply.into_iter();
        let now = reply::int(&rows.next().unwrap_or(Value::Null), "enqueue")?;
        let mut held = Vec::new();
        for ((i, task), row) in sent.into_iter().zip(rows) {
            match Row::read(row, &task, now)? {
                Row::Held { holder, offer } => held.push((i, task, holder, offer)),
                Row::Placed {
                    code,
                    run_at,
                    state,
                } => out.push((i, placed(code, run_at, state, task, replicated))),
            }
        }
        let answers = held.into_iter().map(|(i, task, holder, offer)| {
            let queue = &queue;
            async move {
                let r = self.settle_dedup(queue, task, holder, offer, rounds).await;
                (i, r)
            }
        });
        out.extend(futures::future::join_all(answers).await);
        Ok(out)
    }

    /// The keys and arguments of one enqueue.lua call for `chunk`, and the tasks it carries;
    /// with the answers of the tasks that do not encode (they are not sent).
    fn enqueue_call(&self, keys: &QueueKeys, chunk: Batch) -> (Call, Placed) {
        let mut out = Vec::with_capacity(chunk.len());
        let mut sent = Vec::with_capacity(chunk.len());
        let token = call_token();
        let mut declared = Vec::with_capacity(3 + chunk.len());
        declared.push(keys.stream());
        declared.push(keys.scheduled());
        declared.push(keys.enqueue_receipt(&token));
        declared.push(keys.deduplicated());
        // Lock keys follow all task keys, one per unique task only.
        let mut locks = Vec::new();
        let mut args: Vec<Value> =
            Vec::with_capacity(1 + super::protocol::ENQUEUE_STRIDE * chunk.len());
        args.push(duration_ms(self.inner.idempotency_window).into());
        for (i, task) in chunk {
            let bytes = match self.encode_task(&task) {
                Ok(b) => b,
                Err(e) => {
                    out.push((i, Err(e)));
                    continue;
                }
            };
            let env = &task.envelope;
            declared.push(keys.task(&env.id));
            // Without a key to lock, no lock: a TTL alone must not make the task hash a "lock".
            let unique = match (&env.unique_key, task.unique_ttl) {
                (Some(hash), Some(ttl)) => Some((keys.unique(hash), duration_ms(ttl).max(1))),
                _ => None,
            };
            if let Some((k, _)) = &unique {
                locks.push(k.clone());
            }
            let (at, delay) = match task.due() {
                Due::Now => (0, 0),
                Due::At(at) => (at.max(1), 0),
                Due::In(d) => (0, d.max(0)),
            };
            args.push(env.id.as_str().into());
            args.push(Value::Bytes(bytes.into()));
            args.push(at.into());
            args.push(delay.into());
            args.push(unique.map_or(0, |(_, ttl)| ttl).into());
            args.push(i64::from(env.max_retry).into());
            args.push(reply::flag(env.dead_letter == DeadLetter::Discard));
            args.push(if task.explicit_id() {
                task.fingerprint().into()
            } else {
                "".into()
            });
            args.push(level_arg(task.priority()));
            args.push(task.tenant().unwrap_or("").into());
            args.push(reply::flag(task.lifo()));
            args.push(dedup_spec(task.dedup()).into());
            sent.push((i, task));
        }
        declared.extend(locks);
        let tenants = sent.iter().any(|(_, t)| t.tenant().is_some() || t.lifo());
        if tenants || sent.iter().any(|(_, t)| !t.priority().is_normal()) {
            declared.extend(keys.lanes());
        }
        if tenants {
            declared.push(keys.settings());
            declared.extend(keys.tenants());
        }
        let call = Call {
            declared,
            args,
            sent,
        };
        (call, out)
    }

    /// The answer to a deduplicated task whose key `holder` held when enqueue.lua ran: a
    /// duplicate of it, or (`offer`: replace, debounce) the holder with this task's payload,
    /// through edit.lua, which writes only while the holder still waits. A holder that started
    /// or was deleted meanwhile may have let its key go, so the task is enqueued again, at most
    /// `rounds` more times; then the holder's answer stands.
    async fn settle_dedup(
        &self,
        queue: &QueueName,
        task: NewTask,
        holder: String,
        offer: bool,
        rounds: u8,
    ) -> Result<TaskInfo, BrokerError> {
        let info = |id: String, state, run_at_ms, outcome| TaskInfo {
            id,
            queue: task.envelope.queue.clone(),
            kind: task.envelope.kind.clone(),
            state,
            run_at_ms,
            outcome,
        };
        if offer {
            let (rule, outcome) = match task.dedup().map(|d| d.dedup_mode()) {
                Some(DedupMode::Debounce { delay, max_wait }) => (
                    format!("d:{}:{}", duration_ms(delay), duration_ms(max_wait)),
                    EnqueueOutcome::Extended,
                ),
                _ => ("p".to_string(), EnqueueOutcome::Replaced),
            };
            let change = Change {
                payload: Some(&task.envelope.payload),
                kind: Some(&task.envelope.kind),
                run_at_ms: None,
                level: None,
            };
            let (code, said, at) = self.edit_script(queue, &holder, &change, &rule).await?;
            match EditCode::from_reply(code) {
                Some(EditCode::Done | EditCode::Already) => {
                    let state = TaskState::parse(&said).unwrap_or(TaskState::Pending);
                    return Ok(info(holder, state, at, outcome));
                }
                Some(EditCode::NotFound | EditCode::Refused) if rounds > 0 => {
                    let again = Box::pin(self.enqueue_chunk(
                        queue.clone(),
                        vec![(0, task.clone())],
                        rounds - 1,
                    ))
                    .await?;
                    return again
                        .into_iter()
                        .next()
                        .map(|(_, r)| r)
                        .unwrap_or_else(|| Err(reply::bad("enqueue", "no row".into())));
                }
                Some(EditCode::Corrupt) | None => {
                    return Err(reply::bad(
                        "enqueue",
                        format!("the record of task {holder:?}, which holds the key, is corrupt"),
                    ))
                }
                // Another kind holds the key (its payload is not this task's to give), or the
                // holder started and still holds it: a duplicate.
                _ => {}
            }
        }
        let (state, at) = self.holder_state(queue, &holder).await?;
        Ok(info(holder, state, at, EnqueueOutcome::Duplicate))
    }

    /// The state of task `id` and its run time (its score while it waits in a set, else now;
    /// `Completed` when it has no record any more, as a throttle's finished holder).
    async fn holder_state(
        &self,
        queue: &QueueName,
        id: &str,
    ) -> Result<(TaskState, i64), BrokerError> {
        let keys = self.queue_keys(queue);
        let pipe = self.inner.client.pipeline();
        let _: () = pipe.hget(keys.task(id), STATE).await.map_err(store)?;
        let _: () = pipe.zscore(keys.scheduled(), id).await.map_err(store)?;
        let _: () = pipe.zscore(keys.retry(), id).await.map_err(store)?;
        let (state, scheduled, retry): (Option<String>, Option<f64>, Option<f64>) =
            pipe.all().await.map_err(store)?;
        let state = match state {
            Some(s) => TaskState::parse(&s).unwrap_or(TaskState::Pending),
            None => TaskState::Completed,
        };
        let at = match state {
            TaskState::Scheduled => scheduled,
            TaskState::Retry => retry,
            _ => None,
        };
        Ok((state, at.map_or_else(now_ms, |s| s as i64)))
    }
}

/// When a task's unique lock is let go, as fire.lua and sched_run.lua take it (lib.lua
/// `lock_record`): `s` on start, `x` only at expiry, '' when the task ends.
pub(super) fn release_arg(task: &NewTask) -> &'static str {
    match task.dedup().map(Dedup::release_point) {
        Some(Release::OnStart) => "s",
        Some(Release::AtExpiry) => "x",
        _ => "",
    }
}

/// How many times an enqueue whose key's holder started meanwhile is tried again.
const DEDUP_ROUNDS: u8 = 2;

/// The deduplication argument of enqueue.lua: '' for none (or a plain unique lock), else the
/// mode and the release point.
fn dedup_spec(dedup: Option<&Dedup>) -> &'static str {
    let Some(d) = dedup else { return "" };
    let mode = match d.dedup_mode() {
        DedupMode::Throttle { .. } => 't',
        DedupMode::Debounce { .. } => 'd',
        DedupMode::Replace => 'p',
        _ => 'r',
    };
    let release = match d.release_point() {
        Release::OnStart => 's',
        Release::AtExpiry => 'x',
        _ => 'f',
    };
    match (mode, release) {
        ('r', 's') => "rs",
        ('r', 'x') => "rx",
        ('r', _) => "rf",
        ('t', _) => "tx",
        ('d', 'f') => "df",
        ('d', 'x') => "dx",
        ('d', _) => "ds",
        ('p', 'f') => "pf",
        ('p', 'x') => "px",
        _ => "ps",
    }
}
