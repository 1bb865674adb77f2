use chronos_broker::{
    encode_args, now_ms, EnqueueOptions, NewTask, QueueName, ScheduleEntry, TaskArgs, Trigger,
};

use crate::{MisfirePolicy, OverlapPolicy, SchedulerError, Spec};

/// A registered schedule: what to enqueue and when.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub(crate) id: String,
    pub(crate) spec: Spec,
    pub(crate) kind: &'static str,
    pub(crate) payload: Vec<u8>,
    pub(crate) queue: QueueName,
    pub(crate) enqueue: EnqueueOptions,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) overlap: OverlapPolicy,
}

impl Schedule {
    pub(crate) fn new<T: TaskArgs>(
        spec: Spec,
        task: &T,
        opts: crate::ScheduleOptions,
    ) -> Result<Self, SchedulerError> {
        let payload = encode_args(task)?;
        let mut enqueue = T::default_options();
        if let Some(q) = opts.queue {
            enqueue = enqueue.queue(q);
        }
        if let Some(n) = opts.max_retry {
            enqueue = enqueue.max_retry(n);
        }
        if let Some(d) = opts.retention {
            enqueue = enqueue.retention(d);
        }
        if let Some(d) = opts.timeout {
            enqueue = enqueue.timeout(d);
        }
        let queue = QueueName::new(enqueue.queue_name())?;
        let id = match opts.id {
            Some(id) => id,
            None => derived_id(T::KIND, &spec, &queue, &payload),
        };
        if id.is_empty()
            || id.len() > 200
            || id
                .chars()
                .any(|c| c.is_whitespace() || c == '{' || c == '}')
        {
            return Err(SchedulerError::InvalidOption(format!(
                "schedule id {id:?} must be 1 to 200 characters without whitespace or braces"
            )));
        }
        Ok(Self {
            id,
            spec,
            kind: T::KIND,
            payload,
            queue,
            enqueue,
            misfire: opts.misfire,
            overlap: opts.overlap,
        })
    }

    /// The trigger at `at_ms`, with the deterministic task id `<schedule>:<trigger unix seconds>`
    /// (so two leaders build the same task) and headers naming the schedule and trigger.
    pub(crate) fn trigger(&self, at_ms: i64) -> Result<Trigger, SchedulerError> {
        let opts = self
            .enqueue
            .clone()
            .task_id(format!("{}:{}", self.id, at_ms.div_euclid(1000)))
            .header("chronos-schedule", self.id.clone())
            .header("chronos-trigger-ms", at_ms.to_string());
        let task = NewTask::build(self.kind, self.payload.clone(), opts, now_ms())?;
        Ok(Trigger {
            schedule_id: self.id.clone(),
            at_ms,
            task,
            forbid_overlap: self.overlap == OverlapPolicy::Forbid,
        })
    }

    pub(crate) fn entry(&self, instance: &str, now: i64) -> ScheduleEntry {
        ScheduleEntry {
            id: self.id.clone(),
            spec: self.spec.describe(),
            zone: self.spec.zone_name().to_string(),
            queue: self.queue.to_string(),
            kind: self.kind.to_string(),
            next_run_ms: self.spec.next_after(now),
            last_fired_ms: None,
            last_task_id: None,
            registered_by: instance.to_string(),
            last_seen_ms: now,
            stale: false,
        }
    }
}

/// `<kind>:<16 hex of sha256(kind, spec, zone, queue, payload)>`: the same on every instance
/// that registers the same schedule, different when any of those differ.
fn derived_id(kind: &str, spec: &Spec, queue: &QueueName, payload: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        kind.as_bytes(),
        spec.describe().as_bytes(),
        spec.zone_name().as_bytes(),
        queue.as_str().as_bytes(),
        payload,
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
