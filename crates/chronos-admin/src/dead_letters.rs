//! Dead letters grouped by error: which failures fill the archive, how many of each, of which
//! kinds, since when. What an operator reads first after an incident.

use std::collections::BTreeMap;

use chronos_broker::{Inspect, ManageSchedules, Operate, Schedules, TaskFilter, TaskState};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// Longest error text a group is keyed by (its first line, cut here).
const GROUP_KEY_CHARS: usize = 200;

/// One group of dead letters: those whose last error starts with the same line.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ErrorGroup {
    /// The first line of their last error (at most 200 characters); empty when none was
    /// recorded.
    pub error: String,
    /// Dead letters in the group (among those read).
    pub count: u64,
    /// How many of each kind.
    pub kinds: BTreeMap<String, u64>,
    /// When the newest and the oldest of them were archived (unix ms).
    pub newest_ms: Option<i64>,
    /// See `newest_ms`.
    pub oldest_ms: Option<i64>,
    /// The newest task of the group, to look at one.
    pub sample_id: String,
}

/// Dead letters grouped by error, largest group first.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ErrorGroups {
    /// The groups.
    pub groups: Vec<ErrorGroup>,
    /// Dead letters read (newest first) and grouped.
    pub read: u64,
    /// Dead letters in the queue; more than `read` when the reading stopped at its bound (the
    /// groups then describe the newest ones only).
    pub in_state: u64,
}

/// The key of a task's group: the first line of its last error, trimmed and cut.
pub fn error_group_key(error: Option<&str>) -> String {
    let line = error.unwrap_or("").lines().next().unwrap_or("").trim();
    line.chars().take(GROUP_KEY_CHARS).collect()
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// The dead letters of queue `name` that pass `filter`, grouped by the first line of their
    /// last error; reads at most `max_read` of them, newest first. [`AdminError::QueueNotFound`]
    /// for an unknown queue.
    pub async fn dead_letter_groups(
        &self,
        name: &str,
        filter: &TaskFilter,
        max_read: u64,
    ) -> Result<ErrorGroups, AdminError> {
        let q = self.require_queue(name).await?;
        let in_state = self.broker.queue_stats(&q).await?.archived;
        let mut groups: BTreeMap<String, ErrorGroup> = BTreeMap::new();
        let mut read = 0u64;
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .broker
                .list_page(&q, TaskState::Archived, filter, cursor.as_deref(), 500)
                .await?;
            read += page.scanned;
            for t in &page.tasks {
                let (kind, error) = match &t.envelope {
                    Ok(e) => (e.kind.as_str(), e.last_error.as_deref()),
                    Err(_) => ("(undecodable)", None),
                };
                let key = error_group_key(error);
                let g = groups.entry(key.clone()).or_insert_with(|| ErrorGroup {
                    error: key,
                    count: 0,
                    kinds: BTreeMap::new(),
                    newest_ms: None,
                    oldest_ms: None,
                    sample_id: t.id.clone(),
                });
                g.count += 1;
                *g.kinds.entry(kind.to_string()).or_default() += 1;
                if let Some(at) = t.state_time_ms {
                    g.newest_ms = Some(g.newest_ms.map_or(at, |n| n.max(at)));
                    g.oldest_ms = Some(g.oldest_ms.map_or(at, |o| o.min(at)));
                }
            }
            match page.next {
                Some(next) if read < max_read => cursor = Some(next),
                _ => break,
            }
        }
        let mut groups: Vec<ErrorGroup> = groups.into_values().collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then(b.newest_ms.cmp(&a.newest_ms)));
        Ok(ErrorGroups {
            groups,
            read,
            in_state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_keyed_by_the_first_line_trimmed_and_cut() {
        assert_eq!(error_group_key(Some("  timeout\n  at line 3")), "timeout");
        assert_eq!(error_group_key(None), "");
        assert_eq!(error_group_key(Some(&"x".repeat(500))).len(), 200);
        assert_eq!(
            error_group_key(Some("é".repeat(300).as_str()))
                .chars()
                .count(),
            200
        );
    }
}
