//! Changes to a waiting task in place: an operator's edit of its payload, run time and level
//! (edit.lua, also the deduplication's replace and debounce), and a new level alone
//! (prioritize.lua).

use fred::bytes::Bytes;
use fred::prelude::*;

use super::actions::outcome;
use super::reply::EditCode;
use super::{reply, RedisBroker};
use crate::{now_ms, ActionOutcome, BrokerError, Priority, QueueName, TaskEdit, TaskState, GROUP};

/// What one edit.lua call changes (None: unchanged).
pub(super) struct Change<'a> {
    /// The new payload.
    pub payload: Option<&'a [u8]>,
    /// The kind the payload is for (None: any).
    pub kind: Option<&'a str>,
    /// The new run time, absolute.
    pub run_at_ms: Option<i64>,
    /// The new level.
    pub level: Option<chronos_core::Priority>,
}

impl RedisBroker {
    /// [`crate::Operate::edit`]: checks the edit, then one edit.lua call.
    pub(super) async fn edit_task(
        &self,
        queue: &QueueName,
        id: &str,
        edit: &TaskEdit,
    ) -> Result<ActionOutcome, BrokerError> {
        crate::keys::check_task_id(id)?;
        if edit.is_empty() {
            return Err(BrokerError::InvalidOption(
                "an edit needs a payload, a run time or a level".into(),
            ));
        }
        if let Some(p) = edit.new_payload() {
            if p.len() > self.inner.max_payload {
                return Err(BrokerError::PayloadTooLarge {
                    size: p.len(),
                    limit: self.inner.max_payload,
                });
            }
        }
        // The run time is made absolute here, once: a call the client re-sends after a lost
        // reply carries the same time, so it finds the task already as asked.
        let change = Change {
            payload: edit.new_payload(),
            kind: edit.kind(),
            run_at_ms: edit.run_at_ms(now_ms()),
            level: edit.new_priority(),
        };
        let (code, said, _) = self.edit_script(queue, id, &change, "").await?;
        Ok(match EditCode::from_reply(code) {
            Some(EditCode::Done) => ActionOutcome::Done,
            Some(EditCode::Already) => ActionOutcome::Already,
            Some(EditCode::NotFound) => ActionOutcome::NotFound,
            Some(EditCode::Refused) => ActionOutcome::Refused(TaskState::parse(&said)),
            Some(EditCode::OtherKind) => {
                return Err(BrokerError::InvalidOption(format!(
                    "task {id:?} is of kind {said:?}, not {:?}",
                    edit.kind().unwrap_or_default()
                )))
            }
            Some(EditCode::Corrupt) | None => ActionOutcome::Corrupt,
        })
    }

    /// [`crate::Operate::prioritize`]: one prioritize.lua call.
    pub(super) async fn prioritize_task(
        &self,
        queue: &QueueName,
        id: &str,
        priority: Priority,
    ) -> Result<ActionOutcome, BrokerError> {
        let keys = self.queue_keys(queue);
        let mut declared = vec![keys.stream(), keys.task(id)];
        declared.extend(keys.lanes());
        declared.push(keys.settings());
        declared.extend(keys.tenants());
        declared.extend(self.event_stream(&keys).await?);
        let args: Vec<Value> = vec![GROUP.into(), id.into(), priority.to_string().into()];
        let res = self.run(|s| &s.prioritize, declared, args).await?;
        let mut cols = reply::array(res, "prioritize")?.into_iter();
        let code = reply::int(&cols.next().unwrap_or(Value::Null), "prioritize")?;
        let state =
            reply::string(cols.next().unwrap_or(Value::Null), "prioritize").unwrap_or_default();
        Ok(outcome(code, &state))
    }

    /// One edit.lua call: its code, the state it names, and the task's run time (codes 1 and
    /// 2). `rule` is the deduplication asking ('' for an operator; see edit.lua).
    pub(super) async fn edit_script(
        &self,
        queue: &QueueName,
        id: &str,
        change: &Change<'_>,
        rule: &str,
    ) -> Result<(i64, String, i64), BrokerError> {
        let keys = self.queue_keys(queue);
        let mut declared = vec![
            keys.stream(),
            keys.task(id),
            keys.scheduled(),
            keys.retry(),
            keys.deduplicated(),
        ];
        declared.extend(keys.lanes());
        declared.push(keys.settings());
        declared.extend(keys.tenants());
        let payload = change.payload;
        let args: Vec<Value> = vec![
            GROUP.into(),
            id.into(),
            reply::flag(payload.is_some()),
            Value::Bytes(Bytes::copy_from_slice(payload.unwrap_or_default())),
            change.kind.unwrap_or_default().into(),
            change
                .run_at_ms
                .map(|ms| ms.to_string())
                .unwrap_or_default()
                .into(),
            change
                .level
                .map(|p| p.to_string())
                .unwrap_or_default()
                .into(),
            rule.into(),
        ];
        declared.extend(self.event_stream(&keys).await?);
        let res = self.run(|s| &s.edit, declared, args).await?;
        let mut cols = reply::array(res, "edit")?.into_iter();
        let code = reply::int(&cols.next().unwrap_or(Value::Null), "edit")?;
        let said = reply::string(cols.next().unwrap_or(Value::Null), "edit").unwrap_or_default();
        let at = reply::int(&cols.next().unwrap_or(Value::Null), "edit").unwrap_or(0);
        Ok((code, said, at))
    }
}
