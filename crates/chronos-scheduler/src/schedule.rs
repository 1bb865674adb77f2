//! A schedule as the leader fires it: what to enqueue, when, and with which options, built
//! from a registration in code or from a stored definition (see `def`).

use std::time::Duration;

use chronos_core::{
    duration_ms, encode_args, EnqueueOptions, NewTask, QueueName, ScheduleEntry, TaskArgs, Trigger,
};

use crate::error::SchedulerError;
use crate::id::{check_id, derived_id};
use crate::misfire::MisfirePolicy;
use crate::options::{OverlapPolicy, ScheduleOptions};
use crate::spec::Spec;

/// A registered schedule: what to enqueue and when.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// The id (given or derived): names the fire state, dedup keys and task ids.
    pub(crate) id: String,
    /// When it fires.
    pub(crate) spec: Spec,
    /// The task kind.
    pub(crate) kind: String,
    /// The task payload, encoded.
    pub(crate) payload: Vec<u8>,
    /// The queue its tasks go to (and where its fire state lives).
    pub(crate) queue: QueueName,
    /// The enqueue options of every fired task, the kind's defaults merged in.
    pub(crate) enqueue: EnqueueOptions,
    /// Each task's deadline, counted from its trigger.
    pub(crate) deadline_after: Option<Duration>,
    /// What a leader does with triggers that fell due while none fired.
    pub(crate) misfire: MisfirePolicy,
    /// What a trigger does while the previous task is unfinished.
    pub(crate) overlap: OverlapPolicy,
    /// A runtime schedule's activation (added or resumed): catch-up never reaches before it.
    pub(crate) since_ms: Option<i64>,
}

impl Schedule {
    /// A schedule registered in code, validated as `register_*` promises: a bad id, queue or
    /// option, or `durable`, is an error here.
    pub(crate) fn new<T: TaskArgs>(
        spec: Spec,
        task: &T,
        opts: ScheduleOptions,
    ) -> Result<Self, SchedulerError> {
        let payload = encode_args(task)?;
        let enqueue = T::default_options().merge(opts.enqueue);
        let queue = QueueName::new(enqueue.queue_name())?;
        let id = match opts.id {
            Some(id) => id,
            None => derived_id(T::KIND, &spec, &queue),
        };
        check_id(&id)?;
        let s = Self {
            id,
            spec,
            kind: T::KIND.to_string(),
            payload,
            queue,
            enqueue,
            deadline_after: opts.deadline_after,
            misfire: opts.misfire,
            overlap: opts.overlap,
            since_ms: None,
        };
        // Build one trigger now, so a bad option (a zero unique TTL) is an error at
        // registration, not a log line at every trigger.
        let first = s.trigger(0, 0, None)?;
        if first.task.durable().is_some() {
            return Err(SchedulerError::DurableSchedule(s.id));
        }
        if first
            .task
            .dedup()
            .is_some_and(|d| chronos_core::DefDedup::of(d).is_none())
        {
            return Err(SchedulerError::schedule_mode());
        }
        Ok(s)
    }

    /// The trigger at `at_ms`, with the deterministic task id `<schedule>:<trigger unix seconds>`
    /// (so two leaders build the same task) and headers naming the schedule and trigger.
    /// `now_ms` is the task's enqueue time; `prev_task` the schedule's last task as known.
    pub(crate) fn trigger(
        &self,
        at_ms: i64,
        now_ms: i64,
        prev_task: Option<String>,
    ) -> Result<Trigger, SchedulerError> {
        let opts = self
            .enqueue
            .clone()
            .task_id(format!("{}:{}", self.id, at_ms.div_euclid(1000)))
            .header(chronos_core::SCHEDULE_HEADER, self.id.clone())
            .header(chronos_core::TRIGGER_HEADER, at_ms.to_string());
        let mut task = NewTask::build(&self.kind, self.payload.clone(), opts, now_ms)?;
        // Fired tasks are ready at their trigger, whatever process-at the options carried.
        task.run_at_ms = now_ms;
        if let Some(d) = self.deadline_after {
            task.envelope.deadline_ms = Some(at_ms.saturating_add(duration_ms(d)));
        }
        Ok(Trigger {
            schedule_id: self.id.clone(),
            at_ms,
            task,
            forbid_overlap: self.overlap == OverlapPolicy::Forbid,
            prev_task_id: prev_task,
        })
    }

    /// A run-now task of this schedule: id `<schedule>:run:<request>`, the schedule headers
    /// with the call's time as the trigger, ready at once.
    pub(crate) fn run_task(&self, request: &str, now_ms: i64) -> Result<NewTask, SchedulerError> {
        let opts = self
            .enqueue
            .clone()
            .task_id(format!("{}:run:{request}", self.id))
            .header(chronos_core::SCHEDULE_HEADER, self.id.clone())
            .header(chronos_core::TRIGGER_HEADER, now_ms.to_string());
        let mut task = NewTask::build(&self.kind, self.payload.clone(), opts, now_ms)?;
        task.run_at_ms = now_ms;
        if let Some(d) = self.deadline_after {
            task.envelope.deadline_ms = Some(now_ms.saturating_add(duration_ms(d)));
        }
        Ok(task)
    }

    /// The registry entry this instance publishes for the schedule at `now`.
    pub(crate) fn entry(&self, instance: &str, now: i64) -> ScheduleEntry {
        ScheduleEntry {
            id: self.id.clone(),
            spec: self.spec.describe(),
            zone: self.spec.zone_name().to_string(),
            queue: self.queue.to_string(),
            kind: self.kind.clone(),
            next_run_ms: self.spec.next_after(now),
            every_ms: self.spec.every_ms(),
            last_fired_ms: None,
            last_task_id: None,
            registered_by: instance.to_string(),
            last_seen_ms: now,
            stale: false,
            source: Default::default(),
            paused: false,
        }
    }
}
