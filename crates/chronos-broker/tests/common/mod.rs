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
