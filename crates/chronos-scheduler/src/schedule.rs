use std::time::Duration;

use chronos_broker::{
    duration_ms, encode_args, EnqueueOptions, NewTask, QueueName, ScheduleDef, ScheduleEntry,
    TaskArgs, Trigger,
};

use crate::{MisfirePolicy, OverlapPolicy, SchedulerError, Spec};

/// A registered schedule: what to enqueue and when.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub(crate) id: String,
    pub(crate) spec: Spec,
    pub(crate) kind: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) queue: QueueName,
    pub(crate) enqueue: EnqueueOptions,
    pub(crate) deadline_after: Option<Duration>,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) overlap: OverlapPolicy,
    /// A runtime schedule's activation (added or resumed): catch-up never reaches before it.
    pub(crate) since_ms: Option<i64>,
}

impl Schedule {
    pub(crate) fn new<T: TaskArgs>(
        spec: Spec,
        task: &T,
        opts: crate::ScheduleOptions,
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
        if s.trigger(0, 0, None)?.task.durable().is_some() {
            return Err(SchedulerError::DurableSchedule(s.id));
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
            .header(chronos_broker::SCHEDULE_HEADER, self.id.clone())
            .header(chronos_broker::TRIGGER_HEADER, at_ms.to_string());
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
            .header(chronos_broker::SCHEDULE_HEADER, self.id.clone())
            .header(chronos_broker::TRIGGER_HEADER, now_ms.to_string());
        let mut task = NewTask::build(&self.kind, self.payload.clone(), opts, now_ms)?;
        task.run_at_ms = now_ms;
        if let Some(d) = self.deadline_after {
            task.envelope.deadline_ms = Some(now_ms.saturating_add(duration_ms(d)));
        }
        Ok(task)
    }

    /// The definition this code schedule publishes, so that a leader which does not register
    /// it fires it with the same task and options. None when its options hold what a stored
    /// definition cannot carry (a rate key, an absolute deadline): such a schedule is fired
    /// only by leaders that register it themselves.
    pub(crate) fn def(&self) -> Option<ScheduleDef> {
        let t = self.trigger(0, 0, None).ok()?;
        let env = &t.task.envelope;
        if env.rate_key.is_some() || (self.deadline_after.is_none() && env.deadline_ms.is_some()) {
            return None;
        }
        crate::runtime::def_of(
            self.id.clone(),
            &self.kind,
            self.payload.clone(),
            &self.spec,
            self.enqueue.clone(),
            self.deadline_after,
            self.misfire,
            self.overlap,
        )
        .ok()
    }

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

/// Ids name keys (`sched:d:<id>:<secs>`) and task ids, so they are bounded and carry no
/// whitespace or hash-tag braces.
pub(crate) fn check_id(id: &str) -> Result<(), SchedulerError> {
    if id.is_empty()
        || id.len() > 200
        || id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '{' || c == '}')
    {
        return Err(SchedulerError::InvalidOption(format!(
            "schedule id {id:?} must be 1 to 200 characters without whitespace or braces"
        )));
    }
    Ok(())
}

/// `<kind>:<16 hex of sha256(kind, spec, zone, queue)>`: the same on every instance that
/// registers the schedule, and unchanged when only the payload changes (a rolling deploy that
/// changes the payload must not start the schedule afresh under a new id while the old
/// instances still fire the old one).
fn derived_id(kind: &str, spec: &Spec, queue: &QueueName) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        kind.as_bytes(),
        spec.describe().as_bytes(),
        spec.zone_name().as_bytes(),
        queue.as_str().as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{kind}:{hex}")
}
