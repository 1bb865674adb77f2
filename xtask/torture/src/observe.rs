//! Reads what Redis holds at the end of a run (every model task's record, the queues' books,
//! every key of the namespace) and, for a violation, the task's raw state.

use std::collections::HashMap;

use anyhow::Result;
use chronos::fred::prelude::*;
use chronos::fred::types::{ClusterHash, CustomCommand, Value};
use chronos::{
    HistorySpan, Inspect as _, Keyspace, Operate as _, QueueName, RedisBroker, TaskState,
};

use crate::check::{Books, KeyInfo, Record};
use crate::job::queue;
use crate::model::Model;

/// A Redis value as text (binary bytes shown lossily, as the inspector would not).
fn text(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Integer(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::String(s) => s.replace('\n', " | "),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.replace('\n', " | "),
            // An envelope or a payload (MessagePack): its size says enough here.
            Err(_) => format!("<{} bytes>", b.len()),
        },
        Value::Array(a) => format!("[{}]", a.iter().map(text).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.clone()
                .inner()
                .into_iter()
                .map(|(k, v)| format!("{}: {}", k.as_str_lossy(), text(&v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Queued => "QUEUED".into(),
    }
}

async fn raw(client: &Client, cmd: &'static str, args: Vec<String>) -> Result<Value> {
    Ok(client
        .custom(
            CustomCommand::new_static(cmd, ClusterHash::FirstKey, false),
            args,
        )
        .await?)
}

/// Every model task's record, by id.
pub(crate) async fn records(
    broker: &RedisBroker,
    model: &Model,
) -> Result<HashMap<(String, String), Option<Record>>> {
    let mut out = HashMap::new();
    for (queue, id) in model.by_id.keys() {
        let key = (queue.clone(), id.clone());
        if out.contains_key(&key) {
            continue;
        }
        let q = QueueName::new(queue)?;
        let rec = broker.task(&q, id).await?.map(|r| Record {
            state: r.state,
            last_error: r.envelope.ok().and_then(|e| e.last_error),
        });
        out.insert(key, rec);
    }
    Ok(out)
}

/// Each queue's counts, history sums and dedup locks; and the ids its kept sets hold.
pub(crate) async fn books(
    broker: &RedisBroker,
) -> Result<(HashMap<String, Books>, HashMap<String, Vec<String>>)> {
    let mut books = HashMap::new();
    let mut kept = HashMap::new();
    for (name, _) in queue::ALL {
        let q = QueueName::new(name)?;
        let stats = broker.queue_stats(&q).await?;
        let history = broker
            .history(&q, HistorySpan::Minutes)
            .await?
            .iter()
            .fold((0, 0), |(p, f), h| (p + h.processed, f + h.failed));
        let locks = broker.dedup_locks(&q, 10_000).await?;
        let mut ids = Vec::new();
        for state in [
            TaskState::Archived,
            TaskState::Cancelled,
            TaskState::Completed,
        ] {
            ids.extend(
                broker
                    .list_tasks(&q, state, 0, 1_000_000)
                    .await?
                    .into_iter()
                    .map(|r| r.id),
            );
        }
        kept.insert(name.to_string(), ids);
        books.insert(
            name.to_string(),
            Books {
                stats,
                history,
                locks,
            },
        );
    }
    Ok((books, kept))
}

/// Every key of namespace `ns` on the nodes at `urls` (each node asked alone, so a cluster's
/// keys are found where they live), with its type, TTL, size and (streams) pending deliveries.
pub(crate) async fn keys(urls: &[String], ns: &str) -> Result<Vec<KeyInfo>> {
    let mut out = Vec::new();
    for url in urls {
        let client = Builder::from_config(Config::from_url(url)?).build()?;
        client.init().await?;
        let found = node_keys(&client, ns).await;
        let _ = client.quit().await;
        out.extend(found?);
    }
    Ok(out)
}

/// The keys of one node.
async fn node_keys(client: &Client, ns: &str) -> Result<Vec<KeyInfo>> {
    let mut names: Vec<String> = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, page): (String, Vec<String>) = client
            .scan_page(cursor, format!("{ns}:*"), Some(1_000), None)
            .await?;
        names.extend(page);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for key in names {
        let kind = text(&raw(client, "TYPE", vec![key.clone()]).await?);
        if kind == "none" {
            // Expired between the scan and now.
            continue;
        }
        let ttl_ms: i64 = client.pttl(&key).await?;
        let len_cmd = match kind.as_str() {
            "zset" => Some("ZCARD"),
            "hash" => Some("HLEN"),
            "set" => Some("SCARD"),
            "stream" => Some("XLEN"),
            "list" => Some("LLEN"),
            _ => None,
        };
        let len = match len_cmd {
            Some(c) => match raw(client, c, vec![key.clone()]).await? {
                Value::Integer(n) => n.max(0) as u64,
                _ => 0,
            },
            None => 1,
        };
        let pending = if kind == "stream" {
            stream_pending(client, &key).await.unwrap_or(0)
        } else {
            0
        };
        let fields = if kind == "hash" && len <= 50 {
            let v: Vec<String> = client.hkeys(&key).await.unwrap_or_default();
            v
        } else {
            Vec::new()
        };
        out.push(KeyInfo {
            key,
            kind,
            ttl_ms,
            len,
            pending,
            fields,
        });
    }
    Ok(out)
}

/// Deliveries pending in every consumer group of a stream (XINFO GROUPS).
async fn stream_pending(client: &Client, key: &str) -> Result<u64> {
    let v = raw(client, "XINFO", vec!["GROUPS".into(), key.to_string()]).await?;
    let mut total = 0;
    let groups = match v {
        Value::Array(a) => a,
        _ => return Ok(0),
    };
    for g in groups {
        let pairs: Vec<(String, Value)> = match g {
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|c| match c {
                    [k, v] => Some((text(k), v.clone())),
                    _ => None,
                })
                .collect(),
            Value::Map(m) => m
                .inner()
                .into_iter()
                .map(|(k, v)| (k.as_str_lossy().into_owned(), v))
                .collect(),
            _ => continue,
        };
        for (k, v) in pairs {
            if k == "pending" {
                if let Value::Integer(n) = v {
                    total += n.max(0) as u64;
                }
            }
        }
    }
    Ok(total)
}

/// Task `id`'s raw state: its hash, the sets that hold it and what the inspector says.
pub(crate) async fn task_state(
    broker: &RedisBroker,
    ns: &str,
    queue: &str,
    id: &str,
) -> Vec<String> {
    let (Ok(space), Ok(q)) = (Keyspace::new(ns), QueueName::new(queue)) else {
        return vec![format!("no keys for namespace {ns:?}, queue {queue:?}")];
    };
    let keys = space.queue(&q);
    let client = broker.client();
    let mut out = Vec::new();
    let hash = keys.task(id);
    match raw(client, "HGETALL", vec![hash.clone()]).await {
        Ok(v) => out.push(format!("HGETALL {hash} = {}", text(&v))),
        Err(e) => out.push(format!("HGETALL failed: {e}")),
    }
    for (state, set) in [
        (TaskState::Scheduled, keys.scheduled()),
        (TaskState::Retry, keys.retry()),
        (TaskState::Archived, keys.archived()),
        (TaskState::Completed, keys.completed()),
        (TaskState::Cancelled, keys.cancelled()),
    ] {
        if let Ok(v) = raw(client, "ZSCORE", vec![set, id.to_string()]).await {
            if !matches!(v, Value::Null) {
                out.push(format!("in {} (score {})", state.as_str(), text(&v)));
            }
        }
    }
    match broker.task(&q, id).await {
        Ok(Some(r)) => out.push(format!(
            "inspector: {:?}, level {}, snoozes {}, attempts {}",
            r.state,
            r.priority.get(),
            r.snoozes,
            r.attempts.len()
        )),
        Ok(None) => out.push("inspector: no such task".into()),
        Err(e) => out.push(format!("inspector: {e}")),
    }
    out
}
