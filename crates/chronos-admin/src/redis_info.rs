//! The Redis server a console looks at: version, mode, memory and clients, from `INFO`.

use chronos_broker::RedisBroker;
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// The Redis server a console looks at, from `INFO`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RedisInfo {
    /// `redis_version`.
    pub version: String,
    /// `redis_mode` (standalone, cluster, sentinel).
    pub mode: String,
    /// `used_memory` in bytes.
    pub used_memory: u64,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub maxmemory_policy: String,
    /// `connected_clients`.
    pub connected_clients: u64,
    /// `uptime_in_seconds`.
    pub uptime_seconds: u64,
}

impl RedisInfo {
    /// Reads the fields from the text of `INFO` (lines `name:value`; unknown or missing fields
    /// stay empty or zero: a console shows what the server tells).
    pub fn parse(info: &str) -> Self {
        let mut r = RedisInfo::default();
        for line in info.lines() {
            let Some((k, v)) = line.trim().split_once(':') else {
                continue;
            };
            let n = || v.parse::<u64>().unwrap_or(0);
            match k {
                "redis_version" => r.version = v.to_string(),
                "redis_mode" => r.mode = v.to_string(),
                "used_memory" => r.used_memory = n(),
                "maxmemory" => r.maxmemory = n(),
                "maxmemory_policy" => r.maxmemory_policy = v.to_string(),
                "connected_clients" => r.connected_clients = n(),
                "uptime_in_seconds" => r.uptime_seconds = n(),
                _ => {}
            }
        }
        r
    }
}

impl Admin<RedisBroker> {
    /// Version, memory and clients of the Redis server (of the node answering, on a cluster).
    pub async fn redis_info(&self) -> Result<RedisInfo, AdminError> {
        Ok(RedisInfo::parse(&self.broker.info().await?))
    }
}
