//! The replica acknowledgement of a durable enqueue (`EnqueueOptions::durable`): `WAIT` on the
//! connection that wrote, and proof that it was that connection.
//!
//! `WAIT` counts the replicas that hold the writes of its own connection. A client that loses
//! its connection between the script and the `WAIT` re-sends the `WAIT` on a new one, perhaps to
//! a promoted replica that never had the write: that server answers for writes it did not see,
//! often "all replicas", and an acknowledged task could be gone. So the connection is named
//! (`CLIENT INFO`: its id and the server's own address) before the script and after the `WAIT`;
//! when the two differ, no replica counts, and the caller retries with the same id.

use std::time::Duration;

use fred::clients::WithOptions;
use fred::prelude::*;
use fred::types::config::Options;

use super::RedisBroker;
use crate::redis::store::store;
use crate::{duration_ms, BrokerError, NewTask};

/// One connection to one server: `CLIENT INFO`'s `id` (never reused while the server lives) and
/// `laddr` (the server's address as it accepted the connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Connection {
    id: String,
    server: String,
}

impl Connection {
    /// Reads `id=` and `laddr=` from a `CLIENT INFO` line; `None` when either is missing.
    fn parse(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.split_ascii_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .map(str::to_string)
        };
        Some(Self {
            id: field("id=")?,
            server: field("laddr=")?,
        })
    }
}

/// The most replicas and the longest wait any durable task of `sent` asked for, or `None` when
/// none is durable.
pub(super) fn wanted<'a>(sent: impl IntoIterator<Item = &'a NewTask>) -> Option<(u32, Duration)> {
    sent.into_iter()
        .filter_map(NewTask::durable)
        .reduce(|(n, a), (m, b)| (n.max(m), a.max(b)))
}

impl RedisBroker {
    /// The client for the server that holds `key`: on a cluster the node of its slot (`WAIT`
    /// and `CLIENT INFO` carry no key to route by), elsewhere the one connection.
    fn node_of(&self, key: &str) -> WithOptions<Client> {
        let client = &self.inner.client;
        match client.cached_cluster_state().and_then(|s| {
            s.get_server(fred::util::redis_keyslot(key.as_bytes()))
                .cloned()
        }) {
            Some(node) => client.with_cluster_node(node),
            None => client.with_options(&Options::default()),
        }
    }

    /// Names the connection that serves `key` now. Sent just before a durable chunk's script,
    /// and just after its `WAIT`.
    pub(super) async fn connection(&self, key: &str) -> Result<Option<Connection>, BrokerError> {
        let info: String = self.node_of(key).client_info().await.map_err(store)?;
        Ok(Connection::parse(&info))
    }

    /// Sends `WAIT` for a durable chunk just written through the connection `before` named, and
    /// returns how many replicas acknowledged it: 0 when the `WAIT` was answered on another
    /// connection (a reconnect in between), whatever it said.
    pub(super) async fn wait_replicas(
        &self,
        key: &str,
        (replicas, wait): (u32, Duration),
        before: Option<Connection>,
    ) -> Result<u32, BrokerError> {
        let node = self.node_of(key);
        // One round trip: Redis runs the `CLIENT INFO` queued behind the `WAIT` once the `WAIT`
        // has answered, on the same connection unless it broke in between.
        let (acked, after) = futures::future::join(
            node.wait::<i64>(i64::from(replicas), duration_ms(wait)),
            self.connection(key),
        )
        .await;
        let (acked, after) = (acked.map_err(store)?, after?);
        if before.is_none() || before != after {
            tracing::warn!(
                ?before,
                ?after,
                acked,
                "the connection changed between a durable write and its WAIT; no replica counts"
            );
            return Ok(0);
        }
        Ok(u32::try_from(acked.max(0)).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::Connection;

    #[test]
    fn a_connection_is_its_id_and_the_server_address() {
        let line = "id=7 addr=127.0.0.1:50312 laddr=127.0.0.1:6379 fd=8 name= age=0 idle=0 \
                    flags=N db=0 cmd=client|info user=default resp=3\n";
        let c = Connection::parse(line).expect("parsed");
        assert_eq!((c.id.as_str(), c.server.as_str()), ("7", "127.0.0.1:6379"));
        let other = Connection::parse("id=7 addr=127.0.0.1:50400 laddr=127.0.0.1:6380 fd=9")
            .expect("parsed");
        assert_ne!(
            c, other,
            "the same id on another server is another connection"
        );
        assert_eq!(Connection::parse("id=7 addr=127.0.0.1:1"), None);
    }
}
