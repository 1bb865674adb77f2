//! One blocking read across many idle queues ([`crate::Consume::watch`]), and the interrupt
//! that cuts it short when the set of watched queues changes or the server stops.
//!
//! Standalone and Sentinel only: on Redis Cluster the streams of different queues live in
//! different slots and cannot share one XREADGROUP, so `watch` answers None there and the
//! worker blocks per queue, as before.

use std::time::Duration;

use fred::prelude::*;
use fred::types::ClientUnblockFlag;
use tracing::warn;

use super::lane;
use super::lease::{lease_of_entry, ReadReply};
use super::RedisBroker;
use crate::redis::store::store;
use crate::{BrokerError, Fetched, Interrupt, QueueName, GROUP};

/// Longest block of one watch: under the command timeout with room to spare. Longer than a
/// single queue's [`super::MAX_BLOCK`] because the interrupt, not the timeout, ends a watch
/// early (when the watched queues change, and at shutdown).
pub(super) const WATCH_BLOCK: Duration = Duration::from_secs(5);

pub(super) async fn watch(
    broker: &RedisBroker,
    reader: &Client,
    queues: &[QueueName],
    consumer: &str,
    count: usize,
    block: Duration,
) -> Result<Option<Vec<(usize, Fetched)>>, BrokerError> {
    if broker.inner.client.is_clustered() {
        return Ok(None);
    }
    if queues.is_empty() {
        return Ok(Some(Vec::new()));
    }
    // Each queue's main stream and its levels' streams: (stream, queue index, level).
    let lanes: Vec<(String, usize, Option<u8>)> = queues
        .iter()
        .enumerate()
        .flat_map(|(i, q)| {
            broker
                .read_streams(q)
                .into_iter()
                .map(move |(s, l)| (s, i, l))
        })
        .collect();
    let streams: Vec<String> = lanes.iter().map(|(s, _, _)| s.clone()).collect();
    let ids: Vec<&str> = vec![">"; streams.len()];
    let block_ms = block.min(WATCH_BLOCK).as_millis().max(1) as u64;
    let read = reader
        .xreadgroup::<ReadReply, _, _, _, _>(
            GROUP,
            consumer,
            Some(count.max(1) as u64),
            Some(block_ms),
            false,
            streams.clone(),
            ids,
        )
        .await;
    let reply = match read {
        Ok(r) => r.unwrap_or_default(),
        Err(e) if e.details().starts_with("NOGROUP") => {
            // One stream without its group fails the whole read: recreate every group.
            for q in queues {
                broker.regroup(q).await?;
            }
            return Ok(Some(Vec::new()));
        }
        Err(e) => return Err(store(e)),
    };
    let mut out: Vec<(usize, Fetched)> = Vec::new();
    for (key, entries) in reply {
        // A key we did not ask for cannot come back; skip it rather than guess a queue.
        let Some(&(_, i, level)) = lanes.iter().find(|(s, _, _)| *s == key) else {
            continue;
        };
        let queue = &queues[i];
        let mut fetched = Fetched::default();
        let mut foreign = Vec::new();
        for (mid, fields) in entries {
            let mid = lane::qualify(level, mid);
            match lease_of_entry(queue, mid.clone(), fields) {
                Some(l) => fetched.leases.push(l),
                None => foreign.push(mid),
            }
        }
        fetched.dropped = broker.drop_foreign(queue, foreign).await;
        // A block set while this read waited: what it read waits for the block's end instead.
        fetched.leases = broker.hold(queue, fetched.leases).await;
        if fetched.leases.is_empty() && fetched.dropped == 0 {
            continue;
        }
        // Two streams of one queue answer as one queue's delivery.
        match out.iter_mut().find(|(j, _)| *j == i) {
            Some((_, f)) => {
                f.leases.extend(fetched.leases);
                f.dropped += fetched.dropped;
            }
            None => out.push((i, fetched)),
        }
    }
    for (_, f) in &mut out {
        lane::sort_by_urgency(&mut f.leases);
    }
    Ok(Some(out))
}

/// CLIENT UNBLOCK <id> TIMEOUT for the reader's connection, sent on fred's back channel: the
/// blocked XREADGROUP returns as if its wait ran out (nil), so it takes no entry. True only
/// when Redis says it ended a block (1): a cut sent before the read reached Redis ends nothing
/// and must be sent again.
///
/// None when the user may not send CLIENT UNBLOCK (an ACL without `@dangerous`): probed once
/// here, on the reader's own idle connection, where it ends nothing.
pub(super) async fn interrupter(reader: &Client) -> Option<Interrupt> {
    for id in reader.connection_ids().into_values() {
        let probe: Result<i64, _> = reader
            .client_unblock(id, Some(ClientUnblockFlag::Timeout))
            .await;
        if let Err(e) = probe {
            if e.details().starts_with("NOPERM") {
                warn!(error = %e, "CLIENT UNBLOCK is not permitted for this user; idle queues block on their own connections");
                return None;
            }
        }
    }
    let client = reader.clone();
    Some(Interrupt::new(move || {
        let client = client.clone();
        Box::pin(async move {
            for id in client.connection_ids().into_values() {
                let ended: Result<i64, _> = client
                    .client_unblock(id, Some(ClientUnblockFlag::Timeout))
                    .await;
                if matches!(ended, Ok(1)) {
                    return true;
                }
            }
            false
        })
    }))
}
