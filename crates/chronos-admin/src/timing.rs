//! How long each kind of a queue runs and waits: p50, p95 and p99 over a span and per step of
//! it, from the per-minute counts the workers write (`Inspect::timings`).

use std::collections::BTreeMap;
use std::time::Duration;

use chronos_broker::{Inspect, Operate, TimingHist};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// p50, p95 and p99 in ms (each at most 25% above the true value: the counts are bucketed).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Quantiles {
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

impl Quantiles {
    fn of(h: &TimingHist) -> Option<Self> {
        Some(Self {
            p50_ms: h.quantile(0.50)?,
            p95_ms: h.quantile(0.95)?,
            p99_ms: h.quantile(0.99)?,
        })
    }
}

/// One step of a kind's chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimingStep {
    /// When the step starts (unix ms).
    pub at_ms: i64,
    /// Attempts that ended in it.
    pub count: u64,
    /// Run time.
    pub run: Quantiles,
    /// Queue wait.
    pub wait: Quantiles,
}

/// One kind over the span.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KindTiming {
    /// The task kind (`other` past 200 kinds per queue and worker).
    pub kind: String,
    /// Attempts that ended in the span.
    pub count: u64,
    /// Run time over the span.
    pub run: Quantiles,
    /// Queue wait over the span.
    pub wait: Quantiles,
    /// Per step, oldest first; steps without an attempt are left out.
    pub steps: Vec<TimingStep>,
}

/// A queue's timings over a span, most attempts first.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimingReport {
    /// Where the span starts and ends (unix ms).
    pub from_ms: i64,
    /// See `from_ms`.
    pub to_ms: i64,
    /// The length of one step (ms).
    pub step_ms: i64,
    /// Each kind seen.
    pub kinds: Vec<KindTiming>,
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// The run times and queue waits of queue `name` per kind over the last `span` (at most a
    /// day), in steps of `step` (at least a minute): what the workers counted and wrote with
    /// their heartbeat (so the last few seconds may be missing). [`AdminError::QueueNotFound`]
    /// for an unknown queue.
    pub async fn timings(
        &self,
        name: &str,
        span: Duration,
        step: Duration,
    ) -> Result<TimingReport, AdminError> {
        let q = self.require_queue(name).await?;
        let minute = 60_000i64;
        let span_ms = i64::try_from(span.as_millis())
            .unwrap_or(i64::MAX)
            .clamp(minute, chronos_broker::MAX_TIMING_MINUTES * minute);
        let step_ms = i64::try_from(step.as_millis())
            .unwrap_or(i64::MAX)
            .clamp(minute, span_ms);
        let now = chronos_broker::now_ms();
        let to_ms = now - now.rem_euclid(minute);
        let from_ms = to_ms - span_ms + minute;
        let minutes = self.broker.timings(&q, from_ms, to_ms).await?;
        // kind -> (whole span, per step start)
        type Pair = (TimingHist, TimingHist);
        let mut kinds: BTreeMap<String, (Pair, BTreeMap<i64, Pair>)> = BTreeMap::new();
        for m in &minutes {
            let step_at = from_ms + (m.minute_ms - from_ms).div_euclid(step_ms) * step_ms;
            for (kind, (run, wait)) in &m.kinds {
                let (all, steps) = kinds.entry(kind.clone()).or_default();
                all.0.merge(run);
                all.1.merge(wait);
                let s = steps.entry(step_at).or_default();
                s.0.merge(run);
                s.1.merge(wait);
            }
        }
        let mut out: Vec<KindTiming> = kinds
            .into_iter()
            .filter_map(|(kind, ((run, wait), steps))| {
                Some(KindTiming {
                    kind,
                    count: run.total(),
                    run: Quantiles::of(&run)?,
                    wait: Quantiles::of(&wait).unwrap_or_default(),
                    steps: steps
                        .into_iter()
                        .filter_map(|(at_ms, (run, wait))| {
                            Some(TimingStep {
                                at_ms,
                                count: run.total(),
                                run: Quantiles::of(&run)?,
                                wait: Quantiles::of(&wait).unwrap_or_default(),
                            })
                        })
                        .collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.kind.cmp(&b.kind)));
        Ok(TimingReport {
            from_ms,
            to_ms: to_ms + minute,
            step_ms,
            kinds: out,
        })
    }
}
