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

/// A second broker (another process, as far as its caches go) on namespace `ns`.
pub async fn broker_in(ns: &str) -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    RedisBroker::builder(url)
        .namespace(ns)
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

/// Redis' clock in ms (`TIME`), the clock its scripts and its idle times read: a test that
/// brackets a call with it knows when the call ran there, however late its reply came back.
pub async fn redis_ms(b: &RedisBroker) -> i64 {
    use chronos_broker::fred::interfaces::ClientLike;
    use chronos_broker::fred::types::{ClusterHash, CustomCommand};
    let t: Vec<String> = b
        .client()
        .custom(
            CustomCommand::new_static("TIME", ClusterHash::Random, false),
            Vec::<String>::new(),
        )
        .await
        .expect("time");
    let part = |i: usize| t[i].parse::<i64>().expect("TIME answers integers");
    part(0) * 1000 + part(1) / 1000
}

/// Waits until Redis counts a subscriber of `channel`. fred answers SUBSCRIBE as soon as it is
/// written (fred 10: `Connection::push_command`, `has_no_responses`), not once Redis has run it,
/// so a message published on another connection right after `subscribe` returned can reach
/// Redis first, and nobody.
pub async fn until_subscribed(b: &RedisBroker, channel: &str) {
    use chronos_broker::fred::interfaces::ClientLike;
    use chronos_broker::fred::types::{ClusterHash, CustomCommand, Value};
    chronos_testkit::eventually(
        std::time::Duration::from_secs(10),
        "Redis counts the subscriber",
        || async {
            let v: Vec<Value> = b
                .client()
                .custom(
                    CustomCommand::new_static("PUBSUB", ClusterHash::Random, false),
                    vec!["NUMSUB", channel],
                )
                .await
                .expect("pubsub numsub");
            v.get(1).and_then(Value::as_i64).unwrap_or(0) >= 1
        },
    )
    .await;
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
        .fetch(reader, queue, consumer, &[], count, block)
        .await
        .expect("fetch");
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    let outcomes = b.start(queue, &ids).await.expect("start");
    for (l, o) in f.leases.iter_mut().zip(outcomes) {
        match o {
            // A plain task's row says nothing its entry did not (it has no record).
            StartOutcome::Started(_) if l.id.is_plain() => {}
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

/// A Redis of the test's own, a proxy in front of it, a broker through the proxy and one direct.
pub struct Rig {
    /// Keeps the server alive.
    pub redis: chronos_testkit::RedisServer,
    /// The proxy.
    pub proxy: chronos_testkit::TcpProxy,
    /// A broker through the proxy.
    pub via: RedisBroker,
    /// A broker straight to the server.
    pub direct: RedisBroker,
}

pub async fn rig() -> Rig {
    let redis = chronos_testkit::RedisServer::start().expect("redis");
    let target: std::net::SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = chronos_testkit::TcpProxy::start(target)
        .await
        .expect("proxy");
    let ns = chronos_testkit::namespace();
    let via = RedisBroker::builder(proxy.url())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect via proxy");
    let direct = RedisBroker::builder(redis.url())
        .namespace(ns)
        .connect()
        .await
        .expect("connect");
    Rig {
        redis,
        proxy,
        via,
        direct,
    }
}

impl Rig {
    /// Arms a lost reply for the next call of script `name`.
    pub fn lose_reply_of(&self, name: &str) {
        let sha = self
            .via
            .script_shas()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, sha)| sha)
            .expect("script");
        self.proxy.drop_reply_to(sha);
    }

    /// Enqueues one task of queue `default` directly and returns its delivery, started through
    /// the proxy as a worker would.
    pub async fn running(&self, opts: chronos_broker::EnqueueOptions) -> chronos_broker::Lease {
        chronos_broker::Client::new(self.direct.clone())
            .enqueue(&email(1), opts)
            .await
            .expect("enqueue");
        let mut reader = chronos_broker::Consume::open_reader(&self.via)
            .await
            .expect("reader");
        let f = take(
            &self.via,
            &mut reader,
            &chronos_broker::QueueName::new("default").expect("queue"),
            "w",
            1,
            std::time::Duration::from_millis(200),
        )
        .await;
        f.leases.into_iter().next().expect("one delivery")
    }

    /// The reply was really dropped (and the call then re-sent, since it returned).
    pub fn assert_lost(&self, n: u64) {
        assert_eq!(self.proxy.dropped_replies(), n, "replies dropped");
    }
}

/// Every `.lua` file under `dir`, in its capability folders too, sorted (for tests that read
/// the scripts' text).
pub fn lua_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("scripts dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some("lua") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Calls of `cmd` counted by Redis since its last `CONFIG RESETSTAT`.
pub async fn calls_of(b: &RedisBroker, cmd: &str) -> u64 {
    use chronos_broker::fred::interfaces::ClientLike;
    use chronos_broker::fred::types::{ClusterHash, CustomCommand};
    let info: String = b
        .client()
        .custom(
            CustomCommand::new_static("INFO", ClusterHash::Random, false),
            vec!["commandstats"],
        )
        .await
        .expect("info");
    let prefix = format!("cmdstat_{cmd}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub async fn reset_stats(b: &RedisBroker) {
    use chronos_broker::fred::interfaces::ClientLike;
    use chronos_broker::fred::types::{ClusterHash, CustomCommand};
    let _: String = b
        .client()
        .custom(
            CustomCommand::new_static("CONFIG", ClusterHash::Random, false),
            vec!["RESETSTAT"],
        )
        .await
        .expect("resetstat");
}
