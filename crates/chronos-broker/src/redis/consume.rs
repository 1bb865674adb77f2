use std::time::Duration;

use fred::prelude::*;

use super::lease::{decode_envelope, lease_of_entry, new_lease, ReadReply};
use super::reply::StartCode;
use super::{client_builder, lane, reply, RedisBroker, MAX_BLOCK};
use crate::keys::DAY_MS;
use crate::redis::store::{says, store};
use crate::{
    duration_ms, now_ms, Attempt, BrokerError, Consume, Fetched, HistoryCounter, Interrupt, Lease,
    LeaseId, QueueKeys, QueueName, Settled, Settlement, StartOutcome, GROUP,
};

/// A connection reserved for blocking reads.
#[derive(Debug)]
pub struct RedisReader {
    pub(super) client: Client,
}

impl Consume for RedisBroker {
    type Reader = RedisReader;

    async fn open_reader(&self) -> Result<RedisReader, BrokerError> {
        let client = client_builder(self.inner.client.client_config())
            .build()
            .map_err(store)?;
        client.init().await.map_err(store)?;
        Ok(RedisReader { client })
    }

    async fn close_reader(&self, reader: RedisReader) {
        let _ = reader.client.quit().await;
    }

    async fn ensure_queue(&self, queue: &QueueName) -> Result<(), BrokerError> {
        self.register_queue(queue).await
    }

    /// What is carried is settled first, but for the bare acks of `queue`, which ride in the
    /// claim call (settle.rs: `settle_carried`).
    async fn fetch(
        &self,
        reader: &mut RedisReader,
        queue: &QueueName,
        consumer: &str,
        carry: &[Settlement],
        count: usize,
        block: Duration,
    ) -> Result<Fetched, BrokerError> {
        let carried = self.settle_carried(queue, carry).await?;
        let (acked, mut fetched) = self.claim(queue, consumer, count, &carried.riding).await?;
        fetched.settled = carried.answered(acked)?;
        // A blocked queue is not waited on either: the caller sleeps until the block ends.
        if block.is_zero()
            || count == 0
            || !fetched.leases.is_empty()
            || fetched.dropped > 0
            || fetched.blocked_until_ms.is_some()
        {
            return Ok(fetched);
        }
        // Nothing ready: block on the reader's own connection. XREADGROUP hands each new entry
        // to exactly one waiting consumer (a plain XREAD would wake every idle server for every
        // task). A reply lost here (a reconnect mid-block) strands its entries in this
        // consumer's pending list until the recoverer re-delivers them, without an attempt:
        // they were never started.
        let streams = self.read_streams(queue);
        let names: Vec<&str> = streams.iter().map(|(s, _)| s.as_str()).collect();
        let ids: Vec<&str> = vec![">"; streams.len()];
        let block_ms = block.min(MAX_BLOCK).as_millis().max(1) as u64;
        let read = reader
            .client
            .xreadgroup::<ReadReply, _, _, _, _>(
                GROUP,
                consumer,
                Some(count.max(1) as u64),
                Some(block_ms),
                false,
                names,
                ids,
            )
            .await;
        let reply = match read {
            Ok(r) => r.unwrap_or_default(),
            Err(e) if e.details().starts_with("NOGROUP") => {
                self.regroup(queue).await?;
                return Ok(Fetched {
                    settled: fetched.settled,
                    ..Fetched::default()
                });
            }
            Err(e) => return Err(store(e)),
        };
        let mut fetched = Fetched {
            settled: fetched.settled,
            ..Fetched::default()
        };
        let mut foreign = Vec::new();
        for (key, entries) in reply {
            let Some(level) = streams.iter().find(|(s, _)| *s == key).map(|(_, l)| *l) else {
                continue;
            };
            for (mid, fields) in entries {
                let mid = lane::qualify(level, mid);
                match lease_of_entry(queue, mid.clone(), fields) {
                    Some(l) => fetched.leases.push(l),
                    None => foreign.push(mid),
                }
            }
        }
        // With levels, each stream answers up to `count`: keep the most urgent `count` and
        // hand the rest back at once, unstarted (no attempt spent).
        if fetched.leases.len() > count.max(1) {
            lane::sort_by_urgency(&mut fetched.leases);
            let back: Vec<LeaseId> = fetched
                .leases
                .split_off(count.max(1))
                .into_iter()
                .map(|l| l.id)
                .collect();
            if let Err(e) = self.requeue_leases(queue, &back).await {
                // Held by no one: the recoverer re-delivers them, without an attempt.
                tracing::warn!(queue = %queue, n = back.len(), error = %e, "could not hand back deliveries read past the count");
            }
        }
        fetched.dropped = self.drop_foreign(queue, foreign).await;
        // A block set while this read waited: what it read waits for the block's end instead.
        fetched.leases = self.hold(queue, fetched.leases).await;
        Ok(fetched)
    }

    async fn start(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> Result<Vec<StartOutcome>, BrokerError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.queue_keys(queue);
        let mut out: Vec<Option<StartOutcome>> = (0..leases.len()).map(|_| None).collect();
        for (level, idx) in lane::by_lane(leases.iter().map(|l| l.msg_id.as_str())) {
            let part: Vec<&LeaseId> = idx.iter().map(|&i| &leases[i]).collect();
            let rows = self.start_lane(&keys, level, &part).await?;
            for (i, row) in idx.into_iter().zip(rows) {
                out[i] = Some(row);
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or_else(|| StartOutcome::Corrupt("no start row".into())))
            .collect())
    }

    async fn settle(&self, settlements: &[Settlement]) -> Result<Vec<Settled>, BrokerError> {
        self.settle_refs(&settlements.iter().collect::<Vec<_>>())
            .await
    }

    async fn watch(
        &self,
        reader: &mut RedisReader,
        queues: &[QueueName],
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Option<Vec<(usize, Fetched)>>, BrokerError> {
        super::watch::watch(self, &reader.client, queues, consumer, count, block).await
    }

    async fn interrupter(&self, reader: &RedisReader) -> Option<Interrupt> {
        super::watch::interrupter(&reader.client).await
    }
}

impl RedisBroker {
    /// One start.lua call for deliveries of one lane (`level`'s stream): their rows, in the
    /// order of `leases`.
    async fn start_lane(
        &self,
        keys: &QueueKeys,
        level: Option<u8>,
        leases: &[&LeaseId],
    ) -> Result<Vec<StartOutcome>, BrokerError> {
        // Deliveries of tasks with a hash first (with their keys), then plain tasks' (lib.lua),
        // which need no key; the rows come back in that order.
        let (plain, hashed): (Vec<usize>, Vec<usize>) =
            (0..leases.len()).partition(|&i| leases[i].is_plain());
        let mut declared = Vec::with_capacity(1 + hashed.len());
        declared.push(keys.lane(level));
        let mut args: Vec<Value> = Vec::with_capacity(2 + hashed.len() + leases.len());
        args.push(GROUP.into());
        args.push((hashed.len() as i64).into());
        // A lock a deduplicated task lets go on start is declared with its task (lib.lua keeps
        // to declared keys); the task id goes with it, since a lock names its holder.
        let mut locks = Vec::new();
        for &i in &hashed {
            let lease = leases[i];
            declared.push(keys.task(&lease.task_id));
            args.push(lane::split(&lease.msg_id).1.into());
            match &lease.unique_key {
                Some(k) => {
                    locks.push(keys.unique(k));
                    args.push(lease.task_id.as_str().into());
                }
                None => args.push("".into()),
            }
        }
        declared.extend(locks);
        for &i in &plain {
            args.push(leases[i].msg_id.as_str().into());
        }
        declared.extend(self.event_stream(keys).await?);
        let rows = reply::array(self.run(|s| &s.start, declared, args).await?, "start")?;
        if rows.len() != leases.len() {
            return Err(reply::bad(
                "start",
                format!("{} rows for {} deliveries", rows.len(), leases.len()),
            ));
        }
        let mut out: Vec<Option<StartOutcome>> = (0..leases.len()).map(|_| None).collect();
        for (i, row) in hashed.iter().chain(plain.iter()).zip(rows) {
            out[*i] = Some(start_outcome(keys, row));
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or_else(|| StartOutcome::Corrupt("no start row".into())))
            .collect())
    }

    /// One claim call: acks the plain completions `along` and delivers up to `count` new
    /// entries to `consumer`, at once; how many of `along` it acked, and what it delivered. A
    /// queue whose levels this process did not know yet costs one call more (claim.lua answers
    /// their list and reads nothing until the lanes are declared).
    async fn claim(
        &self,
        queue: &QueueName,
        consumer: &str,
        count: usize,
        along: &[&Settlement],
    ) -> Result<(u64, Fetched), BrokerError> {
        let knew = self.known_levels(queue);
        let (acked, fetched) = self.claim_once(queue, consumer, count, along).await?;
        let now = self.known_levels(queue);
        let declares = |l: &[u8]| (!l.is_empty(), l.contains(&super::TENANT_LANE));
        if count > 0 && fetched.leases.is_empty() && declares(&knew) != declares(&now) {
            let (_, fetched) = self.claim_once(queue, consumer, count, &[]).await?;
            return Ok((acked, fetched));
        }
        Ok((acked, fetched))
    }

    async fn claim_once(
        &self,
        queue: &QueueName,
        consumer: &str,
        count: usize,
        along: &[&Settlement],
    ) -> Result<(u64, Fetched), BrokerError> {
        let keys = self.queue_keys(queue);
        let nonce = format!("{:016x}", rand::random::<u64>());
        let mut declared = vec![keys.stream(), keys.receipt(consumer), keys.levels()];
        // The lanes only for a queue known to have levels: a queue without them declares one
        // key more than before levels existed, and its first fetch after a level appears
        // reports it (claim.lua), so the next one reads it.
        let known = self.known_levels(queue);
        if !known.is_empty() {
            declared.push(keys.settings());
            declared.extend(keys.lanes());
        }
        if known.contains(&super::TENANT_LANE) {
            declared.extend(keys.tenants());
        }
        declared.push(keys.queue_block());
        declared.push(keys.key_blocks());
        // The counters that the completions owed in the receipt go to (claim.lua ARGV[7]).
        let day = now_ms().div_euclid(DAY_MS);
        declared.extend([
            keys.processed(),
            keys.history_minutes(HistoryCounter::Processed, day),
            keys.history_day(HistoryCounter::Processed, day),
        ]);
        let mut args: Vec<Value> = Vec::with_capacity(7 + along.len());
        args.extend([
            GROUP.into(),
            consumer.into(),
            (count as i64).into(),
            duration_ms(RECEIPT_TTL).into(),
            nonce.into(),
            reply::flag(true),
            (along.len() as i64).into(),
        ]);
        args.extend(along.iter().map(|c| Value::from(c.lease.msg_id.as_str())));
        let rows = match self.run(|s| &s.claim, declared, args).await {
            Ok(v) => reply::array(v, "claim")?,
            Err(e) if says(&e, "NOGROUP") => {
                // Redis lost the queue's group, and with it every pending delivery: there is
                // nothing left to ack.
                self.regroup(queue).await?;
                return Ok((0, Fetched::default()));
            }
            Err(e) => return Err(e),
        };
        let mut fetched = Fetched::default();
        let mut levels = Vec::new();
        let mut acked = 0;
        for row in rows {
            if let Some(n) = acked_row(&row) {
                acked = n;
                continue;
            }
            if let Some((until, keyed)) = blocks_row(&row) {
                fetched.blocked_until_ms = (until > 0).then_some(until);
                fetched.key_blocks = keyed;
                continue;
            }
            if let Some(l) = levels_row(&row) {
                levels = l;
                continue;
            }
            match lease(queue, row) {
                Some(l) => fetched.leases.push(l),
                // A row this build cannot read stays in the consumer's pending list; the
                // recoverer removes it (it carries no task id it can name) without an attempt.
                None => fetched.dropped += 1,
            }
        }
        // A blocked queue's answer reads nothing and lists no levels: it says nothing of them,
        // and forgetting them would stop the blocking reads and the recoverer from reading
        // the level and tenant streams for the length of the block.
        if fetched.blocked_until_ms.is_none() {
            self.remember_levels(queue, levels);
        }
        Ok((acked, fetched))
    }

    /// Acks and removes entries read by a blocking read that carry no task, so they never block
    /// the queue; returns how many. A failure leaves them in the consumer's pending list for the
    /// recoverer (which removes entries without a task) and is only logged: the tasks the same
    /// read delivered must not be thrown away with it.
    pub(super) async fn drop_foreign(&self, queue: &QueueName, foreign: Vec<String>) -> usize {
        if foreign.is_empty() {
            return 0;
        }
        let n = foreign.len();
        let keys = self.queue_keys(queue);
        let dropped = async {
            for (level, idx) in lane::by_lane(foreign.iter().map(String::as_str)) {
                let stream = keys.lane(level);
                let mids: Vec<String> = idx
                    .into_iter()
                    .map(|i| lane::split(&foreign[i]).1.to_string())
                    .collect();
                let _: Value = self
                    .inner
                    .client
                    .xack(stream.as_str(), GROUP, mids.clone())
                    .await?;
                let _: Value = self.inner.client.xdel(stream.as_str(), mids).await?;
            }
            Ok::<_, fred::error::Error>(())
        };
        match dropped.await {
            Ok(()) => n,
            Err(e) => {
                tracing::warn!(queue = %queue, n, error = %e, "could not remove entries without a task; the recoverer will");
                0
            }
        }
    }

    /// Redis lost its data (a restart without persistence): recreate the group and go on.
    pub(super) async fn regroup(&self, queue: &QueueName) -> Result<(), BrokerError> {
        self.forget_queues();
        self.register_queue(queue).await
    }
}

/// How long a fetch receipt lives: longer than any re-send of the call can come (commands time
/// out after 10 s), short enough that a consumer that went away leaves nothing for long.
const RECEIPT_TTL: Duration = Duration::from_secs(60);

/// Builds a lease from a claim row `{entry id, task id, envelope, ...}` or a plain task's
/// `{entry id, envelope}`; None for a row without a
/// task (`{entry id}`, already acked and removed by the script) or one that does not parse.
/// The attempt count and last error are not known yet: [`Consume::start`] reads them.
fn lease(queue: &QueueName, row: Value) -> Option<Lease> {
    let cols = reply::array(row, "claim").ok()?;
    let plain = cols.len() == 2;
    let mut cols = cols.into_iter();
    let msg_id = reply::string(cols.next()?, "claim").ok()?;
    if plain {
        // `{entry id, envelope}`: a plain task's entry, whose id is the task's.
        let envelope = decode_envelope(cols.next()?);
        return Some(new_lease(
            queue,
            msg_id.clone(),
            msg_id,
            envelope,
            None,
            None,
            None,
        ));
    }
    let task_id = reply::string(cols.next()?, "claim").ok()?;
    let envelope = decode_envelope(cols.next()?);
    let text = |v: Option<Value>| v.and_then(|v| reply::string(v, "claim").ok());
    let (r, err, f) = (text(cols.next()), text(cols.next()), text(cols.next()));
    // A level's delivery names its level (lane.rs); a main-stream one has no seventh column.
    let level = text(cols.next()).and_then(|l| l.parse::<u8>().ok());
    let msg_id = lane::qualify(level, msg_id);
    Some(new_lease(queue, task_id, msg_id, envelope, r, err, f))
}

/// The acked row of claim.lua, `{'+', how many completions it acked}`; None for any other row.
fn acked_row(row: &Value) -> Option<u64> {
    let Value::Array(cols) = row else { return None };
    if cols.first().and_then(Value::as_str).as_deref() != Some("+") {
        return None;
    }
    Some(cols.get(1).and_then(Value::as_i64).unwrap_or(0).max(0) as u64)
}

/// The blocks row of claim.lua, `{'!', queue block end ms or 0, 1 when keys are blocked}`.
fn blocks_row(row: &Value) -> Option<(i64, bool)> {
    let Value::Array(cols) = row else { return None };
    if cols.first().and_then(Value::as_str).as_deref() != Some("!") {
        return None;
    }
    let num = |i: usize| cols.get(i).and_then(Value::as_i64).unwrap_or(0);
    Some((num(1), num(2) == 1))
}

/// The levels of claim.lua's last row `{'', level, ...}`; None for any other row.
fn levels_row(row: &Value) -> Option<Vec<u8>> {
    let Value::Array(cols) = row else { return None };
    if cols.first().and_then(Value::as_str).as_deref() != Some("") {
        return None;
    }
    Some(
        cols[1..]
            .iter()
            .filter_map(|v| v.as_str().and_then(|s| s.parse::<u8>().ok()))
            .collect(),
    )
}

/// Reads one row of start.lua. A row of the wrong shape is a corrupt record of that task alone.
fn start_outcome(keys: &QueueKeys, row: Value) -> StartOutcome {
    let mut cols = match reply::array(row, "start") {
        Ok(c) => c.into_iter(),
        Err(e) => return StartOutcome::Corrupt(e.to_string()),
    };
    let mut next = || cols.next().unwrap_or(Value::Null);
    match reply::int(&next(), "start").map(StartCode::from_reply) {
        Ok(Some(StartCode::Started)) => {}
        Ok(Some(StartCode::Lost)) => return StartOutcome::Lost,
        _ => {
            // An empty reason would dead-letter the task with a blank error.
            let reason = reply::opt_string(next(), "start")
                .ok()
                .flatten()
                .unwrap_or_else(|| "corrupt task record".into());
            return StartOutcome::Corrupt(reason);
        }
    }
    let number = |v: Value| -> Option<i64> {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse::<i64>().ok()))
    };
    let (retried, max_retry) = match (number(next()), number(next())) {
        (Some(r), Some(x)) => (r, x),
        (r, x) => {
            return StartOutcome::Corrupt(format!(
                "corrupt task record: retried = {r:?}, max retry = {x:?}"
            ))
        }
    };
    let last_error = reply::opt_string(next(), "start").ok().flatten();
    let failed_at = number(next()).unwrap_or(0);
    // The record holds the lock's key name; a lease names the lock by its content hash.
    let lock_prefix = keys.unique("");
    let unique_key = reply::opt_string(next(), "start")
        .ok()
        .flatten()
        .and_then(|k| k.strip_prefix(&lock_prefix).map(str::to_string));
    StartOutcome::Started(Attempt {
        retried: u32::try_from(retried).unwrap_or(u32::MAX),
        max_retry: u32::try_from(max_retry).unwrap_or(u32::MAX),
        last_error,
        last_failed_at_ms: (failed_at > 0).then_some(failed_at),
        unique_key,
    })
}

#[cfg(test)]
mod properties;
