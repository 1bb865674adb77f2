//! [`Flows`] over Redis: chain successors and ends, group records, member reports.

use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::protocol::{
    CANCEL_REASON, ERROR, GROUP_CALLBACK_ID, GROUP_FIRED, GROUP_KO, GROUP_OK, GROUP_SIZE, STATE,
};
use super::record::Record;
use super::reply::{ChainNextCode, GroupOpenCode, GroupReportCode};
use super::{reply, RedisBroker};
use crate::counts_offset;
use crate::redis::store::store;
use crate::Due;
use crate::{
    duration_ms, BrokerError, ChainInfo, ChainStatus, DeadLetter, Flows, GroupCreated, GroupRecord,
    GroupState, MemberOutcome, MemberPage, MemberReport, MemberResult, NewTask, QueueName,
    TaskState, SUCCESSOR_MARKER_TTL,
};

impl RedisBroker {
    /// The chain's end record, read as a succeeded status; None while it is not written.
    async fn chain_end(&self, chain: &ChainInfo) -> Result<Option<ChainStatus>, BrokerError> {
        let Some((queue, _)) = chain.steps.last() else {
            return Ok(None);
        };
        let end: Option<Vec<u8>> = self
            .inner
            .client
            .get(self.queue_keys(queue).chain_end(&chain.id))
            .await
            .map_err(store)?;
        Ok(end.map(|end| ChainStatus::Succeeded {
            result: match end.split_first() {
                Some((b'1', r)) => Some(r.to_vec()),
                _ => None,
            },
        }))
    }
}

impl Flows for RedisBroker {
    async fn enqueue_successor(&self, task: NewTask) -> Result<bool, BrokerError> {
        let queue = QueueName::new(task.envelope.queue.as_str())?;
        let bytes = self.encode_task(&task)?;
        let keys = self.queue_keys(&queue);
        let env = &task.envelope;
        let (at, delay) = match task.due() {
            Due::Now => (0, 0),
            Due::At(at) => (at.max(1), 0),
            Due::In(d) => (0, d.max(0)),
        };
        self.register_queue(&queue).await?;
        let mut declared = vec![
            keys.stream(),
            keys.scheduled(),
            keys.task(&env.id),
            keys.successor(&env.id),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let args: Vec<Value> = vec![
            env.id.as_str().into(),
            Value::Bytes(bytes.into()),
            at.into(),
            delay.into(),
            i64::from(env.max_retry).into(),
            reply::flag(env.dead_letter == DeadLetter::Discard),
            duration_ms(SUCCESSOR_MARKER_TTL).into(),
        ];
        let code = reply::int(
            &self.run(|s| &s.chain_next, declared, args).await?,
            "chain_next",
        )?;
        match ChainNextCode::from_reply(code) {
            Some(ChainNextCode::Written) => Ok(true),
            Some(ChainNextCode::Before) => Ok(false),
            _ => Err(reply::bad(
                "chain_next",
                "the queue's stream or scheduled set has the wrong type".into(),
            )),
        }
    }

    async fn finish_chain(
        &self,
        queue: &QueueName,
        chain_id: &str,
        result: Option<Vec<u8>>,
        keep: Duration,
    ) -> Result<(), BrokerError> {
        // One SET NX: atomic, and the first run's result stands (a last step run again after a
        // crash before its ack, or a re-sent call, changes nothing), as a group keeps the first
        // outcome of a member.
        let mut value = Vec::with_capacity(1 + result.as_ref().map_or(0, Vec::len));
        match result {
            Some(r) => {
                value.push(b'1');
                value.extend_from_slice(&r);
            }
            None => value.push(b'0'),
        }
        let _: Value = self
            .inner
            .client
            .set(
                self.queue_keys(queue).chain_end(chain_id),
                Value::Bytes(value.into()),
                Some(Expiration::PX(duration_ms(keep).max(1))),
                Some(SetOptions::NX),
                false,
            )
            .await
            .map_err(store)?;
        Ok(())
    }

    async fn chain_state(&self, chain: &ChainInfo) -> Result<ChainStatus, BrokerError> {
        let client = &self.inner.client;
        if let Some(done) = self.chain_end(chain).await? {
            return Ok(done);
        }
        for (i, (queue, id)) in chain.steps.iter().enumerate() {
            let step = u32::try_from(i).unwrap_or(u32::MAX);
            let rec = Record::read(
                client,
                self.queue_keys(queue).task(id),
                &[STATE, ERROR, CANCEL_REASON],
            )
            .await
            .map_err(store)?;
            let state = rec.text(STATE, "chain")?;
            let Some(state) = state else {
                return Ok(ChainStatus::Unknown);
            };
            match TaskState::parse(&state) {
                Some(TaskState::Completed) => continue,
                Some(TaskState::Archived) => {
                    let error = rec.text(ERROR, "chain")?;
                    return Ok(ChainStatus::Failed {
                        step,
                        error: error.unwrap_or_default(),
                    });
                }
                // The chain stops at a cancelled step, as at a dead one.
                Some(TaskState::Cancelled) => {
                    let reason = rec.text(CANCEL_REASON, "chain")?;
                    return Ok(ChainStatus::Failed {
                        step,
                        error: format!("cancelled: {}", reason.unwrap_or_default()),
                    });
                }
                Some(state) => return Ok(ChainStatus::Running { step, state }),
                None => return Err(reply::bad("chain", format!("unknown state {state:?}"))),
            }
        }
        // Every step completed: the end record was written before the last step's ack, so it is
        // there now unless it expired with the last step.
        Ok(self
            .chain_end(chain)
            .await?
            .unwrap_or(ChainStatus::Succeeded { result: None }))
    }

    async fn open_group(&self, group: &GroupRecord) -> Result<GroupCreated, BrokerError> {
        if group.total == 0 {
            return Err(BrokerError::InvalidOption(
                "a group needs at least one member".into(),
            ));
        }
        let cb = &group.callback;
        if cb.envelope.queue != group.queue.as_str() {
            return Err(BrokerError::InvalidOption(
                "the group's record lives in its callback's queue".into(),
            ));
        }
        let bytes = self.encode_task(cb)?;
        let off = counts_offset(&bytes).ok_or_else(|| {
            BrokerError::InvalidOption("the callback's envelope has no counts placeholder".into())
        })?;
        let fp = {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            h.update(group.total.to_le_bytes());
            h.update([u8::from(group.collect)]);
            h.update(cb.fingerprint().as_bytes());
            h.finalize()[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        self.register_queue(&group.queue).await?;
        let keys = self.queue_keys(&group.queue);
        let args: Vec<Value> = vec![
            i64::try_from(group.total).unwrap_or(i64::MAX).into(),
            Value::Bytes(bytes.into()),
            i64::try_from(off).unwrap_or(i64::MAX).into(),
            cb.envelope.id.as_str().into(),
            i64::from(cb.envelope.max_retry).into(),
            reply::flag(cb.envelope.dead_letter == DeadLetter::Discard),
            reply::flag(group.collect),
            duration_ms(group.ttl).max(1).into(),
            fp.into(),
        ];
        let code = reply::int(
            &self
                .run(|s| &s.group_open, vec![keys.group(&group.id)], args)
                .await?,
            "group_open",
        )?;
        match GroupOpenCode::from_reply(code) {
            Some(GroupOpenCode::Created) => Ok(GroupCreated::Created),
            Some(GroupOpenCode::Exists) => Ok(GroupCreated::Exists),
            Some(GroupOpenCode::IdConflict) => Err(BrokerError::TaskIdConflict {
                id: group.id.clone(),
                queue: group.queue.to_string(),
            }),
            _ => Err(reply::bad(
                "group_open",
                "the group record is not a hash".into(),
            )),
        }
    }

    async fn report_member(&self, report: &MemberReport) -> Result<MemberOutcome, BrokerError> {
        let keys = self.queue_keys(&report.queue);
        let mut declared = vec![
            keys.group(&report.group),
            keys.group_members(&report.group),
            keys.stream(),
            keys.task(&crate::callback_task_id(&report.group)),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let args: Vec<Value> = vec![
            i64::try_from(report.index).unwrap_or(i64::MAX).into(),
            if report.succeeded { "o" } else { "f" }.into(),
            Value::Bytes(report.value.clone().into()),
        ];
        let row = reply::array(
            self.run(|s| &s.group_report, declared, args).await?,
            "group_report",
        )?;
        let code = reply::int(row.first().unwrap_or(&Value::Null), "group_report")?;
        let fired = row.get(3).and_then(Value::as_i64) == Some(1);
        match GroupReportCode::from_reply(code) {
            Some(GroupReportCode::Counted) => Ok(MemberOutcome::Counted { fired }),
            Some(GroupReportCode::Already) => Ok(MemberOutcome::Already),
            Some(GroupReportCode::UnknownGroup) => Ok(MemberOutcome::UnknownGroup),
            Some(GroupReportCode::OutOfRange) => Err(BrokerError::InvalidOption(format!(
                "member {} is out of the range of group {:?}",
                report.index, report.group
            ))),
            _ => Err(reply::bad(
                "group_report",
                "the group record or its callback queue is corrupt".into(),
            )),
        }
    }

    async fn group_state(
        &self,
        queue: &QueueName,
        group: &str,
    ) -> Result<Option<GroupState>, BrokerError> {
        let v: Vec<Option<String>> = self
            .inner
            .client
            .hmget(
                self.queue_keys(queue).group(group),
                vec![
                    GROUP_SIZE,
                    GROUP_OK,
                    GROUP_KO,
                    GROUP_FIRED,
                    GROUP_CALLBACK_ID,
                ],
            )
            .await
            .map_err(store)?;
        let field = |i: usize| v.get(i).cloned().flatten();
        let Some(total) = field(0) else {
            return Ok(None);
        };
        let num = |s: Option<String>| s.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        Ok(Some(GroupState {
            total: num(Some(total)),
            succeeded: num(field(1)),
            failed: num(field(2)),
            fired: field(3).as_deref() == Some("1"),
            callback_id: field(4).unwrap_or_default(),
        }))
    }

    async fn group_results(
        &self,
        queue: &QueueName,
        group: &str,
        cursor: u64,
        count: usize,
    ) -> Result<MemberPage, BrokerError> {
        let cmd = CustomCommand::new_static("HSCAN", ClusterHash::FirstKey, false);
        let args: Vec<Value> = vec![
            self.queue_keys(queue).group_members(group).into(),
            cursor.to_string().into(),
            "COUNT".into(),
            i64::try_from(count.clamp(1, 10_000)).unwrap_or(1000).into(),
        ];
        let reply = reply::array(
            self.inner.client.custom(cmd, args).await.map_err(store)?,
            "hscan",
        )?;
        let mut parts = reply.into_iter();
        let next = reply::string(parts.next().unwrap_or(Value::Null), "hscan")?;
        let next: u64 = next
            .parse()
            .map_err(|_| reply::bad("hscan", format!("bad cursor {next:?}")))?;
        let flat = reply::array(parts.next().unwrap_or(Value::Null), "hscan")?;
        let mut members = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let index = reply::string(k, "hscan")?;
            let Ok(index) = index.parse::<u64>() else {
                continue;
            };
            let v = reply::bytes(v, "hscan")?;
            let outcome = match v.split_first() {
                Some((b'o', r)) => Ok(r.to_vec()),
                Some((_, e)) => Err(String::from_utf8_lossy(e).into_owned()),
                None => continue,
            };
            members.push(MemberResult { index, outcome });
        }
        Ok(MemberPage {
            members,
            next: (next != 0).then_some(next),
        })
    }
}
