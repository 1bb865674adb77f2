use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chronos_core::{
    ChainPosition, DecodeError, Flow, GroupSummary, TaskEnvelope, MAX_PROGRESS_BYTES,
    SCHEDULE_HEADER, TRIGGER_HEADER,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::progress::Reporter;
use crate::ProgressError;

/// A decoded task as its handler receives it.
#[derive(Debug, Clone)]
pub struct Task<T> {
    /// The task arguments, already decoded.
    pub args: T,
    /// Headers given at enqueue.
    pub headers: BTreeMap<String, String>,
    /// When it was enqueued (unix ms).
    pub enqueued_at_ms: i64,
}

/// What a handler, and every middleware around it, knows about the attempt it runs: the task's
/// identity, its headers (trace context travels here), the trigger of a scheduled task, and the
/// attempt's limits. Cheap to clone (the headers are shared).
#[derive(Debug, Clone)]
pub struct Context {
    task_id: String,
    kind: String,
    queue: String,
    attempt: u32,
    max_retry: u32,
    deadline: Option<Instant>,
    cancel: CancellationToken,
    headers: Arc<BTreeMap<String, String>>,
    rate_key: Option<Arc<str>>,
    output: OutputSlot,
    /// The task's place in a chain or group; None (and free) for a plain task.
    flow: Option<Arc<Flow>>,
    /// Where progress reports and log lines go; None outside a server (progress is checked
    /// and dropped, lines dropped).
    progress: Option<Reporter>,
}

/// Where the typed handler leaves its encoded result for the executor, past the middleware
/// chain (which passes `Result<(), TaskError>` only, so middleware need not know result types).
#[derive(Debug, Clone, Default)]
pub(crate) struct OutputSlot(Arc<Mutex<Option<Vec<u8>>>>);

impl OutputSlot {
    pub(crate) fn set(&self, bytes: Option<Vec<u8>>) {
        // A poisoned lock only means a panic elsewhere while holding it; the value is still ours.
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = bytes;
    }

    pub(crate) fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Context {
    /// The context of one attempt of `env`, cut off at `deadline` and by `cancel`.
    pub(crate) fn for_attempt(
        env: &TaskEnvelope,
        deadline: Option<Instant>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            task_id: env.id.clone(),
            kind: env.kind.clone(),
            queue: env.queue.clone(),
            attempt: env.retried.saturating_add(1),
            max_retry: env.max_retry,
            deadline,
            cancel,
            headers: Arc::new(env.headers.clone()),
            rate_key: env.rate_key.as_deref().map(Arc::from),
            output: OutputSlot::default(),
            flow: env.flow.as_deref().map(|f| Arc::new(f.clone())),
            progress: None,
        }
    }

    /// Adds a line to this attempt's own log: kept with the attempt in the task's history
    /// (capped per attempt, redacted, see [`crate::ServerConfig::task_logs`]) when the task has
    /// a record (it failed, was snoozed, cancelled, dead-lettered, or is retained), and shown
    /// by `chronos task logs` and the console's task page. Cheap: no Redis call here; the
    /// lines go with the call that settles the attempt. The handler's `tracing` events join
    /// them when the application installs [`crate::LogCapture`].
    pub fn log(&self, line: impl std::fmt::Display) {
        if let Some(r) = &self.progress {
            r.log("LOG", &line.to_string());
        }
    }

    /// This context, its progress reports going to `reporter`.
    pub(crate) fn with_progress(mut self, reporter: Reporter) -> Self {
        self.progress = Some(reporter);
        self
    }

    /// Reports how far this attempt is: any value that serializes to JSON (a number, a
    /// `{"done": 3, "of": 10}`, ...), at most [`MAX_PROGRESS_BYTES`] of it. The value replaces
    /// the last one; reports are coalesced (the store gets the latest at most four times a
    /// second per server and queue, or with the next heartbeat), each write refreshes the
    /// task's lease, and the last value reported before the handler returns is stored before
    /// the task is settled. Readable by `Client::progress`, `chronos task show` and the console,
    /// for [`chronos_core::PROGRESS_TTL`] after the last report. Cheap: no Redis call here.
    ///
    /// Errors ([`ProgressError`]): the value does not serialize, or is too large; nothing is
    /// reported then. A handler may ignore the error (`let _ =`) or fail with it (`?`).
    pub fn progress<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), ProgressError> {
        let json = serde_json::to_vec(value).map_err(|e| ProgressError::Encode(e.to_string()))?;
        if json.len() > MAX_PROGRESS_BYTES {
            return Err(ProgressError::TooLarge {
                len: json.len(),
                max: MAX_PROGRESS_BYTES,
            });
        }
        if let Some(r) = &self.progress {
            r.report(&self.task_id, json);
        }
        Ok(())
    }

    /// [`Context::progress`] with `{"percent": percent, "note": note}`, which the console draws
    /// as a bar with its note (`TaskProgress::percent` and `note` read it back). A percent
    /// outside 0..=100 is clamped; one that is not a number is reported as 0.
    pub fn percent(&self, percent: f64, note: impl Into<String>) -> Result<(), ProgressError> {
        let percent = if percent.is_finite() {
            percent.clamp(0.0, 100.0)
        } else {
            0.0
        };
        self.progress(&serde_json::json!({ "percent": percent, "note": note.into() }))
    }

    /// The slot the typed handler's result goes to.
    pub(crate) fn output_slot(&self) -> OutputSlot {
        self.output.clone()
    }

    /// The headers given at enqueue (the same as [`Task::headers`]), so that middleware, which
    /// never sees the typed task, can read trace context and the like.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }

    /// One header, if the task carries it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The id of the schedule that fired this task (its [`SCHEDULE_HEADER`]); None for a task
    /// that was enqueued directly.
    pub fn schedule_id(&self) -> Option<&str> {
        self.header(SCHEDULE_HEADER)
    }

    /// The trigger time this scheduled task was fired for (its [`TRIGGER_HEADER`]), which may
    /// be well before now when the task waited in the queue or was fired by a catch-up. None for
    /// a task enqueued directly, and for a header that is not a unix-ms integer in the range of
    /// `SystemTime` (a malformed header is ignored, never a panic).
    pub fn trigger_time(&self) -> Option<SystemTime> {
        let ms: i64 = self.header(TRIGGER_HEADER)?.trim().parse().ok()?;
        let offset = Duration::from_millis(ms.unsigned_abs());
        if ms >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(offset)
        } else {
            SystemTime::UNIX_EPOCH.checked_sub(offset)
        }
    }

    /// The rate key the task was enqueued with
    /// ([`chronos_core::EnqueueOptions::rate_key`]), if any.
    pub fn rate_key(&self) -> Option<&str> {
        self.rate_key.as_deref()
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The queue it came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// 1 for the first attempt, 2 for the first retry, and so on.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Retries allowed after the first attempt.
    pub fn max_retry(&self) -> u32 {
        self.max_retry
    }

    /// When this attempt is cut off (the earlier of the task's timeout and deadline), if ever.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Fires when the attempt must stop: timeout, deadline, server shutdown past its grace
    /// period, or the lease was lost. Long handlers should watch it (`ctx.cancelled().await` in a
    /// `select!`); one that ignores it is dropped at its next await point anyway.
    ///
    /// It also fires when an operator cancels the task (`chronos task cancel`, the console,
    /// `Operate::act` with `TaskAction::Cancel`), and then nothing else happens: a handler that
    /// ignores it runs on, and what it returns settles the task as usual (an error is retried;
    /// return `TaskError::skip_retry` to stop for good).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The previous chain step's result, decoded as `R`: None for the first step, for a step
    /// whose predecessor returned none (`()`), and outside a chain.
    pub fn parent_result<R: DeserializeOwned>(&self) -> Result<Option<R>, DecodeError> {
        match self.parent_result_bytes() {
            None => Ok(None),
            Some(bytes) => {
                rmp_serde::from_slice(bytes)
                    .map(Some)
                    .map_err(|e| DecodeError::Payload {
                        kind: format!("{} (parent result)", self.kind),
                        reason: e.to_string(),
                    })
            }
        }
    }

    /// The previous chain step's result as MessagePack bytes, if it returned one.
    pub fn parent_result_bytes(&self) -> Option<&[u8]> {
        let parent = &self.flow.as_deref()?.parent;
        (!parent.is_empty()).then_some(parent.as_slice())
    }

    /// Where this chain step stands (chain id, step index, step count); None outside a chain.
    pub fn chain(&self) -> Option<ChainPosition> {
        let link = self.flow.as_deref()?.chain.as_ref()?;
        Some(ChainPosition {
            id: link.id.clone(),
            step: link.step,
            total: link.total,
        })
    }

    /// In a group's callback: the group's id, size and final counts (how many members
    /// succeeded and how many were dead-lettered). None in any other task.
    pub fn group(&self) -> Option<GroupSummary> {
        let cb = self.flow.as_deref()?.callback.as_ref()?;
        let (succeeded, failed) = cb.counts()?;
        Some(GroupSummary {
            id: cb.id.clone(),
            queue: self.queue.clone(),
            total: cb.total,
            succeeded,
            failed,
            collected: cb.collect,
        })
    }

    /// In a group member: its group's id and its index in the group. None in any other task.
    pub fn group_member(&self) -> Option<(&str, u64)> {
        let link = self.flow.as_deref()?.member.as_ref()?;
        Some((link.id.as_str(), link.index))
    }

    /// Waits until [`Context::cancellation`] fires.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}
