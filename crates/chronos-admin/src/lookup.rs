//! "Does this queue exist?": the answer the CLI and the console give for a name that names no
//! queue, with what the operator probably meant.

use std::fmt;

use chronos_broker::fred::prelude::{ClientLike, KeysInterface};
use chronos_broker::fred::types::scan::ScanType;
use chronos_broker::RedisBroker;
use serde::Serialize;

/// A queue name that names no queue of the namespace, with hints for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownQueue {
    /// The name as given.
    pub queue: String,
    /// The namespace looked in.
    pub namespace: String,
    /// The queues the namespace holds, sorted (at most [`UnknownQueue::MAX_LISTED`]).
    pub known: Vec<String>,
    /// How many queues the namespace holds in all.
    pub known_total: usize,
    /// The known queue closest to the name, when one is close (a typo, another case).
    pub suggestion: Option<String>,
    /// Other namespaces of this Redis that hold queues (found by a bounded scan for their
    /// queue lists; may be incomplete on a Redis with very many keys; empty on a cluster).
    pub other_namespaces: Vec<String>,
}

impl UnknownQueue {
    /// Most queue names an [`UnknownQueue`] lists.
    pub const MAX_LISTED: usize = 20;

    pub(crate) fn new(queue: &str, namespace: &str, known: Vec<String>) -> Self {
        let suggestion = closest(queue, &known);
        let known_total = known.len();
        Self {
            queue: queue.to_string(),
            namespace: namespace.to_string(),
            known: known.into_iter().take(Self::MAX_LISTED).collect(),
            known_total,
            suggestion,
            other_namespaces: Vec::new(),
        }
    }
}

impl fmt::Display for UnknownQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no queue {:?} in namespace {:?}",
            self.queue, self.namespace
        )?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        if self.known.is_empty() {
            write!(f, "; this namespace holds no queue")?;
        } else {
            write!(f, "; known queues: {}", self.known.join(", "))?;
            if self.known_total > self.known.len() {
                write!(f, " and {} more", self.known_total - self.known.len())?;
            }
        }
        if !self.other_namespaces.is_empty() {
            write!(
                f,
                "; namespaces with queues on this Redis: {}",
                self.other_namespaces.join(", ")
            )?;
        }
        Ok(())
    }
}

/// A tenant key that names no tenant of the queue: no task of it waits or runs and nothing is
/// stored for it, so a change to its settings would most likely go to a typo while the tenant
/// meant stays as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownTenant {
    /// The queue.
    pub queue: String,
    /// The tenant key as given.
    pub tenant: String,
    /// Tenants of the queue with work or stored settings, sorted (at most
    /// [`UnknownQueue::MAX_LISTED`]; none when the queue has very many).
    pub known: Vec<String>,
    /// The known tenant closest to the key, when one is close (a typo, another case).
    pub suggestion: Option<String>,
}

impl UnknownTenant {
    pub(crate) fn new(queue: &str, tenant: &str, mut known: Vec<String>) -> Self {
        known.sort();
        known.dedup();
        let suggestion = closest(tenant, &known);
        known.truncate(UnknownQueue::MAX_LISTED);
        Self {
            queue: queue.to_string(),
            tenant: tenant.to_string(),
            known,
            suggestion,
        }
    }
}

impl fmt::Display for UnknownTenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no tenant {:?} in queue {:?}", self.tenant, self.queue)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        write!(
            f,
            ": no task of it waits or runs and no setting is stored for it"
        )?;
        if !self.known.is_empty() {
            write!(f, "; known tenants: {}", self.known.join(", "))?;
        }
        Ok(())
    }
}

/// The known name closest to `name`: the same name in another case, or one within a small
/// edit distance (a third of the name's length, at least 1, at most 3).
fn closest(name: &str, known: &[String]) -> Option<String> {
    let lower = name.to_lowercase();
    if let Some(k) = known.iter().find(|k| k.to_lowercase() == lower) {
        return Some(k.clone());
    }
    let limit = (name.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (distance(&lower, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// Levenshtein distance, counting an adjacent swap as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// Keys a namespace hint reads at most: SCAN is cheap per call, but a Redis holding a million
/// tasks holds over a million keys, and this runs only on an error path.
const MAX_SCANNED: u64 = 2_000_000;

/// The namespaces of this Redis that hold queues, other than `except`: every namespace keeps
/// its queue names in a set named `<namespace>:queues` (see the broker's key layout), found by
/// a bounded `SCAN ... MATCH *:queues TYPE set`. Empty on a cluster (its keys spread over
/// nodes) or when the scan fails.
pub(crate) async fn namespaces_with_queues(broker: &RedisBroker, except: &str) -> Vec<String> {
    let client = broker.client();
    if client.is_clustered() {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut cursor = "0".to_string();
    let mut scanned = 0u64;
    loop {
        let page: Result<(String, Vec<String>), _> = client
            .scan_page(
                cursor.clone(),
                "*:queues",
                Some(10_000),
                Some(ScanType::Set),
            )
            .await;
        let Ok((next, keys)) = page else { break };
        scanned += 10_000;
        for k in keys {
            if let Some(ns) = k.strip_suffix(":queues") {
                // A queue's own keys carry a hash tag; a namespace's list does not.
                if !ns.contains('{') && ns != except && !found.iter().any(|f| f == ns) {
                    found.push(ns.to_string());
                }
            }
        }
        if next == "0" || scanned >= MAX_SCANNED {
            break;
        }
        cursor = next;
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_suggests_the_queue_meant() {
        let known = vec!["critical".to_string(), "default".into(), "low".into()];
        assert_eq!(closest("critcal", &known).as_deref(), Some("critical"));
        assert_eq!(closest("Default", &known).as_deref(), Some("default"));
        assert_eq!(closest("defualt", &known).as_deref(), Some("default"));
        assert_eq!(closest("email", &known), None);
        let t = UnknownTenant::new("mail", "acme-crop", vec!["zeta".into(), "acme-corp".into()]);
        assert_eq!(
            t.to_string(),
            "no tenant \"acme-crop\" in queue \"mail\" (did you mean \"acme-corp\"?): no task \
             of it waits or runs and no setting is stored for it; known tenants: acme-corp, zeta"
        );
        let e = UnknownQueue::new("critcal", "chronos", known);
        assert_eq!(
            e.to_string(),
            "no queue \"critcal\" in namespace \"chronos\" (did you mean \"critical\"?); \
             known queues: critical, default, low"
        );
    }
}
