//! Run times and queue waits per kind and minute (`Maintain::record_timings`,
//! `Inspect::timings`): one hash per queue and hour, written by a pipeline of increments.

use std::collections::BTreeMap;

use fred::prelude::*;

use super::RedisBroker;
use crate::redis::store::store;
use crate::{
    BrokerError, QueueName, TimingDelta, TimingHist, TimingMeasure, TimingMinute,
    MAX_TIMING_MINUTES, TIMINGS_KEPT,
};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;

impl RedisBroker {
    pub(super) async fn write_timings(
        &self,
        queue: &QueueName,
        deltas: &[TimingDelta],
    ) -> Result<(), BrokerError> {
        if deltas.iter().all(|d| d.run.is_empty() && d.wait.is_empty()) {
            return Ok(());
        }
        let keys = self.queue_keys(queue);
        let pipe = self.inner.client.pipeline();
        let mut hours = Vec::new();
        for d in deltas {
            let hour = d.minute_ms.div_euclid(HOUR);
            let minute = d.minute_ms.rem_euclid(HOUR) / MINUTE;
            let key = keys.timing(hour);
            for (measure, hist) in [(TimingMeasure::Run, &d.run), (TimingMeasure::Wait, &d.wait)] {
                for (b, n) in hist.buckets() {
                    let field = format!("{minute}:{}:{b}:{}", measure.letter(), d.kind);
                    let n = i64::try_from(n).unwrap_or(i64::MAX);
                    let _: () = pipe.hincrby(&key, field, n).await.map_err(store)?;
                }
            }
            if !hours.contains(&hour) {
                hours.push(hour);
            }
        }
        let ttl = i64::try_from(TIMINGS_KEPT.as_millis()).unwrap_or(i64::MAX);
        for hour in hours {
            let _: () = pipe
                .pexpire(keys.timing(hour), ttl, None)
                .await
                .map_err(store)?;
        }
        let _: Vec<Value> = pipe.all().await.map_err(store)?;
        Ok(())
    }

    pub(super) async fn read_timings(
        &self,
        queue: &QueueName,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<TimingMinute>, BrokerError> {
        let from = from_ms.div_euclid(MINUTE);
        let to = to_ms.div_euclid(MINUTE);
        if to < from || to - from >= MAX_TIMING_MINUTES {
            return Err(BrokerError::InvalidOption(format!(
                "timings of {} minutes asked: 1 to {MAX_TIMING_MINUTES}",
                to - from + 1
            )));
        }
        let keys = self.queue_keys(queue);
        let first_hour = (from * MINUTE).div_euclid(HOUR);
        let last_hour = (to * MINUTE).div_euclid(HOUR);
        let pipe = self.inner.client.pipeline();
        for hour in first_hour..=last_hour {
            let _: () = pipe.hgetall(keys.timing(hour)).await.map_err(store)?;
        }
        let hashes: Vec<Value> = pipe.all().await.map_err(store)?;
        let mut minutes: BTreeMap<i64, TimingMinute> = BTreeMap::new();
        for (hour, h) in (first_hour..=last_hour).zip(hashes) {
            // A key of another type reads as nothing; a value that is not a count, alone.
            let Ok(pairs) = h.convert::<BTreeMap<String, String>>() else {
                continue;
            };
            for (field, n) in pairs {
                let Ok(n) = n.parse::<i64>() else {
                    continue;
                };
                let mut parts = field.splitn(4, ':');
                let (Some(m), Some(letter), Some(b), Some(kind)) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                let (Ok(m), Ok(b)) = (m.parse::<i64>(), b.parse::<usize>()) else {
                    continue;
                };
                let Some(measure) = letter.chars().next().and_then(TimingMeasure::from_letter)
                else {
                    continue;
                };
                let minute = (hour * HOUR + m * MINUTE) / MINUTE;
                if !(0..60).contains(&m) || minute < from || minute > to || n <= 0 {
                    continue;
                }
                let entry = minutes.entry(minute).or_insert_with(|| TimingMinute {
                    minute_ms: minute * MINUTE,
                    kinds: BTreeMap::new(),
                });
                let (run, wait) = entry
                    .kinds
                    .entry(kind.to_string())
                    .or_insert_with(|| (TimingHist::default(), TimingHist::default()));
                let hist = match measure {
                    TimingMeasure::Run => run,
                    TimingMeasure::Wait => wait,
                };
                hist.add(b, u64::try_from(n).unwrap_or(0));
            }
        }
        Ok(minutes.into_values().collect())
    }
}
