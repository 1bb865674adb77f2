//! Leases kept fresh and a running task's progress, which share one script (heartbeat.lua): a
//! progress report also proves its task alive, and a heartbeat carries whatever progress waits.

use std::collections::HashMap;

use fred::bytes::Bytes;
use fred::prelude::*;

use super::{lane, reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    duration_ms, BrokerError, ProgressUpdate, QueueKeys, QueueName, TaskProgress, GROUP,
    MAX_PROGRESS_BYTES, PROGRESS_TTL,
};

/// Entry ids per heartbeat call: XCLAIM takes them unpacked, and Lua's unpack stops near 8,000
/// values (a server with 10,000 running tasks of one queue would fail every beat).
const IDS_PER_CALL: usize = 1000;

impl RedisBroker {
    /// Refreshes the leases of `msg_ids` held by `consumer` and writes `updates` of those still
    /// held; answers the ids still held. One call per lane and chunk of ids.
    pub(super) async fn beat(
        &self,
        queue: &QueueName,
        consumer: &str,
        msg_ids: &[String],
        updates: &[ProgressUpdate],
    ) -> Result<Vec<String>, BrokerError> {
        if msg_ids.is_empty() {
            return Ok(Vec::new());
        }
        for u in updates {
            if u.json.len() > MAX_PROGRESS_BYTES {
                return Err(BrokerError::InvalidOption(format!(
                    "progress of task {} is {} bytes, over the {MAX_PROGRESS_BYTES} limit",
                    u.task_id,
                    u.json.len()
                )));
            }
        }
        let keys = self.queue_keys(queue);
        let by_msg: HashMap<&str, &ProgressUpdate> =
            updates.iter().map(|u| (u.msg_id.as_str(), u)).collect();
        let mut owned = Vec::with_capacity(msg_ids.len());
        for (level, idx) in lane::by_lane(msg_ids.iter().map(String::as_str)) {
            let stream = keys.lane(level);
            for part in idx.chunks(IDS_PER_CALL) {
                let mut declared = vec![stream.clone()];
                let mut args: Vec<Value> = vec![GROUP.into(), consumer.into()];
                args.push(Value::from(i64::try_from(part.len()).unwrap_or(i64::MAX)));
                args.extend(
                    part.iter()
                        .map(|&i| Value::from(lane::split(&msg_ids[i]).1)),
                );
                args.push(duration_ms(PROGRESS_TTL).into());
                for &i in part {
                    if let Some(u) = by_msg.get(msg_ids[i].as_str()) {
                        declared.push(keys.progress(&u.task_id));
                        args.push(lane::split(&u.msg_id).1.into());
                        args.push(Bytes::copy_from_slice(&u.json).into());
                    }
                }
                declared.extend(self.event_stream(&keys).await?);
                let got = reply::array(
                    self.run(|s| &s.heartbeat, declared, args).await?,
                    "heartbeat",
                )?;
                for v in got {
                    owned.push(lane::qualify(level, reply::string(v, "heartbeat")?));
                }
            }
        }
        Ok(owned)
    }

    /// Task `id`'s last progress as stored; a damaged value is a decode error.
    pub(super) async fn read_progress(
        &self,
        keys: &QueueKeys,
        id: &str,
    ) -> Result<Option<TaskProgress>, BrokerError> {
        let raw: Option<Bytes> = self
            .inner
            .client
            .get(keys.progress(id))
            .await
            .map_err(store)?;
        Ok(raw.map(|r| TaskProgress::decode(r.as_ref())).transpose()?)
    }
}
