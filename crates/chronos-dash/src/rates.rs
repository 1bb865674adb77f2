use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Processed and failed per minute for each queue, from the queues' running totals sampled by
/// the pages and polls themselves: no extra Redis work, and live to the second (the per-minute
/// history serves the chart).
#[derive(Debug, Default)]
pub(crate) struct Rates {
    samples: Mutex<VecDeque<(Instant, Totals)>>,
}

/// Each queue's (processed, failed) running totals.
type Totals = BTreeMap<String, (u64, u64)>;

/// How far back a rate looks.
const WINDOW: Duration = Duration::from_secs(60);

impl Rates {
    /// Records the totals seen now and answers each queue's (processed, failed) per minute over
    /// the last minute or as much of it as was sampled; None for a queue seen only now.
    pub(crate) fn observe(&self, totals: Totals) -> BTreeMap<String, (f64, f64)> {
        let now = Instant::now();
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        while samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
        {
            samples.pop_front();
        }
        let mut out = BTreeMap::new();
        if let Some((then, old)) = samples.front() {
            let secs = now.duration_since(*then).as_secs_f64();
            if secs >= 0.5 {
                for (q, (p, f)) in &totals {
                    if let Some((op, of)) = old.get(q) {
                        let per_min =
                            |new: u64, old: u64| new.saturating_sub(old) as f64 * 60.0 / secs;
                        out.insert(q.clone(), (per_min(*p, *op), per_min(*f, *of)));
                    }
                }
            }
        }
        // One sample per half second is plenty; several tabs polling add nothing.
        if samples
            .back()
            .is_none_or(|(t, _)| now.duration_since(*t) >= Duration::from_millis(500))
        {
            samples.push_back((now, totals));
        }
        out
    }
}
