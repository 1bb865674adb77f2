//! Operator actions on tasks (run now, delete, archive, cancel): one task, a list of tasks, or
//! every task of a state that passes a filter, in script calls whose size adapts to the
//! server's speed; and the worker's poll for the cancel requests the cancel action leaves.

use std::time::Duration;

use fred::prelude::*;

use super::protocol::UNIQUE;
use super::record::Record;
use super::reply::ActionCode;
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, ActionOutcome, BrokerError, BulkReport, QueueKeys, QueueName, TaskAction,
    TaskFilter, TaskState, GROUP,
};

/// How long a cancel request is kept: a worker polls several times a second, so a request
/// older than this has been seen, or its task has ended.
const CANCEL_KEEP: Duration = Duration::from_secs(60);

/// Largest chunk one script call takes.
pub(super) const MAX_CHUNK: usize = 5_000;

/// How long one bulk script call should hold Redis at most: chunks shrink when a call takes
/// longer (see [`RedisBroker::bulk`]).
const CALL_BUDGET: Duration = Duration::from_millis(5);

/// First chunk of a bulk action, and the smallest.
const START_CHUNK: usize = 250;
const MIN_CHUNK: usize = 25;

impl RedisBroker {
    /// [`crate::Operate::act`]: one task, one script call.
    pub(super) async fn act_one(
        &self,
        queue: &QueueName,
        id: &str,
        action: TaskAction,
    ) -> Result<ActionOutcome, BrokerError> {
        crate::keys::check_task_id(id)?;
        let keys = self.queue_keys(queue);
        let unique = if matches!(action, TaskAction::Archive | TaskAction::Delete) {
            Record::read(&self.inner.client, keys.task(id), &[UNIQUE])
                .await
                .ok()
                .and_then(|r| r.text(UNIQUE, "act").ok().flatten())
        } else {
            None
        };
        let (codes, states) = self
            .run_action(&keys, action, &[(id.to_string(), unique)], false)
            .await?;
        let code = codes.first().copied().unwrap_or(0);
        let state = states.into_iter().next().unwrap_or_default();
        Ok(outcome(code, &state))
    }

    /// [`crate::Operate::act_many`]: the tasks' unique locks read first, then the actions in
    /// calls that adapt their size.
    pub(super) async fn act_each(
        &self,
        queue: &QueueName,
        ids: &[String],
        action: TaskAction,
    ) -> Result<Vec<ActionOutcome>, BrokerError> {
        for id in ids {
            crate::keys::check_task_id(id)?;
        }
        let keys = self.queue_keys(queue);
        let uniques: Vec<Option<String>> =
            if matches!(action, TaskAction::Archive | TaskAction::Delete) {
                futures::future::join_all(ids.iter().map(|id| async {
                    Record::read(&self.inner.client, keys.task(id), &[UNIQUE])
                        .await
                        .ok()
                        .and_then(|r| r.text(UNIQUE, "act").ok().flatten())
                }))
                .await
            } else {
                vec![None; ids.len()]
            };
        let tasks: Vec<(String, Option<String>)> = ids.iter().cloned().zip(uniques).collect();
        let mut out = Vec::with_capacity(tasks.len());
        let mut chunk = START_CHUNK;
        let mut rest = tasks.as_slice();
        while !rest.is_empty() {
            let (part, tail) = rest.split_at(chunk.min(rest.len()));
            let t = std::time::Instant::now();
            let (codes, states) = self.run_action(&keys, action, part, false).await?;
            chunk = adapt(chunk, t.elapsed(), MAX_CHUNK);
            for i in 0..part.len() {
                let code = codes.get(i).copied().unwrap_or(0);
                let state = states.get(i).map(String::as_str).unwrap_or_default();
                out.push(outcome(code, state));
            }
            rest = tail;
        }
        Ok(out)
    }

    /// The requests of [`crate::Maintain::cancel_requested`]: one ZMSCORE.
    pub(super) async fn cancel_requests(
        &self,
        queue: &QueueName,
        msg_ids: &[String],
    ) -> Result<Vec<String>, BrokerError> {
        if msg_ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.queue_keys(queue).cancel();
        let scores: Vec<Option<f64>> = self
            .inner
            .client
            .zmscore(key, msg_ids.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .map_err(store)?;
        Ok(msg_ids
            .iter()
            .zip(scores)
            .filter(|(_, s)| s.is_some())
            .map(|(m, _)| m.clone())
            .collect())
    }

    /// The bulk loop behind [`crate::Operate::act_all`] (`force`: delete active tasks too, for
    /// a forced queue delete).
    pub(super) async fn bulk(
        &self,
        queue: &QueueName,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
        chunk: usize,
        force: bool,
    ) -> Result<BulkReport, BrokerError> {
        let keys = self.queue_keys(queue);
        let max = chunk.clamp(1, MAX_CHUNK);
        // Chunks adapt to the server's speed: a script call that took longer than the budget
        // (round trip, an upper bound of the time Redis spent in it) halves the next chunk, a
        // quick one doubles it, up to the caller's size. So no call holds Redis for long even
        // where a task's transition costs more than usual (a slow or busy host).
        let mut chunk = max.min(START_CHUNK);
        let need_env = !filter.is_empty();
        let mut report = BulkReport::default();
        let mut cursor: Option<String> = None;
        loop {
            let read = self
                .scan(&keys, state, cursor.as_deref(), chunk, need_env)
                .await?;
            report.scanned += read.items.len() as u64;
            let mut picked = Vec::new();
            for item in &read.items {
                let pass = !need_env
                    || item
                        .record()
                        .is_some_and(|rec| filter.matches(&rec.envelope));
                if pass {
                    picked.push((item.id.clone(), item.unique.clone()));
                }
            }
            report.matched += picked.len() as u64;
            if !picked.is_empty() {
                let t = std::time::Instant::now();
                let (codes, states) = self.run_action(&keys, action, &picked, force).await?;
                chunk = adapt(chunk, t.elapsed(), max);
                report.calls += 1;
                for (c, s) in codes.iter().zip(&states) {
                    match outcome(*c, s) {
                        ActionOutcome::Done => report.done += 1,
                        ActionOutcome::Refused(Some(TaskState::Active)) => report.running += 1,
                        ActionOutcome::Corrupt => report.failed += 1,
                        _ => report.skipped += 1,
                    }
                }
            }
            // The next chunk starts after the last position read. Both kinds of cursor are
            // positions, valid whatever the action did to the tasks before them: an entry id,
            // and a sorted set's (score, member), which zset_page.lua resumes after also when
            // the member has left the set.
            if read.end.is_some() {
                cursor = read.end;
            }
            if read.exhausted {
                return Ok(report);
            }
        }
    }

    /// Calls the action's script on `tasks` (id, unique lock key as the hash names it).
    /// Returns the script's codes and states, one per task.
    async fn run_action(
        &self,
        keys: &QueueKeys,
        action: TaskAction,
        tasks: &[(String, Option<String>)],
        force: bool,
    ) -> Result<(Vec<i64>, Vec<String>), BrokerError> {
        let mut args: Vec<Value> = Vec::with_capacity(tasks.len() + 2);
        let mut declared: Vec<String> = Vec::with_capacity(2 * tasks.len() + 5);
        let with_lock = |declared: &mut Vec<String>| {
            for (id, u) in tasks {
                let tkey = keys.task(id);
                let lock = u.clone().filter(|k| keys.owns(k)).unwrap_or(tkey.clone());
                declared.push(tkey);
                declared.push(lock);
            }
        };
        // Each action writes its tasks' events (lib.lua `transition`).
        let events = self.event_stream(keys).await?;
        let res = match action {
            TaskAction::RunNow => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                ]);
                declared.extend(tasks.iter().map(|(id, _)| keys.task(id)));
                declared.extend(keys.lanes());
                declared.push(keys.settings());
                declared.extend(keys.tenants());
                declared.push(keys.cancelled());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_run, declared, args).await?
            }
            TaskAction::Archive => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                ]);
                with_lock(&mut declared);
                declared.extend(keys.lanes());
                declared.extend(keys.tenants());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_archive, declared, args).await?
            }
            TaskAction::Delete => {
                declared.extend([
                    keys.stream(),
                    keys.scheduled(),
                    keys.retry(),
                    keys.archived(),
                    keys.completed(),
                ]);
                with_lock(&mut declared);
                declared.extend(keys.lanes());
                declared.extend(keys.tenants());
                declared.push(keys.cancelled());
                args.push(GROUP.into());
                args.push(reply::flag(force));
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_delete, declared, args).await?
            }
            TaskAction::Cancel => {
                declared.push(keys.cancel());
                declared.push(keys.stream());
                declared.extend(tasks.iter().map(|(id, _)| keys.task(id)));
                args.push(duration_ms(CANCEL_KEEP).into());
                args.push(GROUP.into());
                args.extend(tasks.iter().map(|(id, _)| Value::from(id.as_str())));
                declared.extend(events);
                self.run(|s| &s.admin_cancel, declared, args).await?
            }
        };
        let mut parts = reply::array(res, "admin")?.into_iter();
        let codes = reply::array(parts.next().unwrap_or(Value::Null), "admin")?
            .iter()
            .map(|v| reply::int(v, "admin"))
            .collect::<Result<Vec<_>, _>>()?;
        let states = reply::array(parts.next().unwrap_or(Value::Null), "admin")?
            .into_iter()
            .map(|v| reply::string(v, "admin").unwrap_or_default())
            .collect();
        if codes.len() != tasks.len() {
            return Err(reply::bad(
                "admin",
                format!("{} codes for {} tasks", codes.len(), tasks.len()),
            ));
        }
        Ok((codes, states))
    }
}

/// The next chunk size after a call of `chunk` tasks took `took`: halved (not below
/// MIN_CHUNK) when over the call budget, doubled (not above `max`) when well under it.
fn adapt(chunk: usize, took: Duration, max: usize) -> usize {
    if took > CALL_BUDGET {
        (chunk / 2).max(MIN_CHUNK).min(max)
    } else if took < CALL_BUDGET / 4 {
        (chunk * 2).min(max)
    } else {
        chunk
    }
}

/// What one action script's code means, with the state it names (a refusal's reason).
pub(super) fn outcome(code: i64, state: &str) -> ActionOutcome {
    match ActionCode::from_reply(code) {
        Some(ActionCode::Done) => ActionOutcome::Done,
        Some(ActionCode::Already) => ActionOutcome::Already,
        Some(ActionCode::NotFound) => ActionOutcome::NotFound,
        Some(ActionCode::Refused) => ActionOutcome::Refused(TaskState::parse(state)),
        Some(ActionCode::Corrupt) | None => ActionOutcome::Corrupt,
    }
}
