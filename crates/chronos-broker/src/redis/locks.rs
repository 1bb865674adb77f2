//! Deduplication locks as an operator sees them: listed by a bounded SCAN of the queue's lock
//! keys (in its hash slot, so one node of a cluster), released one by one by a script.

use fred::prelude::*;

use super::protocol::STATE;
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    BrokerError, DedupLock, QueueKeys, QueueName, TaskState, LOCK_KEY_PREFIX, MAX_DEDUP_KEY_LEN,
};

/// Keys one listing reads at most (SCAN work), however few locks it finds: a listing never
/// walks a whole large keyspace.
const MAX_SCANNED: u64 = 200_000;

/// Keys asked for per SCAN page.
const SCAN_COUNT: u32 = 1_000;

impl RedisBroker {
    /// The deduplication locks of `queue` held now, sorted by key, at most `limit` of them
    /// (found by SCAN in the queue's slot, reading at most 200,000 keys: on a Redis holding more
    /// keys the listing may be partial). Each with its holder, the holder's state and the time
    /// left. Read only.
    pub async fn dedup_locks(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> Result<Vec<DedupLock>, BrokerError> {
        let keys = self.queue_keys(queue);
        let base = keys.unique("");
        let pattern = format!("{}*", glob_escape(&base));
        let client = &self.inner.client;
        let mut found: Vec<String> = Vec::new();
        let mut cursor = "0".to_string();
        let mut scanned = 0u64;
        loop {
            let (next, page): (String, Vec<String>) = client
                .scan_page(cursor, pattern.clone(), Some(SCAN_COUNT), None)
                .await
                .map_err(store)?;
            scanned += u64::from(SCAN_COUNT);
            found.extend(page.into_iter().filter(|k| k.starts_with(&base)));
            if next == "0" || found.len() >= limit || scanned >= MAX_SCANNED {
                break;
            }
            cursor = next;
        }
        found.sort();
        found.dedup();
        found.truncate(limit);
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let pipe = client.pipeline();
        for k in &found {
            let _: () = pipe.get(k.as_str()).await.map_err(store)?;
            let _: () = pipe.pttl(k.as_str()).await.map_err(store)?;
        }
        let values: Vec<Value> = pipe.all().await.map_err(store)?;
        let mut held = Vec::new();
        for (k, pair) in found.iter().zip(values.chunks(2)) {
            // A lock that expired between the scan and the read, or a key of another type, is
            // not listed.
            let Some(holder) = pair.first().and_then(|v| v.as_string()) else {
                continue;
            };
            let ttl = pair.get(1).and_then(Value::as_i64).unwrap_or(-1);
            held.push((k.clone(), holder, ttl));
        }
        let pipe = client.pipeline();
        for (_, holder, _) in &held {
            let _: () = pipe.hget(keys.task(holder), STATE).await.map_err(store)?;
        }
        let states: Vec<Value> = if held.is_empty() {
            Vec::new()
        } else {
            pipe.try_all::<Value>()
                .await
                .into_iter()
                .map(|r| r.unwrap_or(Value::Null))
                .collect()
        };
        Ok(held
            .into_iter()
            .zip(states.into_iter().chain(std::iter::repeat(Value::Null)))
            .map(|((k, holder, ttl), state)| DedupLock {
                key: shown_key(&k[base.len()..]),
                holder,
                holder_state: state.as_string().as_deref().and_then(TaskState::parse),
                expires_in_ms: u64::try_from(ttl).ok(),
            })
            .collect())
    }

    /// Releases the deduplication lock `key` of `queue` (as [`RedisBroker::dedup_locks`] shows
    /// it: the caller's key, or `#<hash>`), so the next enqueue with that key creates a task;
    /// only while it is held by `holder`, when given. The holder itself is left as it is (it
    /// still runs), but no longer releases the lock when it starts or ends. True when a lock was
    /// released.
    pub async fn release_dedup_lock(
        &self,
        queue: &QueueName,
        key: &str,
        holder: Option<&str>,
    ) -> Result<bool, BrokerError> {
        let keys = self.queue_keys(queue);
        let lock = lock_key(&keys, key)?;
        let current: Option<String> = self.inner.client.get(lock.as_str()).await.map_err(store)?;
        let Some(current) = current else {
            return Ok(false);
        };
        if holder.is_some_and(|h| h != current) {
            return Ok(false);
        }
        let declared = vec![lock, keys.task(&current)];
        let args: Vec<Value> = vec![current.as_str().into()];
        let r = self.run(|s| &s.dedup_release, declared, args).await?;
        Ok(reply::int(&r, "dedup release")? == 1)
    }
}

/// The lock key of `key` as shown to operators: `#<hash>` for a payload lock, else the caller's
/// key. A key no enqueue could have made is refused.
fn lock_key(keys: &QueueKeys, key: &str) -> Result<String, BrokerError> {
    let invalid = |why: &str| BrokerError::InvalidOption(format!("dedup key {key:?}: {why}"));
    if key.is_empty() {
        return Err(invalid("empty"));
    }
    if key.len() > MAX_DEDUP_KEY_LEN + 1 {
        return Err(invalid("longer than a deduplication key may be"));
    }
    Ok(match key.strip_prefix('#') {
        Some(hash) if !hash.is_empty() => keys.unique(hash),
        Some(_) => return Err(invalid("no hash after '#'")),
        None => keys.unique(&format!("{LOCK_KEY_PREFIX}{key}")),
    })
}

/// The part of a lock key after the queue's lock prefix, as operators see it.
fn shown_key(rest: &str) -> String {
    match rest.strip_prefix(LOCK_KEY_PREFIX) {
        Some(k) => k.to_string(),
        None => format!("#{rest}"),
    }
}

/// `s` with SCAN's glob characters escaped, so it matches itself.
pub(super) fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_keys_and_lock_keys_round_trip() {
        let keys = crate::Keyspace::new("ns")
            .expect("ns")
            .queue(&QueueName::new("q").expect("q"));
        let base = keys.unique("");
        for shown in ["order:7", "#abc123"] {
            let lock = lock_key(&keys, shown).expect("lock key");
            assert_eq!(shown_key(&lock[base.len()..]), shown);
        }
        assert!(lock_key(&keys, "").is_err());
        assert!(lock_key(&keys, "#").is_err());
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
