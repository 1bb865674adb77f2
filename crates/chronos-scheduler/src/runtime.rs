//! Schedules changed at run time: a validated front over [`ManageSchedules`] (add, update,
//! pause, resume, remove, run now). What is stored, and how a leader reads it back into a
//! schedule it fires like one registered in code, is `def`'s business.

use std::time::Duration;

use chronos_core::{
    encode_args, new_task_id, now_ms, FireOutcome, ManageSchedules, PutOutcome, QueueName,
    ScheduleDef, StoredDef, TaskArgs,
};
use tracing::{info, instrument};

use crate::def::{def_of, schedule_of, spec_def};
use crate::error::SchedulerError;
use crate::id::check_id;
use crate::metrics;
use crate::options::ScheduleOptions;
use crate::spec::{Spec, SpecError};

/// Compare-and-set rounds before a change gives up on a definition that keeps changing.
const CAS_ROUNDS: usize = 5;

/// When a runtime schedule fires, before validation: the form [`NewSchedule::raw`] took before
/// it took a [`Spec`].
///
/// Deprecated: build a [`Spec`] ([`Spec::interval`], [`Spec::cron`]) and pass that, so one type
/// says when a schedule fires wherever the API asks. Still accepted by [`NewSchedule::raw`] and
/// converted with `Spec::try_from`, which validates exactly as the constructors do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeSpec {
    /// Every period (at least 1 s, a whole number of milliseconds), aligned to the unix epoch.
    Every(Duration),
    /// A cron expression in an IANA zone (None: `UTC`).
    Cron {
        /// The expression, as [`crate::Scheduler::register_cron`] takes it.
        expr: String,
        /// The zone.
        zone: Option<String>,
    },
}

impl TryFrom<RuntimeSpec> for Spec {
    type Error = SpecError;

    fn try_from(spec: RuntimeSpec) -> Result<Self, SpecError> {
        match spec {
            RuntimeSpec::Every(every) => Spec::interval(every),
            RuntimeSpec::Cron { expr, zone } => Spec::cron(&expr, zone.as_deref().unwrap_or("UTC")),
        }
    }
}

/// What [`RuntimeSchedules::edit`] changes in a stored schedule; a field left None is kept.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ScheduleEdit {
    /// When it fires from now on.
    pub spec: Option<Spec>,
    /// The payload of its tasks, as JSON (stored as the MessagePack a serde type with the same
    /// fields decodes).
    pub payload: Option<serde_json::Value>,
}

impl ScheduleEdit {
    /// An edit that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fire at the times of `spec` from now on.
    pub fn spec(mut self, spec: Spec) -> Self {
        self.spec = Some(spec);
        self
    }

    /// Give its tasks this payload.
    pub fn payload(mut self, payload: serde_json::Value) -> Self {
        self.payload = Some(payload);
        self
    }
}

/// A validated runtime schedule, ready to be stored by [`RuntimeSchedules::add`] or
/// [`RuntimeSchedules::update`]. Built only by its constructors, which validate exactly as
/// `register_interval` / `register_cron` do: an invalid interval, cron expression, zone,
/// queue, id or option is an error here and nothing is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchedule {
    def: ScheduleDef,
}

impl NewSchedule {
    /// Enqueues `task` every `every` (at least 1 s). The options' queue, retries, timeout,
    /// unique, retention, dead-letter discard, headers, deadline, misfire and overlap policies
    /// are kept; `opts.id` is ignored (`id` names the schedule); `durable` is refused
    /// ([`SchedulerError::DurableSchedule`]).
    pub fn interval<T: TaskArgs>(
        id: impl Into<String>,
        every: Duration,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<Self, SchedulerError> {
        let opts = ScheduleOptions {
            enqueue: T::default_options().merge(opts.enqueue.clone()),
            ..opts
        };
        let payload = encode_args(task)?;
        Self::build(id.into(), T::KIND, payload, || Spec::interval(every), opts)
    }

    /// Enqueues `task` at the times of a cron expression, in the options' zone (default UTC).
    pub fn cron<T: TaskArgs>(
        id: impl Into<String>,
        expr: &str,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<Self, SchedulerError> {
        let zone = opts.zone.clone();
        let opts = ScheduleOptions {
            enqueue: T::default_options().merge(opts.enqueue.clone()),
            ..opts
        };
        let payload = encode_args(task)?;
        Self::build(
            id.into(),
            T::KIND,
            payload,
            || Spec::cron(expr, zone.as_deref().unwrap_or("UTC")),
            opts,
        )
    }

    /// A schedule of a task given by kind and JSON payload (converted to MessagePack, as a
    /// serde type with the same fields would be encoded): what a CLI or an HTTP API has.
    /// `spec` is a [`Spec`] (a deprecated [`RuntimeSpec`] is still accepted, and validated
    /// here). The kind's default options are not known here; give them in `opts`. A zone in
    /// `opts` is ignored (give it in the spec).
    pub fn raw<S>(
        id: impl Into<String>,
        kind: &str,
        payload: &serde_json::Value,
        spec: S,
        opts: ScheduleOptions,
    ) -> Result<Self, SchedulerError>
    where
        S: TryInto<Spec>,
        SchedulerError: From<S::Error>,
    {
        if kind.is_empty() || kind.len() > 200 || kind.chars().any(char::is_control) {
            return Err(SchedulerError::InvalidOption(format!(
                "task kind {kind:?} must be 1 to 200 characters"
            )));
        }
        let payload = rmp_serde::to_vec_named(payload)
            .map_err(|e| SchedulerError::InvalidOption(format!("payload: {e}")))?;
        Self::build(id.into(), kind, payload, || spec.try_into(), opts)
    }

    /// Validates the id, then the spec (so a bad id is reported first, as it always was), then
    /// the rest, the way the leader will read the stored definition back.
    fn build<E>(
        id: String,
        kind: &str,
        payload: Vec<u8>,
        spec: impl FnOnce() -> Result<Spec, E>,
        opts: ScheduleOptions,
    ) -> Result<Self, SchedulerError>
    where
        SchedulerError: From<E>,
    {
        check_id(&id)?;
        let spec = spec()?;
        let def = def_of(
            id,
            kind,
            payload,
            &spec,
            opts.enqueue,
            opts.deadline_after,
            opts.misfire,
            opts.overlap,
        )?;
        // The same conversion the leader makes, so what is stored is what fires.
        schedule_of(&def)?;
        Ok(Self { def })
    }

    /// The definition that would be stored (timestamps are set when it is).
    pub fn def(&self) -> &ScheduleDef {
        &self.def
    }

    /// The schedule id.
    pub fn id(&self) -> &str {
        &self.def.id
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// Stored; every scheduler instance sees it within about a second.
    Done,
    /// The store already held it (a repeated call): nothing changed.
    Unchanged,
}

/// What [`RuntimeSchedules::run_now`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNow {
    /// The id of the task (`<schedule>:run:<request>`).
    pub task_id: String,
    /// [`FireOutcome::Fired`]: enqueued. [`FireOutcome::Duplicate`]: this request already ran
    /// (nothing enqueued). [`FireOutcome::Unique`]: the task's unique lock is held.
    pub outcome: FireOutcome,
}

/// Add, change, pause, resume, remove and run schedules at run time. They are stored in Redis
/// (the scheduler's slot) with a revision that every [`crate::Scheduler`] instance polls
/// (twice a second by default); the leader fires them through the same fenced, deduplicated
/// path as schedules registered in code (same task ids, catch-up and misfire rules).
///
/// Guarantees:
/// * Each change is one compare-and-set script, idempotent when re-sent; a change that finds
///   the store already as asked answers [`Change::Unchanged`].
/// * An id used by a schedule registered in code is refused ([`SchedulerError::CodeSchedule`]),
///   so the two sources never share one id. (A code registration appearing later under a
///   runtime id wins on the instances that register it; avoid reusing ids.)
/// * A paused or removed schedule fires nothing once the leader has seen the change (within
///   about a second: one poll interval plus a read); a resumed one fires from its resume on,
///   catching nothing up from the pause. An update of the spec takes effect from the next
///   trigger.
/// * A removed schedule's fire state is forgotten, so an id added again starts afresh.
#[derive(Debug, Clone)]
pub struct RuntimeSchedules<B> {
    broker: B,
}

impl<B: ManageSchedules> RuntimeSchedules<B> {
    /// A front over `broker` (any [`ManageSchedules`]: a `RedisBroker`, a reference, an `Arc`).
    pub fn new(broker: B) -> Self {
        Self { broker }
    }

    /// Every stored schedule, by id.
    pub async fn list(&self) -> Result<Vec<ScheduleDef>, SchedulerError> {
        Ok(self
            .broker
            .schedule_defs()
            .await?
            .into_iter()
            .map(|s| s.def)
            .collect())
    }

    /// One stored schedule.
    pub async fn get(&self, id: &str) -> Result<Option<ScheduleDef>, SchedulerError> {
        Ok(self.broker.schedule_def(id).await?.map(|s| s.def))
    }

    /// Stores a new schedule. [`Change::Unchanged`] when the same definition is already stored
    /// (a repeated add); [`SchedulerError::ScheduleExists`] when a different one is.
    #[instrument(skip_all, fields(schedule = %schedule.def.id))]
    pub async fn add(&self, schedule: NewSchedule) -> Result<Change, SchedulerError> {
        let id = schedule.def.id.clone();
        self.change(&id, |cur| match cur {
            Some(c) if c.same_as(&schedule.def) => Ok(None),
            Some(_) => Err(SchedulerError::ScheduleExists(id.clone())),
            None => {
                let now = now_ms();
                Ok(Some(Some(ScheduleDef {
                    created_ms: now,
                    updated_ms: now,
                    active_since_ms: now,
                    ..schedule.def.clone()
                })))
            }
        })
        .await
    }

    /// Replaces a stored schedule's definition, keeping its paused state; the new spec takes
    /// effect from the next trigger. [`SchedulerError::UnknownSchedule`] for an unknown id.
    ///
    /// A schedule moved to another queue starts afresh there (its fire state lives in the
    /// queue): nothing is caught up from before the update.
    #[instrument(skip_all, fields(schedule = %schedule.def.id))]
    pub async fn update(&self, schedule: NewSchedule) -> Result<Change, SchedulerError> {
        let id = schedule.def.id.clone();
        let mut moved_from = None;
        let change = self
            .change(&id, |cur| {
                let cur = cur.ok_or_else(|| SchedulerError::UnknownSchedule(id.clone()))?;
                let now = now_ms();
                let moved = cur.queue != schedule.def.queue;
                moved_from = moved.then(|| cur.queue.clone());
                let new = ScheduleDef {
                    paused: cur.paused,
                    created_ms: cur.created_ms,
                    updated_ms: now,
                    // Moved, or firing by another spec: it starts afresh now.
                    active_since_ms: if moved || cur.spec != schedule.def.spec {
                        now
                    } else {
                        cur.active_since_ms
                    },
                    ..schedule.def.clone()
                };
                Ok((!cur.same_as(&new)).then_some(Some(new)))
            })
            .await?;
        // Whatever the answer: a re-send after a lost reply answers Unchanged for a move it
        // did write, and the old queue's state must go all the same.
        if let Some(q) = moved_from {
            if let Ok(q) = QueueName::new(q) {
                self.broker
                    .forget_fire_state(&q, std::slice::from_ref(&id))
                    .await?;
            }
        }
        Ok(change)
    }

    /// Changes when a stored schedule fires and what its tasks carry, keeping the rest of its
    /// definition (kind, queue, options, paused, fire state): what an operator edits in place.
    /// Validated as [`NewSchedule`] is, before anything is written;
    /// [`SchedulerError::UnknownSchedule`] for an unknown id, [`Change::Unchanged`] when the
    /// edit changes nothing.
    #[instrument(skip(self, edit))]
    pub async fn edit(&self, id: &str, edit: ScheduleEdit) -> Result<Change, SchedulerError> {
        let payload = match &edit.payload {
            Some(p) => Some(
                rmp_serde::to_vec_named(p)
                    .map_err(|e| SchedulerError::InvalidOption(format!("payload: {e}")))?,
            ),
            None => None,
        };
        let spec = match &edit.spec {
            Some(s) => Some((spec_def(s)?, s.describe())),
            None => None,
        };
        self.change(id, |cur| {
            let cur = cur.ok_or_else(|| SchedulerError::UnknownSchedule(id.to_string()))?;
            let mut new = cur.clone();
            if let Some(p) = &payload {
                new.payload = p.clone();
            }
            if let Some((def, describe)) = &spec {
                new.spec = def.clone();
                new.describe = describe.clone();
            }
            if new.same_as(cur) {
                return Ok(None);
            }
            // The same conversion the leader makes, so what is stored is what fires.
            schedule_of(&new)?;
            new.updated_ms = now_ms();
            // A leader fires a changed spec from now on: nothing before counts as missed.
            if new.spec != cur.spec {
                new.active_since_ms = new.updated_ms;
            }
            Ok(Some(Some(new)))
        })
        .await
    }

    /// Pauses a stored schedule: it fires nothing until resumed.
    #[instrument(skip(self))]
    pub async fn pause(&self, id: &str) -> Result<Change, SchedulerError> {
        self.set_paused(id, true).await
    }

    /// Resumes a paused schedule: it fires from now on; triggers that fell due while it was
    /// paused are not caught up.
    #[instrument(skip(self))]
    pub async fn resume(&self, id: &str) -> Result<Change, SchedulerError> {
        self.set_paused(id, false).await
    }

    async fn set_paused(&self, id: &str, paused: bool) -> Result<Change, SchedulerError> {
        self.change(id, |cur| {
            let cur = cur.ok_or_else(|| SchedulerError::UnknownSchedule(id.to_string()))?;
            if cur.paused == paused {
                return Ok(None);
            }
            let now = now_ms();
            Ok(Some(Some(ScheduleDef {
                paused,
                updated_ms: now,
                active_since_ms: if paused { cur.active_since_ms } else { now },
                ..cur.clone()
            })))
        })
        .await
    }

    /// Removes a stored schedule and forgets its fire state. [`SchedulerError::UnknownSchedule`]
    /// for an unknown id.
    #[instrument(skip(self))]
    pub async fn remove(&self, id: &str) -> Result<Change, SchedulerError> {
        let mut queue = None;
        let change = self
            .change(id, |cur| {
                let cur = cur.ok_or_else(|| SchedulerError::UnknownSchedule(id.to_string()))?;
                queue = Some(cur.queue.clone());
                Ok(Some(None))
            })
            .await?;
        if let Some(q) = queue.and_then(|q| QueueName::new(q).ok()) {
            self.broker.forget_fire_state(&q, &[id.to_string()]).await?;
        }
        Ok(change)
    }

    /// Enqueues one task of a stored schedule now (paused or not), once per `request`: a
    /// repeated call with the same request id (within a day) enqueues nothing more. Without a
    /// request id, a fresh one is used. The task carries the schedule headers (the trigger
    /// header is the time of the call), is counted as fired, and leaves the schedule's regular
    /// triggers alone. Works for runtime schedules only: the payload of a schedule registered
    /// in code lives in its process, not in Redis.
    ///
    /// It ignores the schedule's [`OverlapPolicy::Forbid`](crate::OverlapPolicy::Forbid): the task is enqueued even while the
    /// schedule's last task is still pending or running, and regular triggers do not wait for a
    /// run-now task either (their overlap check looks at the last regular task only). The
    /// unique lock of a unique schedule does apply ([`FireOutcome::Unique`]).
    #[instrument(skip(self))]
    pub async fn run_now(&self, id: &str, request: Option<&str>) -> Result<RunNow, SchedulerError> {
        let request = match request {
            Some(r) => {
                if r.is_empty()
                    || r.len() > 64
                    || r.chars().any(|c| {
                        c.is_whitespace() || c.is_control() || c == '{' || c == '}' || c == ':'
                    })
                {
                    return Err(SchedulerError::InvalidOption(format!(
                        "request id {r:?} must be 1 to 64 characters without whitespace, braces or colons"
                    )));
                }
                r.to_string()
            }
            None => new_task_id(),
        };
        let stored = self
            .broker
            .schedule_def(id)
            .await?
            .ok_or_else(|| SchedulerError::UnknownSchedule(id.to_string()))?;
        let s = schedule_of(&stored.def)?;
        let now = now_ms();
        let task = s.run_task(&request, now)?;
        let task_id = task.envelope.id.clone();
        let outcome = self
            .broker
            .run_schedule(&s.queue, id, &request, task)
            .await?;
        if outcome == FireOutcome::Fired {
            metrics::fired(s.queue.as_str(), 0);
        }
        info!(task = %task_id, outcome = ?outcome, "ran schedule now");
        Ok(RunNow { task_id, outcome })
    }

    /// Reads the stored definition, asks `decide` for the new one (`None`: nothing to do;
    /// `Some(None)`: delete), and writes it by compare-and-set, again on a concurrent change.
    async fn change(
        &self,
        id: &str,
        mut decide: impl FnMut(
            Option<&ScheduleDef>,
        ) -> Result<Option<Option<ScheduleDef>>, SchedulerError>,
    ) -> Result<Change, SchedulerError> {
        for _ in 0..CAS_ROUNDS {
            let cur: Option<StoredDef> = self.broker.schedule_def(id).await?;
            let Some(new) = decide(cur.as_ref().map(|c| &c.def))? else {
                return Ok(Change::Unchanged);
            };
            let expected = cur.as_ref().map(|c| c.raw.as_slice());
            match self
                .broker
                .put_schedule_def(id, expected, new.as_ref())
                .await?
            {
                PutOutcome::Written => {
                    info!(removed = new.is_none(), "runtime schedule stored");
                    return Ok(Change::Done);
                }
                PutOutcome::Unchanged => return Ok(Change::Unchanged),
                PutOutcome::CodeOwned => return Err(SchedulerError::CodeSchedule(id.to_string())),
                PutOutcome::Conflict | _ => continue,
            }
        }
        Err(SchedulerError::Contended(id.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw<S>(id: &str, spec: S) -> Result<NewSchedule, SchedulerError>
    where
        S: TryInto<Spec>,
        SchedulerError: From<S::Error>,
    {
        let payload = serde_json::json!({"n": 1});
        NewSchedule::raw(id, "ping", &payload, spec, ScheduleOptions::new())
    }

    #[test]
    fn a_spec_and_a_runtime_spec_store_the_same_definition() {
        let every = Duration::from_secs(30);
        assert_eq!(
            raw("a", Spec::interval(every).expect("valid")).expect("spec"),
            raw("a", RuntimeSpec::Every(every)).expect("runtime spec"),
        );
        let berlin = RuntimeSpec::Cron {
            expr: "0 9 * * MON".into(),
            zone: Some("Europe/Berlin".into()),
        };
        assert_eq!(
            raw(
                "b",
                Spec::cron("0 9 * * MON", "Europe/Berlin").expect("valid")
            )
            .expect("spec"),
            raw("b", berlin).expect("runtime spec"),
        );
        // A runtime spec without a zone is UTC.
        let utc = RuntimeSpec::Cron {
            expr: "0 3 * * *".into(),
            zone: None,
        };
        assert_eq!(
            raw("c", Spec::cron("0 3 * * *", "UTC").expect("valid")).expect("spec"),
            raw("c", utc).expect("runtime spec"),
        );
    }

    #[test]
    fn a_bad_runtime_spec_is_a_spec_error_and_a_bad_id_is_reported_first() {
        let bad = || RuntimeSpec::Cron {
            expr: "not cron".into(),
            zone: None,
        };
        assert!(matches!(raw("x", bad()), Err(SchedulerError::Spec(_))));
        assert!(matches!(
            raw("has space", bad()),
            Err(SchedulerError::InvalidOption(_))
        ));
    }
}
