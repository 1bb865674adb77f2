//! The stored form of a schedule, [`ScheduleDef`]: what a runtime schedule is stored as, and
//! what a code schedule publishes so that a leader which does not register it fires it; and
//! the way back, validated as at registration, to the [`Schedule`] a leader fires.
//!
//! The stored spec is the broker's [`DefSpec`]: [`Spec`] holds a parsed cron expression and a
//! time zone, which the broker (and the bytes in Redis) cannot carry, so a `Spec` is stored as
//! its source (period, or expression and zone name) and parsed again when read.

use std::time::Duration;

use chronos_core::{
    duration_ms, DeadLetter, DefDedup, DefMisfire, DefSpec, EnqueueOptions, NewTask, QueueName,
    ScheduleDef, ScheduleEntry,
};

use crate::error::SchedulerError;
use crate::id::check_id;
use crate::misfire::MisfirePolicy;
use crate::options::OverlapPolicy;
use crate::schedule::Schedule;
use crate::spec::Spec;

/// The stored form of a schedule (timestamps zero): a runtime schedule's, or the definition a
/// code schedule publishes so that a leader which does not register it can fire it. Refuses
/// what a stored definition cannot carry: [`EnqueueOptions::durable`]
/// ([`SchedulerError::DurableSchedule`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn def_of(
    id: String,
    kind: &str,
    payload: Vec<u8>,
    spec: &Spec,
    enqueue: EnqueueOptions,
    deadline_after: Option<Duration>,
    misfire: MisfirePolicy,
    overlap: OverlapPolicy,
) -> Result<ScheduleDef, SchedulerError> {
    let def_spec = spec_def(spec)?;
    // The options as one task would carry them: the envelope is the only public view of
    // enqueue options, and building it validates them (a zero unique TTL, say).
    let task = NewTask::build(kind, payload.clone(), enqueue, 0)?;
    if task.durable().is_some() {
        return Err(SchedulerError::DurableSchedule(id));
    }
    let dedup = match task.dedup() {
        Some(d) => Some(DefDedup::of(d).ok_or_else(SchedulerError::schedule_mode)?),
        None => None,
    };
    let env = &task.envelope;
    let queue = QueueName::new(env.queue.clone())?;
    let mut headers = env.headers.clone();
    headers.remove(chronos_core::SCHEDULE_HEADER);
    headers.remove(chronos_core::TRIGGER_HEADER);
    Ok(ScheduleDef {
        id,
        queue: queue.to_string(),
        kind: kind.to_string(),
        payload,
        describe: spec.describe(),
        spec: def_spec,
        max_retry: Some(env.max_retry),
        timeout_ms: env.timeout_ms,
        unique_ms: task
            .unique_ttl
            .filter(|_| dedup.is_none())
            .map(|d| u64::try_from(duration_ms(d)).unwrap_or(u64::MAX)),
        dedup,
        retention_ms: env.retention_ms,
        deadline_after_ms: deadline_after
            .map(|d| u64::try_from(duration_ms(d)).unwrap_or(u64::MAX)),
        discard_on_dead_letter: env.dead_letter == DeadLetter::Discard,
        headers,
        misfire: Some(misfire_def(misfire)),
        forbid_overlap: overlap == OverlapPolicy::Forbid,
        paused: false,
        created_ms: 0,
        updated_ms: 0,
        active_since_ms: 0,
    })
}

/// The definition a code schedule publishes, so that a leader which does not register it fires
/// it with the same task and options. None when its options hold what a stored definition
/// cannot carry (a rate key, an absolute deadline): such a schedule is fired only by leaders
/// that register it themselves.
pub(crate) fn published(s: &Schedule) -> Option<ScheduleDef> {
    let t = s.trigger(0, 0, None).ok()?;
    let env = &t.task.envelope;
    if env.rate_key.is_some() || (s.deadline_after.is_none() && env.deadline_ms.is_some()) {
        return None;
    }
    def_of(
        s.id.clone(),
        &s.kind,
        s.payload.clone(),
        &s.spec,
        s.enqueue.clone(),
        s.deadline_after,
        s.misfire,
        s.overlap,
    )
    .ok()
}

/// The schedule a stored definition describes, validated as at registration.
pub(crate) fn schedule_of(def: &ScheduleDef) -> Result<Schedule, SchedulerError> {
    check_id(&def.id)?;
    let spec = spec_of(def)?;
    let queue = QueueName::new(def.queue.clone())?;
    let mut enqueue = EnqueueOptions::new().queue(def.queue.clone());
    if let Some(n) = def.max_retry {
        enqueue = enqueue.max_retry(n);
    }
    if let Some(ms) = def.timeout_ms {
        enqueue = enqueue.timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = def.unique_ms {
        enqueue = enqueue.unique(Duration::from_millis(ms));
    }
    if let Some(d) = &def.dedup {
        enqueue = enqueue.dedup(d.dedup());
    }
    if let Some(ms) = def.retention_ms {
        enqueue = enqueue.retention(Duration::from_millis(ms));
    }
    if def.discard_on_dead_letter {
        enqueue = enqueue.discard_on_dead_letter();
    }
    for (k, v) in &def.headers {
        enqueue = enqueue.header(k.clone(), v.clone());
    }
    let s = Schedule {
        id: def.id.clone(),
        spec,
        kind: def.kind.clone(),
        payload: def.payload.clone(),
        queue,
        enqueue,
        deadline_after: def.deadline_after_ms.map(Duration::from_millis),
        misfire: misfire_of(def.misfire),
        overlap: if def.forbid_overlap {
            OverlapPolicy::Forbid
        } else {
            OverlapPolicy::Allow
        },
        since_ms: (def.active_since_ms > 0).then_some(def.active_since_ms),
    };
    s.trigger(0, 0, None)?;
    Ok(s)
}

/// The next trigger of a stored schedule strictly after `after_ms` (None when paused, invalid,
/// or beyond the representable range): what listings show for runtime cron schedules, whose
/// next run the broker cannot evaluate.
pub fn next_run(def: &ScheduleDef, after_ms: i64) -> Option<i64> {
    if def.paused {
        return None;
    }
    schedule_of(def).ok()?.spec.next_after(after_ms)
}

/// The first trigger strictly after `after_ms` of a listed schedule, from its period or from
/// the cron expression and zone its entry shows (`<expr> (<zone>)`). None for a paused
/// schedule, and for an entry whose spec does not parse (written by another version).
pub fn entry_next_after(entry: &ScheduleEntry, after_ms: i64) -> Option<i64> {
    if entry.paused {
        return None;
    }
    let spec = match entry.every_ms {
        Some(every) => Spec::interval(Duration::from_millis(every)).ok()?,
        None => {
            let expr = entry
                .spec
                .strip_suffix(&format!(" ({})", entry.zone))
                .unwrap_or(&entry.spec);
            Spec::cron(expr, &entry.zone).ok()?
        }
    };
    spec.next_after(after_ms)
}

/// A spec's stored form: its period, or its expression and the zone's IANA name.
pub(crate) fn spec_def(spec: &Spec) -> Result<DefSpec, SchedulerError> {
    Ok(match spec {
        Spec::Interval { .. } => DefSpec::Every {
            every_ms: spec.every_ms().ok_or_else(|| {
                SchedulerError::InvalidOption(format!("{} out of range", spec.describe()))
            })?,
        },
        Spec::Cron {
            expr, zone_name, ..
        } => DefSpec::Cron {
            expr: expr.clone(),
            zone: zone_name.clone(),
        },
    })
}

/// The spec a stored definition names, validated as [`Spec::interval`] and [`Spec::cron`] do.
fn spec_of(def: &ScheduleDef) -> Result<Spec, SchedulerError> {
    Ok(match &def.spec {
        DefSpec::Every { every_ms } => Spec::interval(Duration::from_millis(*every_ms))?,
        DefSpec::Cron { expr, zone } => Spec::cron(expr, zone)?,
        _ => {
            return Err(SchedulerError::InvalidOption(format!(
                "schedule {:?} has a spec this version does not know",
                def.id
            )))
        }
    })
}

/// A misfire policy's stored form.
fn misfire_def(p: MisfirePolicy) -> DefMisfire {
    match p {
        MisfirePolicy::FireAll { window, max } => DefMisfire::FireAll {
            window_ms: u64::try_from(duration_ms(window)).unwrap_or(u64::MAX),
            max,
        },
        MisfirePolicy::FireLatest => DefMisfire::FireLatest,
        MisfirePolicy::Skip => DefMisfire::Skip,
    }
}

/// The misfire policy a stored definition names.
fn misfire_of(d: Option<DefMisfire>) -> MisfirePolicy {
    match d {
        None => MisfirePolicy::default(),
        Some(DefMisfire::FireAll { window_ms, max }) => MisfirePolicy::FireAll {
            window: Duration::from_millis(window_ms),
            max,
        },
        Some(DefMisfire::FireLatest) => MisfirePolicy::FireLatest,
        Some(DefMisfire::Skip) => MisfirePolicy::Skip,
        // A policy of a later version: the default, as for a definition without one.
        Some(_) => MisfirePolicy::default(),
    }
}
