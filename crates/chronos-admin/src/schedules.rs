//! Schedules as an operator checks them: which ones are overdue (a trigger fell due and nobody
//! fired it), and each one's last fires with what became of their tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use chronos_broker::{
    FireRecord, Inspect, ManageSchedules, Operate, QueueName, ScheduleEntry, ScheduleSource,
    Schedules,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// How long a trigger may stay unfired past its time before its schedule counts as overdue:
/// a leader's failover (a lease of a few seconds) and its catch-up fit well inside it.
pub const OVERDUE_GRACE: Duration = Duration::from_secs(60);

/// The trigger a schedule should have fired by now and has not: the first one after `since_ms`
/// (its last fire, or when it became active) when that lies more than [`OVERDUE_GRACE`] before
/// `now_ms`. None for a paused schedule and for an entry whose spec does not parse.
pub fn overdue_trigger(entry: &ScheduleEntry, since_ms: i64, now_ms: i64) -> Option<i64> {
    let due = chronos_scheduler::entry_next_after(entry, since_ms)?;
    let grace = i64::try_from(OVERDUE_GRACE.as_millis()).unwrap_or(i64::MAX);
    (now_ms.saturating_sub(due) > grace).then_some(due)
}

/// One fire of a schedule with its task as it is now.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FireRow {
    /// The trigger time (unix ms); for a run-now, when it ran.
    pub at_ms: i64,
    /// `fired`, `run now`, or why the trigger was skipped: `overlap` (the previous task was
    /// unfinished), `unique` (another task held the unique lock), `expired` (its deadline had
    /// passed); `run now (unique)` for a run-now the unique lock skipped.
    pub outcome: &'static str,
    /// The task's id (for a skipped trigger, the id it would have had).
    pub task_id: String,
    /// The task's state now: None for a skipped trigger, `gone` when no record is left (it
    /// completed without retention, or was deleted).
    pub task_state: Option<String>,
}

impl FireRow {
    fn outcome_of(r: &FireRecord) -> &'static str {
        use chronos_broker::FireOutcome::*;
        match (r.outcome, r.run_now) {
            (Fired, false) => "fired",
            (Fired, true) => "run now",
            (Unique, true) => "run now (unique)",
            (Overlap, _) => "overlap",
            (Unique, false) => "unique",
            (Expired, _) => "expired",
            _ => "other",
        }
    }
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// The schedules among `entries` that are overdue, by id, each with the trigger it has not
    /// fired ([`overdue_trigger`]). Counted from the latest of its last fire, when it became
    /// active (its first registration in code; its creation, last resume or last change of
    /// spec at run time) and when the current leader took over (whose catch-up decided, by the
    /// misfire policy, the triggers that fell due before). A paused schedule is never overdue,
    /// nor a code schedule no live instance registers any more (listed stale, on its way out).
    pub async fn overdue_schedules(
        &self,
        entries: &[ScheduleEntry],
        now_ms: i64,
    ) -> Result<BTreeMap<String, i64>, AdminError> {
        let mut out = BTreeMap::new();
        let leader_since = self.broker.leader().await?.map(|l| l.since_ms);
        let runtime = if entries
            .iter()
            .any(|e| e.source == ScheduleSource::Runtime && !e.paused)
        {
            self.broker.schedule_defs().await?
        } else {
            Vec::new()
        };
        // First registrations of the code schedules that never fired, read per queue.
        let mut unfired: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for e in entries
            .iter()
            .filter(|e| e.source == ScheduleSource::Code && e.last_fired_ms.is_none() && !e.paused)
        {
            unfired
                .entry(e.queue.as_str())
                .or_default()
                .push(e.id.clone());
        }
        let mut registered: BTreeMap<String, i64> = BTreeMap::new();
        for (queue, ids) in unfired {
            let Ok(q) = QueueName::new(queue) else {
                continue;
            };
            for (id, st) in ids.iter().zip(self.broker.fire_state(&q, &ids).await?) {
                if let Some(ms) = st.registered_ms {
                    registered.insert(id.clone(), ms);
                }
            }
        }
        // A code schedule listed stale is on its way out: no live instance registers it.
        let live = |e: &&ScheduleEntry| {
            let gone = e.source == ScheduleSource::Code && e.stale;
            !e.paused && !gone
        };
        for e in entries.iter().filter(live) {
            let active = match e.source {
                ScheduleSource::Runtime => {
                    runtime.iter().find(|d| d.def.id == e.id).and_then(|d| {
                        // Definitions stored before `active_since_ms` existed read 0.
                        [d.def.active_since_ms, d.def.created_ms]
                            .into_iter()
                            .find(|&ms| ms > 0)
                    })
                }
                _ => registered.get(&e.id).copied(),
            };
            let Some(since) = [e.last_fired_ms, active].into_iter().flatten().max() else {
                continue;
            };
            let since = since.max(leader_since.unwrap_or(i64::MIN));
            if let Some(due) = overdue_trigger(e, since, now_ms) {
                out.insert(e.id.clone(), due);
            }
        }
        Ok(out)
    }

    /// The last fires of schedule `id` (newest first), each with its task's state now.
    pub async fn schedule_fires(&self, queue: &str, id: &str) -> Result<Vec<FireRow>, AdminError> {
        let q = QueueName::new(queue)?;
        let history = self.broker.fire_history(&q, id).await?;
        let states = futures::future::join_all(history.iter().map(|r| {
            let q = &q;
            async move {
                if r.outcome != chronos_broker::FireOutcome::Fired {
                    return Ok(None);
                }
                let rec = self.broker.task(q, &r.task_id).await?;
                Ok::<_, AdminError>(Some(rec.map_or("gone", |r| r.state.as_str()).to_string()))
            }
        }))
        .await;
        history
            .iter()
            .zip(states)
            .map(|(r, state)| {
                Ok(FireRow {
                    at_ms: r.at_ms,
                    outcome: FireRow::outcome_of(r),
                    task_id: r.task_id.clone(),
                    task_state: state?,
                })
            })
            .collect()
    }
}

/// How stale a registry entry is before it is marked stale, and when it is no longer listed:
/// the scheduler's defaults (three publish intervals of 5 s; 1 h).
const SCHEDULE_STALE: Duration = Duration::from_secs(15);
const SCHEDULE_REMOVE: Duration = Duration::from_secs(3600);

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Registered schedules (also those that never fired), sorted by id: those registered in
    /// code by running instances and those stored at run time (see [`ScheduleEntry::source`]).
    pub async fn schedules(&self) -> Result<Vec<ScheduleEntry>, AdminError> {
        let mut all = self
            .broker
            .schedules(SCHEDULE_STALE, SCHEDULE_REMOVE)
            .await?;
        // The broker cannot evaluate cron expressions: a runtime cron schedule's next run is
        // computed here, from its stored definition.
        if all
            .iter()
            .any(|e| e.source == ScheduleSource::Runtime && e.every_ms.is_none() && !e.paused)
        {
            let now = chronos_broker::now_ms();
            let defs = self.broker.schedule_defs().await?;
            for e in all
                .iter_mut()
                .filter(|e| e.source == ScheduleSource::Runtime)
            {
                if let Some(d) = defs.iter().find(|d| d.def.id == e.id) {
                    e.next_run_ms = chronos_scheduler::next_run(&d.def, now);
                }
            }
        }
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all)
    }

    /// The runtime schedules of this broker: add, update, pause, resume, remove and run now
    /// (validated as the scheduler validates registrations).
    pub fn runtime_schedules(&self) -> chronos_scheduler::RuntimeSchedules<&B> {
        chronos_scheduler::RuntimeSchedules::new(&self.broker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(spec: &str, zone: &str, every_ms: Option<u64>) -> ScheduleEntry {
        ScheduleEntry {
            id: "s".into(),
            spec: spec.into(),
            zone: zone.into(),
            queue: "q".into(),
            kind: "k".into(),
            next_run_ms: None,
            every_ms,
            last_fired_ms: None,
            last_task_id: None,
            registered_by: "i".into(),
            last_seen_ms: 0,
            stale: false,
            source: ScheduleSource::Code,
            paused: false,
        }
    }

    #[test]
    fn a_trigger_is_overdue_only_once_the_grace_has_passed() {
        let minute = entry("every 1m", "UTC", Some(60_000));
        // Last fired at 0: the next trigger is at 60 s, overdue after 120 s.
        assert_eq!(overdue_trigger(&minute, 0, 119_000), None);
        assert_eq!(overdue_trigger(&minute, 0, 120_001), Some(60_000));
        // A cron entry shows `<expr> (<zone>)`: the zone counts (02:30 in Paris is 01:30 UTC
        // in winter).
        let nightly = entry("30 2 * * * (Europe/Paris)", "Europe/Paris", None);
        let dec_1 = 1_764_547_200_000; // 2025-12-01T00:00:00Z
        let due = dec_1 + 90 * 60_000;
        assert_eq!(overdue_trigger(&nightly, dec_1, due + 60_000), None);
        assert_eq!(overdue_trigger(&nightly, dec_1, due + 61_000), Some(due));
        let paused = ScheduleEntry {
            paused: true,
            ..minute
        };
        assert_eq!(overdue_trigger(&paused, 0, i64::MAX / 2), None);
        let unparsable = entry("every fortnight (Mars)", "Mars", None);
        assert_eq!(overdue_trigger(&unparsable, 0, i64::MAX / 2), None);
    }
}
