#![allow(dead_code, unreachable_pub, unused_imports)]

pub mod faulty;

use std::sync::Arc;
use std::time::Duration;

use chronos_broker::{QueueName, RedisBroker, TaskArgs};
use chronos_worker::ServerConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub n: u32,
    #[serde(default)]
    pub sleep_ms: u64,
}

impl TaskArgs for Job {
    const KIND: &'static str = "job";
}

pub async fn broker_at(url: &str) -> RedisBroker {
    RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect")
}

pub async fn broker() -> RedisBroker {
    broker_at(&chronos_testkit::shared_url().expect("redis for tests")).await
}

/// Fast loops and no retry delay, so tests finish in well under a second per scenario.
pub fn fast_config() -> ServerConfig {
    ServerConfig {
        concurrency: 4,
        shutdown_timeout: Duration::from_secs(5),
        recover_min_idle: Duration::from_secs(3),
        recover_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(200),
        forward_interval: Duration::from_millis(50),
        janitor_interval: Duration::from_millis(300),
        retry_delay: Arc::new(|_, _| Duration::ZERO),
        ..ServerConfig::default()
    }
}

pub fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

pub use chronos_testkit::eventually;
