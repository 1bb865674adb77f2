use serde::{Deserialize, Serialize};

use crate::DecodeError;

/// What a running worker server publishes about itself, refreshed on every heartbeat and
/// expired by TTL when the server stops heartbeating (crash, network cut, clean exit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// Server id; also the consumer name of its deliveries in every queue's group.
    pub id: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Queues it consumes, with their weights.
    pub queues: Vec<(String, u32)>,
    /// Most tasks it runs at once.
    pub concurrency: u32,
    /// When it started (unix ms).
    pub started_at_ms: i64,
    /// Tasks running at the last heartbeat.
    pub running: u32,
    /// When the record was last written (unix ms).
    pub last_seen_ms: i64,
    /// The tasks its handlers were running at the last heartbeat, longest running first (at
    /// most [`RUNNING_LISTED`]; `running` counts them all). Empty in records of older versions.
    #[serde(default)]
    pub tasks: Vec<RunningTask>,
    /// Most archived tasks its janitor keeps per queue (the worker's `ServerConfig::archive_max`):
    /// past it, the oldest are deleted, dead letters and tasks an operator archived alike. An
    /// operator's archive names what that will delete. None in records of older versions.
    #[serde(default)]
    pub archive_max: Option<u64>,
}

/// Most running tasks one server record lists ([`ServerRecord::tasks`]).
pub const RUNNING_LISTED: usize = 100;

/// The archive cap a worker server applies unless configured otherwise: at most this many
/// archived tasks per queue ([`ServerRecord::archive_max`]).
pub const DEFAULT_ARCHIVE_MAX: u64 = 10_000;

/// A task a server's handler runs, as its record lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningTask {
    /// Its queue.
    pub queue: String,
    /// Its id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// When its handler started (unix ms, the server's clock).
    pub started_at_ms: i64,
}

impl ServerRecord {
    /// MessagePack with field names, so fields can be added compatibly.
    pub fn encode(&self) -> Result<Vec<u8>, rmp_serde::encode::Error> {
        rmp_serde::to_vec_named(self)
    }

    /// Decodes a record; bad bytes give a [`DecodeError`], never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Malformed(e.to_string()))
    }
}
