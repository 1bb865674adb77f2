//! Settling deliveries: each [`End`] of a [`Settlement`] goes to its script (consume/*.lua),
//! with the same keys and arguments as ever. Completions of one queue go in one complete.lua
//! call per lane and per [`COMPLETE_CHUNK`], requeues in one requeue.lua call per lane, every
//! other end in a call of its own, and all of a [`Consume::settle`](crate::Consume::settle)
//! call's script calls are sent together, so the client pipelines them (one round trip where
//! the connection allows). The bare acks a fetch carries ride in its claim call instead
//! (consume.rs).

use std::time::Duration;

use fred::prelude::*;
use futures::future::try_join_all;

use super::reply::{BackoffCode, CancelCode, DeadCode, RetryCode, SnoozeCode};
use super::{lane, reply, RedisBroker};
use crate::keys::DAY_MS;
use crate::{
    duration_ms, now_ms, AttemptReport, BackoffOutcome, BackoffScope, BrokerError, CancelOutcome,
    DeadOutcome, End, HistoryCounter, LeaseId, QueueKeys, QueueName, Settled, Settlement,
    SnoozeOutcome, GROUP,
};

/// Most completions per complete.lua call (Lua's `unpack` takes at most ~8,000 values).
const COMPLETE_CHUNK: usize = 1000;

/// The settlements a fetch carries, split: the bare acks that ride in its claim call, and the
/// answers of the others, settled already.
pub(super) struct Carried<'a> {
    /// The bare acks for the claim call, in the order given.
    pub(super) riding: Vec<&'a Settlement>,
    /// Where each of `riding` stands among the settlements carried.
    along: Vec<usize>,
    /// The answers so far, at the place of each settlement carried (None for those riding).
    answers: Vec<Option<Settled>>,
}

impl Carried<'_> {
    /// Every answer, once the claim call acked `acked` of the bare acks. The claim answers how
    /// many it acked, not which: that many of them, in order.
    pub(super) fn answered(mut self, acked: u64) -> Result<Vec<Settled>, BrokerError> {
        for (k, &i) in self.along.iter().enumerate() {
            self.answers[i] = Some(Settled::Completed {
                stale: k as u64 >= acked,
            });
        }
        self.answers
            .into_iter()
            .map(|a| a.ok_or_else(|| reply::bad("fetch", "a settlement left unanswered".into())))
            .collect()
    }
}

/// One script call of a batch end: a queue, a lane, and the settlements (by index) it carries.
struct Batch<'a> {
    queue: &'a QueueName,
    level: Option<u8>,
    idx: Vec<usize>,
}

impl RedisBroker {
    /// Settles `all`, one answer per settlement, in order: the script calls of every group are
    /// sent at once and awaited together.
    pub(super) async fn settle_refs(
        &self,
        all: &[&Settlement],
    ) -> Result<Vec<Settled>, BrokerError> {
        let mut completions: Vec<(&QueueName, Vec<usize>)> = Vec::new();
        let mut requeues: Vec<(&QueueName, Vec<usize>)> = Vec::new();
        let mut singles = Vec::new();
        for (i, s) in all.iter().enumerate() {
            let group = match s.end {
                End::Completed { .. } => &mut completions,
                End::Requeued => &mut requeues,
                _ => {
                    singles.push(i);
                    continue;
                }
            };
            match group.iter_mut().find(|(q, _)| **q == s.lease.queue) {
                Some((_, idx)) => idx.push(i),
                None => group.push((&s.lease.queue, vec![i])),
            }
        }
        let complete_calls = batches(all, &completions, COMPLETE_CHUNK);
        let requeue_calls = batches(all, &requeues, usize::MAX);
        let parts = |calls: &[Batch<'_>]| -> Vec<Vec<&Settlement>> {
            calls
                .iter()
                .map(|b| b.idx.iter().map(|&i| all[i]).collect())
                .collect()
        };
        let (complete_parts, requeue_parts) = (parts(&complete_calls), parts(&requeue_calls));
        let completing = try_join_all(
            complete_calls
                .iter()
                .zip(&complete_parts)
                .map(|(b, part)| self.complete_chunk(b.queue, b.level, part)),
        );
        let requeueing = try_join_all(
            requeue_calls
                .iter()
                .zip(&requeue_parts)
                .map(|(b, part)| self.requeue_lane(b.queue, b.level, part)),
        );
        let single = try_join_all(singles.iter().map(|&i| self.settle_single(all[i])));
        let (completed, requeued, single) = futures::try_join!(completing, requeueing, single)?;

        let mut answers: Vec<Option<Settled>> = (0..all.len()).map(|_| None).collect();
        // A batch answers how many it settled, not which: that many of it, in order.
        let counted = |calls: &[Batch<'_>], counts: Vec<u64>, answer: fn(bool) -> Settled| {
            calls
                .iter()
                .zip(counts)
                .flat_map(move |(b, n)| {
                    b.idx
                        .iter()
                        .enumerate()
                        .map(move |(k, &i)| (i, answer(k as u64 >= n)))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let by_count = counted(&complete_calls, completed, |stale| Settled::Completed {
            stale,
        })
        .into_iter()
        .chain(counted(&requeue_calls, requeued, |stale| {
            Settled::Requeued { stale }
        }));
        for (i, a) in by_count.chain(singles.into_iter().zip(single)) {
            answers[i] = Some(a);
        }
        answers
            .into_iter()
            .map(|a| a.ok_or_else(|| reply::bad("settle", "a settlement left unanswered".into())))
            .collect()
    }

    /// Settles what a fetch of `queue` carries, but for the bare acks of `queue`: an ack is their
    /// whole completion, so they ride in the fetch's claim call (claim.lua), unless the queue
    /// writes events (complete.lua writes those). The others are settled here, first, so that
    /// a failure leaves no delivery read and stranded by a fetch that then fails.
    pub(super) async fn settle_carried<'a>(
        &self,
        queue: &QueueName,
        carry: &'a [Settlement],
    ) -> Result<Carried<'a>, BrokerError> {
        let events =
            !carry.is_empty() && self.event_stream(&self.queue_keys(queue)).await?.is_some();
        let (along, rest): (Vec<usize>, Vec<usize>) = (0..carry.len())
            .partition(|&i| !events && carry[i].lease.queue == *queue && carry[i].is_bare_ack());
        let settled = self
            .settle_refs(&rest.iter().map(|&i| &carry[i]).collect::<Vec<_>>())
            .await?;
        let mut answers: Vec<Option<Settled>> = (0..carry.len()).map(|_| None).collect();
        for (&i, a) in rest.iter().zip(settled) {
            answers[i] = Some(a);
        }
        Ok(Carried {
            riding: along.iter().map(|&i| &carry[i]).collect(),
            along,
            answers,
        })
    }

    /// One end settled in its own script call.
    async fn settle_single(&self, s: &Settlement) -> Result<Settled, BrokerError> {
        let (lease, report) = (&s.lease, &s.report);
        Ok(match &s.end {
            End::Retried { delay, error } => Settled::Retried {
                stale: !self.run_retry(lease, report, *delay, error).await?,
            },
            End::Snoozed { delay, max_snoozes } => {
                Settled::Snoozed(self.run_snooze(lease, report, *delay, *max_snoozes).await?)
            }
            End::BackedOff { scope, delay } => {
                Settled::BackedOff(self.run_backoff(lease, report, scope, *delay).await?)
            }
            End::DeadLettered {
                error,
                count_attempt,
            } => Settled::DeadLettered(self.run_dead(lease, report, error, *count_attempt).await?),
            End::Cancelled { reason } => {
                Settled::Cancelled(self.run_cancel(lease, report, reason).await?)
            }
            // Batch ends never come here (settle_refs groups them); one that does is settled
            // alone, as a batch of one.
            End::Completed { .. } => {
                let level = lane::split(&lease.msg_id).0;
                let n = self.complete_chunk(&lease.queue, level, &[s]).await?;
                Settled::Completed { stale: n == 0 }
            }
            End::Requeued => {
                let level = lane::split(&lease.msg_id).0;
                let n = self.requeue_lane(&lease.queue, level, &[s]).await?;
                Settled::Requeued { stale: n == 0 }
            }
            _ => return Err(BrokerError::Unsupported("this end of a delivery")),
        })
    }

    /// Puts fetched, unstarted deliveries of `queue` back (a read that took more than asked).
    pub(super) async fn requeue_leases(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> Result<u64, BrokerError> {
        let back: Vec<Settlement> = leases.iter().cloned().map(Settlement::requeued).collect();
        let mut n = 0;
        for (level, idx) in lane::by_lane(back.iter().map(|s| s.lease.msg_id.as_str())) {
            let part: Vec<&Settlement> = idx.into_iter().map(|i| &back[i]).collect();
            n += self.requeue_lane(queue, level, &part).await?;
        }
        Ok(n)
    }

    /// One requeue.lua call for deliveries of one lane (`level`'s stream); how many it put back.
    async fn requeue_lane(
        &self,
        queue: &QueueName,
        level: Option<u8>,
        back: &[&Settlement],
    ) -> Result<u64, BrokerError> {
        if back.is_empty() {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let mut declared = vec![keys.lane(level)];
        let mut args: Vec<Value> = vec![GROUP.into()];
        for s in back {
            declared.push(keys.task(&s.lease.task_id));
            args.push(s.lease.task_id.as_str().into());
            args.push(lane::split(&s.lease.msg_id).1.into());
        }
        if lane::is_tenant(level) {
            declared.extend(keys.tenants());
        }
        declared.extend(self.event_stream(&keys).await?);
        let r = self.run(|s| &s.requeue, declared, args).await?;
        Ok(reply::int(&r, "requeue")?.max(0) as u64)
    }

    /// One complete.lua call for up to [`COMPLETE_CHUNK`] completions of one lane; how many it
    /// completed.
    pub(super) async fn complete_chunk(
        &self,
        queue: &QueueName,
        level: Option<u8>,
        done: &[&Settlement],
    ) -> Result<u64, BrokerError> {
        if done.is_empty() {
            return Ok(0);
        }
        let keys = self.queue_keys(queue);
        let mut declared = Vec::with_capacity(5 + 2 * done.len());
        let day = now_ms().div_euclid(DAY_MS);
        declared.extend([
            keys.lane(level),
            keys.completed(),
            keys.processed(),
            keys.history_minutes(HistoryCounter::Processed, day),
            keys.history_day(HistoryCounter::Processed, day),
        ]);
        // Tasks with a hash first (COMPLETE_STRIDE values and 2 keys each), then plain tasks'
        // entry ids (lib.lua), which need no key: their ack is their whole completion.
        let (plain, hashed): (Vec<&Settlement>, Vec<&Settlement>) =
            done.iter().copied().partition(|s| s.is_bare_ack());
        let mut args: Vec<Value> =
            Vec::with_capacity(2 + super::protocol::COMPLETE_STRIDE * hashed.len() + plain.len());
        args.push(GROUP.into());
        args.push((hashed.len() as i64).into());
        for s in hashed {
            let (result, retention) = match &s.end {
                End::Completed { result, retention } => (result.as_deref(), *retention),
                _ => (None, None),
            };
            let tkey = keys.task(&s.lease.task_id);
            declared.push(tkey.clone());
            declared.push(self.unique_or(&keys, &s.lease, tkey));
            args.push(s.lease.task_id.as_str().into());
            args.push(lane::split(&s.lease.msg_id).1.into());
            args.push(retention.map(duration_ms).unwrap_or(0).into());
            args.push(self.result_arg(retention, result));
            args.push(ran(&s.report));
            args.push(logs(&s.report));
        }
        for s in plain {
            args.push(s.lease.msg_id.as_str().into());
        }
        if lane::is_tenant(level) {
            declared.extend(keys.tenants());
        }
        declared.extend(self.event_stream(&keys).await?);
        let n = self.run(|s| &s.complete, declared, args).await?;
        Ok(reply::int(&n, "complete")?.max(0) as u64)
    }

    /// retry.lua: true when the task went to the retry set (a re-sent call whose first run did
    /// it included), false for a stale lease.
    async fn run_retry(
        &self,
        lease: &LeaseId,
        report: &AttemptReport,
        delay: Duration,
        error: &str,
    ) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let (stream, mid) = lane::locate(&keys, &lease.msg_id);
        let mut declared = vec![
            stream,
            keys.retry(),
            keys.failed(),
            keys.task(&lease.task_id),
        ];
        declared.extend(failed_history(&keys));
        declared.extend(lane::tenant_block(&keys, &lease.msg_id));
        let args: Vec<Value> = vec![
            GROUP.into(),
            lease.task_id.as_str().into(),
            mid.into(),
            duration_ms(delay).into(),
            error.into(),
            ran(report),
            logs(report),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let n = self.run(|s| &s.retry, declared, args).await?;
        Ok(RetryCode::from_reply(reply::int(&n, "retry")?) == Some(RetryCode::Scheduled))
    }

    /// snooze.lua.
    async fn run_snooze(
        &self,
        lease: &LeaseId,
        report: &AttemptReport,
        delay: Duration,
        max_snoozes: u32,
    ) -> Result<SnoozeOutcome, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let (stream, mid) = lane::locate(&keys, &lease.msg_id);
        let mut declared = vec![stream, keys.scheduled(), keys.task(&lease.task_id)];
        declared.extend(lane::tenant_block(&keys, &lease.msg_id));
        let args: Vec<Value> = vec![
            GROUP.into(),
            lease.task_id.as_str().into(),
            mid.into(),
            duration_ms(delay).into(),
            max_snoozes.into(),
            ran(report),
            logs(report),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let reply = self.run(|s| &s.snooze, declared, args).await?;
        let row = reply::array(reply, "snooze")?;
        let code = row.first().map(|v| reply::int(v, "snooze")).transpose()?;
        let snoozes = row
            .get(1)
            .map(|v| reply::int(v, "snooze"))
            .transpose()?
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0);
        Ok(match code.and_then(SnoozeCode::from_reply) {
            Some(SnoozeCode::Snoozed) => SnoozeOutcome::Snoozed { snoozes },
            Some(SnoozeCode::TooMany) => SnoozeOutcome::TooMany { snoozes },
            Some(SnoozeCode::Stale) | None => SnoozeOutcome::Stale,
        })
    }

    /// backoff.lua.
    async fn run_backoff(
        &self,
        lease: &LeaseId,
        report: &AttemptReport,
        scope: &BackoffScope,
        delay: Duration,
    ) -> Result<BackoffOutcome, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let (stream, mid) = lane::locate(&keys, &lease.msg_id);
        let (code, key) = match scope {
            BackoffScope::Queue => ("q", ""),
            BackoffScope::Key(k) => {
                crate::keys::check_rate_key(k)?;
                ("k", k.as_str())
            }
        };
        let mut declared = vec![
            stream,
            keys.scheduled(),
            keys.task(&lease.task_id),
            keys.queue_block(),
            keys.key_blocks(),
            keys.levels(),
            keys.throttled_day(now_ms().div_euclid(DAY_MS)),
        ];
        declared.extend(lane::tenant_block(&keys, &lease.msg_id));
        let delay = delay.clamp(crate::MIN_BACKOFF, crate::MAX_BACKOFF);
        let args: Vec<Value> = vec![
            GROUP.into(),
            lease.task_id.as_str().into(),
            mid.into(),
            duration_ms(delay).into(),
            code.into(),
            key.into(),
            ran(report),
            logs(report),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let reply = self.run(|s| &s.backoff, declared, args).await?;
        let row = reply::array(reply, "backoff")?;
        let num = |i: usize| {
            row.get(i)
                .map(|v| reply::int(v, "backoff"))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        Ok(match BackoffCode::from_reply(num(0)?) {
            Some(BackoffCode::Blocked) => BackoffOutcome::Blocked {
                until_ms: num(1)?,
                due_ms: num(2)?,
            },
            Some(BackoffCode::Stale) | None => BackoffOutcome::Stale,
        })
    }

    /// dead.lua.
    async fn run_dead(
        &self,
        lease: &LeaseId,
        report: &AttemptReport,
        error: &str,
        count_attempt: bool,
    ) -> Result<DeadOutcome, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let tkey = keys.task(&lease.task_id);
        let (stream, mid) = lane::locate(&keys, &lease.msg_id);
        let mut declared = vec![
            stream,
            keys.archived(),
            keys.failed(),
            tkey.clone(),
            keys.done(&lease.task_id),
            self.unique_or(&keys, lease, tkey),
        ];
        declared.extend(failed_history(&keys));
        declared.extend(lane::tenant_block(&keys, &lease.msg_id));
        let args: Vec<Value> = vec![
            GROUP.into(),
            lease.task_id.as_str().into(),
            mid.into(),
            error.into(),
            reply::flag(count_attempt),
            duration_ms(self.inner.idempotency_window).into(),
            ran(report),
            logs(report),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let reply = self.run(|s| &s.dead, declared, args).await?;
        Ok(match DeadCode::from_reply(reply::int(&reply, "dead")?) {
            Some(DeadCode::Archived) => DeadOutcome::Archived,
            Some(DeadCode::Discarded) => DeadOutcome::Discarded,
            Some(DeadCode::Stale) | None => DeadOutcome::Stale,
        })
    }

    /// cancel.lua.
    async fn run_cancel(
        &self,
        lease: &LeaseId,
        report: &AttemptReport,
        reason: &str,
    ) -> Result<CancelOutcome, BrokerError> {
        let keys = self.queue_keys(&lease.queue);
        let tkey = keys.task(&lease.task_id);
        let (stream, mid) = lane::locate(&keys, &lease.msg_id);
        let mut declared = vec![
            stream,
            keys.cancelled(),
            tkey.clone(),
            self.unique_or(&keys, lease, tkey),
        ];
        declared.extend(lane::tenant_block(&keys, &lease.msg_id));
        let args: Vec<Value> = vec![
            GROUP.into(),
            lease.task_id.as_str().into(),
            mid.into(),
            reason.into(),
            ran(report),
            logs(report),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let reply = self.run(|s| &s.cancel, declared, args).await?;
        Ok(
            match CancelCode::from_reply(reply::int(&reply, "cancel")?) {
                Some(CancelCode::Cancelled) => CancelOutcome::Cancelled,
                Some(CancelCode::Stale) | None => CancelOutcome::Stale,
            },
        )
    }

    /// The result argument of one completion: the handler's result when the task is retained
    /// (none is kept otherwise), or a note in its place when it is over the payload limit.
    fn result_arg(&self, retention: Option<Duration>, result: Option<&[u8]>) -> Value {
        match (retention, result) {
            (Some(_), Some(r)) if r.len() > self.inner.max_payload => {
                let mut note = vec![crate::OVERSIZED_RESULT];
                note.extend_from_slice(
                    format!(
                        "result of {} bytes is over the limit of {} bytes",
                        r.len(),
                        self.inner.max_payload
                    )
                    .as_bytes(),
                );
                Value::Bytes(note.into())
            }
            (Some(_), Some(r)) => Value::Bytes(r.to_vec().into()),
            _ => Value::from(""),
        }
    }

    /// The unique lock key to declare for `lease` (from its content hash), else `fallback` (the
    /// task hash again, which the script then never treats as a lock).
    fn unique_or(&self, keys: &QueueKeys, lease: &LeaseId, fallback: String) -> String {
        match &lease.unique_key {
            Some(hash) if !hash.is_empty() => keys.unique(hash),
            _ => fallback,
        }
    }
}

/// The script calls of one batch end: per queue, per lane, at most `chunk` settlements each,
/// in the order they were given.
fn batches<'a>(
    all: &[&'a Settlement],
    groups: &[(&'a QueueName, Vec<usize>)],
    chunk: usize,
) -> Vec<Batch<'a>> {
    let mut out = Vec::new();
    for (queue, idx) in groups {
        for (level, lane_idx) in lane::by_lane(idx.iter().map(|&i| all[i].lease.msg_id.as_str())) {
            let lane_idx: Vec<usize> = lane_idx.into_iter().map(|k| idx[k]).collect();
            for part in lane_idx.chunks(chunk) {
                out.push(Batch {
                    queue,
                    level,
                    idx: part.to_vec(),
                });
            }
        }
    }
    out
}

/// The failed-history keys of today (by this process' clock; the minute inside is Redis'),
/// which the failing transitions declare after their own keys.
pub(super) fn failed_history(keys: &QueueKeys) -> [String; 2] {
    let day = now_ms().div_euclid(DAY_MS);
    [
        keys.history_minutes(HistoryCounter::Failed, day),
        keys.history_day(HistoryCounter::Failed, day),
    ]
}

/// How long an attempt's handler ran, for the attempt history ('' when the caller did not say).
fn ran(report: &AttemptReport) -> Value {
    match report.ran_ms.and_then(|ms| i64::try_from(ms).ok()) {
        Some(ms) => ms.into(),
        None => "".into(),
    }
}

/// What an attempt's handler logged, for the attempt history ('' for nothing).
fn logs(report: &AttemptReport) -> Value {
    report.logs.as_deref().unwrap_or("").into()
}
