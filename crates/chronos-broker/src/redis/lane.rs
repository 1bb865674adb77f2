//! Priority lanes: which stream of its queue a delivery is an entry of.
//!
//! A task of the default level ([`chronos_core::Priority::NORMAL`]) is delivered from the
//! queue's main stream, as before levels existed; a task of another level from its level's
//! stream ([`crate::QueueKeys::lane`]). Entry ids of two streams may be equal, so a lease of a
//! level's delivery names its level in its message id, `<level>/<entry id>`; every other layer
//! treats message ids as opaque, and the scripts get the level's stream as their stream key and
//! the bare entry id. A main-stream lease's id is the bare entry id, so a queue without levels
//! passes exactly what it passed before.

use std::collections::HashMap;

use fred::prelude::*;

use super::RedisBroker;
use crate::redis::store::store;
use crate::{BrokerError, Priority, QueueKeys};

/// The message id of entry `mid` of level `level`'s stream (None or the default: the main
/// stream).
pub(crate) fn qualify(level: Option<u8>, mid: String) -> String {
    match level {
        Some(l) if l != chronos_core::Priority::NORMAL.get() => format!("{l}/{mid}"),
        _ => mid,
    }
}

/// The level (None: the main stream) and the bare entry id of message id `msg_id`.
pub(crate) fn split(msg_id: &str) -> (Option<u8>, &str) {
    match msg_id.split_once('/') {
        Some((l, mid)) => match l.parse::<u8>() {
            Ok(l) => (Some(l), mid),
            Err(_) => (None, msg_id),
        },
        None => (None, msg_id),
    }
}

/// The stream and the bare entry id of message id `msg_id` of the queue of `keys`.
pub(crate) fn locate<'a>(keys: &QueueKeys, msg_id: &'a str) -> (String, &'a str) {
    let (level, mid) = split(msg_id);
    (keys.lane(level), mid)
}

/// The tenants block a settling script declares for delivery `msg_id`: the whole block for a
/// delivery of the tenant lane (its slot and rotation change), none for any other.
pub(crate) fn tenant_block(keys: &QueueKeys, msg_id: &str) -> Vec<String> {
    if is_tenant(split(msg_id).0) {
        keys.tenants()
    } else {
        Vec::new()
    }
}

/// Indexes of `ids` grouped by their lane, the main stream first, each group in the order of
/// `ids`: one script call per lane, and a queue without levels makes exactly one.
pub(crate) fn by_lane<'a>(ids: impl Iterator<Item = &'a str>) -> Vec<(Option<u8>, Vec<usize>)> {
    let mut groups: Vec<(Option<u8>, Vec<usize>)> = Vec::new();
    let mut at: HashMap<Option<u8>, usize> = HashMap::new();
    for (i, id) in ids.enumerate() {
        let (level, _) = split(id);
        let g = *at.entry(level).or_insert_with(|| {
            groups.push((level, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    groups.sort_by_key(|(l, _)| l.is_some());
    groups
}

/// How urgent a delivery is by its message id: its level, the default for the main stream.
pub(crate) fn urgency(msg_id: &str) -> u8 {
    match split(msg_id).0 {
        Some(l) if l < chronos_core::Priority::LEVELS => l,
        // The tenant stream is served at the default level's place.
        _ => chronos_core::Priority::NORMAL.get(),
    }
}

/// True for a delivery of the tenant stream, whose settle scripts declare the tenants block.
pub(crate) fn is_tenant(level: Option<u8>) -> bool {
    level == Some(super::TENANT_LANE)
}

/// Orders the leases of one read most urgent first (stable inside a level), so that a caller
/// that keeps only the first ones keeps the most urgent.
pub(crate) fn sort_by_urgency(leases: &mut [chronos_core::Lease]) {
    leases.sort_by_key(|l| urgency(&l.id.msg_id));
}

impl RedisBroker {
    /// The lanes of a queue in the order workers take them: the levels that have a stream and
    /// the main stream (None) at the default level's place.
    pub(super) async fn lane_order(
        &self,
        keys: &QueueKeys,
    ) -> Result<Vec<Option<u8>>, BrokerError> {
        let levels: Vec<String> = self
            .inner
            .client
            .hkeys(keys.levels())
            .await
            .map_err(store)?;
        let mut order: Vec<u8> = levels
            .iter()
            .filter_map(|l| l.parse::<u8>().ok())
            .filter(|&l| l < Priority::LEVELS || l == super::TENANT_LANE)
            .chain(std::iter::once(Priority::NORMAL.get()))
            .collect();
        order.sort_unstable();
        order.dedup();
        Ok(order
            .into_iter()
            .map(|l| (l != Priority::NORMAL.get()).then_some(l))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_the_main_stream_stay_bare() {
        assert_eq!(qualify(None, "1-0".into()), "1-0");
        assert_eq!(qualify(Some(5), "1-0".into()), "1-0");
        assert_eq!(qualify(Some(2), "1-0".into()), "2/1-0");
        assert_eq!(split("2/1-0"), (Some(2), "1-0"));
        assert_eq!(split("1-0"), (None, "1-0"));
        let g = by_lane(["2/1-0", "1-0", "2/3-0", "4-0"].into_iter());
        assert_eq!(g, vec![(None, vec![1, 3]), (Some(2), vec![0, 2])]);
    }
}
