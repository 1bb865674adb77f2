//! A queue's history: tasks processed and attempts failed per minute over the last day and
//! per day over the last 90, from the counters the settling scripts keep.

use std::collections::HashMap;

use fred::prelude::*;

use super::RedisBroker;
use crate::keys::DAY_MS;
use crate::redis::store::store;
use crate::{now_ms, BrokerError, HistoryCounter, HistoryPoint, QueueName};

impl RedisBroker {
    /// [`crate::Operate::history`] per minute: the last 24 hours, 1,440 points, oldest first.
    pub(super) async fn history_minutes(
        &self,
        queue: &QueueName,
    ) -> Result<Vec<HistoryPoint>, BrokerError> {
        let keys = self.queue_keys(queue);
        let now = now_ms();
        let today = now.div_euclid(DAY_MS);
        let minute = now.div_euclid(60_000);
        let first = minute - 1439;
        let mut points: Vec<HistoryPoint> = (first..=minute)
            .map(|m| HistoryPoint {
                start_ms: m * 60_000,
                ..Default::default()
            })
            .collect();
        // Two days' hashes cover the last 24 hours (more when clocks differ a little).
        for counter in [HistoryCounter::Processed, HistoryCounter::Failed] {
            for day in [today - 1, today, today + 1] {
                let all: HashMap<String, i64> = self
                    .inner
                    .client
                    .hgetall(keys.history_minutes(counter, day))
                    .await
                    .map_err(store)?;
                for (field, n) in all {
                    let Ok(m) = field.parse::<i64>() else {
                        continue;
                    };
                    let Some(p) = usize::try_from(m - first)
                        .ok()
                        .and_then(|i| points.get_mut(i))
                    else {
                        continue;
                    };
                    let n = n.max(0) as u64;
                    match counter {
                        HistoryCounter::Processed => p.processed += n,
                        HistoryCounter::Failed => p.failed += n,
                    }
                }
            }
        }
        Ok(points)
    }

    /// [`crate::Operate::history`] per day: the last 90 UTC days, oldest first.
    pub(super) async fn history_days(
        &self,
        queue: &QueueName,
    ) -> Result<Vec<HistoryPoint>, BrokerError> {
        let keys = self.queue_keys(queue);
        let today = now_ms().div_euclid(DAY_MS);
        let days: Vec<i64> = (today - 89..=today).collect();
        let mut out: Vec<HistoryPoint> = days
            .iter()
            .map(|d| HistoryPoint {
                start_ms: d * DAY_MS,
                ..Default::default()
            })
            .collect();
        for counter in [HistoryCounter::Processed, HistoryCounter::Failed] {
            let names: Vec<String> = days.iter().map(|d| keys.history_day(counter, *d)).collect();
            // One slot (the queue's tag), so one MGET is valid on a cluster too.
            let values: Vec<Option<i64>> = self.inner.client.mget(names).await.map_err(store)?;
            for (p, v) in out.iter_mut().zip(values) {
                let n = v.unwrap_or(0).max(0) as u64;
                match counter {
                    HistoryCounter::Processed => p.processed = n,
                    HistoryCounter::Failed => p.failed = n,
                }
            }
        }
        Ok(out)
    }
}
