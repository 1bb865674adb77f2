#![allow(dead_code, unreachable_pub)]

use chronos_broker::{RedisBroker, TaskArgs};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Email {
    pub to: String,
    pub n: u32,
}

impl TaskArgs for Email {
    const KIND: &'static str = "email";
}

pub async fn broker() -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .max_payload_bytes(4096)
        .connect()
        .await
        .expect("connect")
}

pub async fn cluster_broker() -> RedisBroker {
    let url = chronos_testkit::shared_cluster_url().expect("redis cluster for tests");
    RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect cluster")
}

pub fn email(n: u32) -> Email {
    Email {
        to: format!("user{n}@example.com"),
        n,
    }
}

/// Fetches like a worker does and marks every delivery started (what the worker does right
/// before running a handler), merging the task record's attempt count, last error and unique
/// lock into each lease.
pub async fn take(
    b: &RedisBroker,
    reader: &mut chronos_broker::RedisReader,
    queue: &chronos_broker::QueueName,
    consumer: &str,
    count: usize,
    block: std::time::Duration,
) -> chronos_broker::Fetched {
    use chronos_broker::{Consume, StartOutcome};
    let mut f = b
        .fetch(reader, queue, consumer, count, block)
        .await
        .expect("fetch");
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    let outcomes = b.start(queue, &ids).await.expect("start");
    for (l, o) in f.leases.iter_mut().zip(outcomes) {
        match o {
            StartOutcome::Started(a) => {
                l.id.unique_key = a.unique_key;
                if let Ok(e) = &mut l.envelope {
                    e.retried = a.retried;
                    e.max_retry = a.max_retry;
                    e.last_error = a.last_error;
                    e.last_failed_at_ms = a.last_failed_at_ms;
                }
            }
            other => panic!("delivery {} not started: {other:?}", l.id.msg_id),
        }
    }
    f
}
