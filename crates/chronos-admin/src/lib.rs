//! The operations layer of chronos-rs: what the `chronos` CLI and the web console do, as a
//! library other programs can call. Thin over the broker's capability traits
//! ([`chronos_broker::Inspect`], [`chronos_broker::Operate`], [`chronos_broker::Schedules`]):
//! it turns their answers into serializable views (payloads decoded to JSON) and their
//! outcomes into typed errors.
//!
//! ```no_run
//! # async fn run() -> Result<(), chronos_admin::AdminError> {
//! let admin = chronos_admin::connect("redis://127.0.0.1:6379", "chronos").await?;
//! for q in admin.queues().await? {
//!     println!("{} pending={} archived={}", q.name, q.pending, q.archived);
//! }
//! # Ok(()) }
//! ```

mod archive;
mod bulk;
mod dead_letters;
mod enqueue;
mod flows;
mod lookup;
mod printable;
mod redact;
mod schedules;
mod settings;
mod tenants;
mod timing;

use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

use chronos_broker::{
    ActionOutcome, BrokerError, BulkReport, EvictionCheck, HistorySpan, Inspect, ManageSchedules,
    Operate, Priority, QueueName, QueueStats, RedisBroker, ScheduleEntry, ScheduleSource,
    Schedules, ServerRecord, TaskAction, TaskFilter, TaskRecord, TaskState,
};
use serde::Serialize;

pub use archive::ArchiveCap;
pub use bulk::{BulkJob, BulkStatus, CancelToken, DEFAULT_BULK_CHUNK};
pub use chronos_broker::{HistoryPoint, TaskAction as Action, TaskEdit};
pub use dead_letters::{error_group_key, ErrorGroup, ErrorGroups};
pub use enqueue::check_kind;
pub use flows::{ChainView, FlowView, GroupView, MemberRow, StepRow};
pub use lookup::{UnknownQueue, UnknownTenant};
pub use printable::{printable, printable_lines};
pub use redact::redact_url;
pub use schedules::{overdue_trigger, FireRow, OVERDUE_GRACE};
pub use settings::SettingsRow;
pub use tenants::{
    TenantList, TenantRow, TenantSettingsChanged, TenantSettingsRow, MAX_TENANT_LIST,
};
pub use timing::{KindTiming, Quantiles, TimingReport, TimingStep};

/// What can go wrong in an operation. Each variant's message is one line, fit for a CLI.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The broker failed (Redis unreachable, a bad name, a queue not empty, ...).
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// A runtime schedule change was refused (invalid spec, unknown or taken id, ...).
    #[error(transparent)]
    Schedule(#[from] chronos_scheduler::SchedulerError),
    /// No queue of this name in the namespace (a typo, or another namespace): nothing was
    /// done. Permanent for this name; the details say which queues exist.
    #[error("{0}")]
    QueueNotFound(Box<UnknownQueue>),
    /// No tenant of this key in this queue (no task of it waits or runs, no stored setting):
    /// nothing was done. The details list the tenants the queue has.
    #[error("{0}")]
    TenantNotFound(Box<UnknownTenant>),
    /// No task with this id in this queue (for a delete: none to delete, possibly deleted a
    /// moment ago).
    #[error("no task {id:?} in queue {queue:?}")]
    TaskNotFound {
        /// The queue.
        queue: String,
        /// The task id.
        id: String,
    },
    /// The task's state does not allow the action; nothing changed.
    #[error("task {id:?} is {state}: cannot {action}")]
    Refused {
        /// The task id.
        id: String,
        /// Its state.
        state: String,
        /// The action, as a verb.
        action: &'static str,
    },
    /// The task record is corrupt; nothing changed.
    #[error("task {id:?} has a corrupt record; nothing changed")]
    Corrupt {
        /// The task id.
        id: String,
    },
    /// An argument is out of range (an unknown state name, a bad cursor).
    #[error("{0}")]
    Invalid(String),
}

/// Connects to Redis for operating it: never refuses a Redis that may evict keys (an operator
/// must be able to look at any deployment).
pub async fn connect(url: &str, namespace: &str) -> Result<Admin<RedisBroker>, AdminError> {
    let broker = RedisBroker::builder(url)
        .namespace(namespace)
        .eviction_check(EvictionCheck::Skip)
        .connect()
        .await?;
    Ok(Admin::new(broker))
}

/// A queue with its counts, as listed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct QueueRow {
    /// Queue name.
    pub name: String,
    /// Workers do not fetch from it.
    pub paused: bool,
    /// Waiting in the stream.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// Delayed.
    pub scheduled: u64,
    /// Waiting for a retry.
    pub retry: u64,
    /// Dead letters kept.
    pub archived: u64,
    /// Completed and kept.
    pub completed: u64,
    /// Tasks completed since the queue was created.
    pub processed: u64,
    /// Failed attempts since the queue was created.
    pub failed: u64,
    /// Per priority level, most urgent first, when the queue's tasks use levels other than the
    /// default (empty otherwise).
    pub levels: Vec<LevelRow>,
    /// Enqueues deduplicated since the queue was created, by mode.
    pub deduplicated: chronos_broker::DedupCounts,
    /// Cancelled by their handler and kept.
    pub cancelled: u64,
}

/// The tasks of one priority level of a queue.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct LevelRow {
    /// The level (0 runs first).
    pub level: u8,
    /// Waiting.
    pub pending: u64,
    /// Held by workers.
    pub active: u64,
    /// How long the oldest waiting task has waited, in ms (None: none waits).
    pub oldest_pending_ms: Option<u64>,
}

impl QueueRow {
    fn new(name: &QueueName, s: QueueStats, paused: bool) -> Self {
        Self {
            name: name.to_string(),
            paused,
            pending: s.pending,
            active: s.active,
            scheduled: s.scheduled,
            retry: s.retry,
            archived: s.archived,
            completed: s.completed,
            processed: s.processed,
            failed: s.failed,
            deduplicated: s.deduplicated,
            cancelled: s.cancelled,
            levels: s
                .levels
                .iter()
                .map(|l| LevelRow {
                    level: l.priority.get(),
                    pending: l.pending,
                    active: l.active,
                    oldest_pending_ms: l.oldest_pending_ms,
                })
                .collect(),
        }
    }

    /// Tasks held in every state.
    pub fn size(&self) -> u64 {
        self.pending
            + self.active
            + self.scheduled
            + self.retry
            + self.archived
            + self.completed
            + self.cancelled
    }
}

/// A task for display: its envelope's fields with the payload decoded to JSON.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// Queue.
    pub queue: String,
    /// State name.
    pub state: String,
    /// Priority level inside the queue (0 runs first; 5 is the default).
    pub priority: u8,
    /// Kind (empty when the envelope does not decode).
    pub kind: String,
    /// The payload as JSON (MessagePack decoded; `"0x.."` for bytes that are not MessagePack).
    pub payload: serde_json::Value,
    /// Failed attempts so far.
    pub retried: u32,
    /// Retries allowed.
    pub max_retry: u32,
    /// Times its handler snoozed it (no attempt spent each time).
    pub snoozes: u32,
    /// Last failure message.
    pub last_error: Option<String>,
    /// When it last failed (unix ms).
    pub last_failed_at_ms: Option<i64>,
    /// When it was enqueued (unix ms).
    pub enqueued_at_ms: Option<i64>,
    /// Headers (trace context, schedule id, ...).
    pub headers: BTreeMap<String, String>,
    /// Why the envelope does not decode, when it does not.
    pub decode_error: Option<String>,
    /// Why its handler cancelled it (a cancelled task only).
    pub cancel_reason: Option<String>,
    /// When its handler cancelled it (unix ms; a cancelled task only).
    pub cancelled_at_ms: Option<i64>,
    /// The last progress its handler reported (`Context::progress`), as JSON, with its
    /// percent when the value says one; read by [`Admin::task`] only (None in listings).
    pub progress: Option<chronos_broker::TaskProgress>,
    /// The progress's percent (0..=100), when its value says one.
    pub progress_percent: Option<f64>,
    /// Its attempt history, oldest first ([`Admin::task`] only; empty in listings).
    pub attempts: Vec<chronos_broker::AttemptRow>,
    /// The time that matters in its state (listings only, unix ms): when a scheduled task runs,
    /// when a retrying one tries again, when an archived or cancelled one ended, until when a
    /// completed one is kept ([`TaskRecord::state_time_ms`]).
    pub state_time_ms: Option<i64>,
    /// An active task's server (its id) and when its handler started there (unix ms), as the
    /// server last published them (every heartbeat); None when not running or not published.
    pub running_on: Option<(String, i64)>,
}

impl TaskRow {
    /// The view of a broker record in `queue`.
    pub fn from_record(queue: &QueueName, r: &TaskRecord) -> Self {
        let mut row = TaskRow {
            id: r.id.clone(),
            queue: queue.to_string(),
            state: r.state.as_str().to_string(),
            priority: r.priority.get(),
            kind: String::new(),
            payload: serde_json::Value::Null,
            retried: 0,
            max_retry: 0,
            snoozes: r.snoozes,
            last_error: None,
            last_failed_at_ms: None,
            enqueued_at_ms: None,
            headers: BTreeMap::new(),
            decode_error: None,
            cancel_reason: r.cancelled.as_ref().map(|c| c.reason.clone()),
            cancelled_at_ms: r.cancelled.as_ref().map(|c| c.at_ms),
            progress: r.progress.clone(),
            progress_percent: r.progress.as_ref().and_then(|p| p.percent()),
            attempts: r.attempts.clone(),
            state_time_ms: r.state_time_ms,
            running_on: None,
        };
        match &r.envelope {
            Ok(e) => {
                row.kind = e.kind.clone();
                row.payload = serde_json::from_str(&chronos_broker::envelope_payload_json(e))
                    .unwrap_or(serde_json::Value::Null);
                row.retried = e.retried;
                row.max_retry = e.max_retry;
                row.last_error = e.last_error.clone();
                row.last_failed_at_ms = e.last_failed_at_ms;
                row.enqueued_at_ms = Some(e.enqueued_at_ms);
                row.headers = e.headers.clone();
            }
            Err(e) => row.decode_error = Some(e.to_string()),
        }
        row
    }
}

/// One page of tasks.
#[derive(Debug, Clone, Serialize)]
pub struct TaskList {
    /// The tasks.
    pub tasks: Vec<TaskRow>,
    /// Cursor of the next page, None at the end.
    pub next: Option<String>,
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct BulkRow {
    /// Tasks read in the state.
    pub scanned: u64,
    /// Tasks that passed the filter.
    pub matched: u64,
    /// Tasks changed.
    pub done: u64,
    /// Matched tasks left alone (gone or moved meanwhile).
    pub skipped: u64,
    /// Matched tasks refused because a worker held them (see [`BulkStatus::running`]).
    pub running: u64,
    /// Matched tasks whose record is corrupt.
    pub failed: u64,
    /// Script calls made.
    pub calls: u64,
}

impl From<BulkReport> for BulkRow {
    fn from(r: BulkReport) -> Self {
        Self {
            scanned: r.scanned,
            matched: r.matched,
            done: r.done,
            skipped: r.skipped,
            running: r.running,
            failed: r.failed,
            calls: r.calls,
        }
    }
}

/// The scheduler leader.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeaderRow {
    /// Instance id.
    pub id: String,
    /// Fencing epoch.
    pub epoch: u64,
    /// Leading since (unix ms).
    pub since_ms: i64,
}

/// The whole deployment at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// Every queue.
    pub queues: Vec<QueueRow>,
    /// Sums over the queues (name `total`).
    pub total: QueueRow,
    /// Live worker servers.
    pub servers: usize,
    /// The scheduler leader.
    pub leader: Option<LeaderRow>,
    /// Registered schedules.
    pub schedules: usize,
}

/// One bucket of history.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct HistoryRow {
    /// Bucket start (unix ms, UTC).
    pub start_ms: i64,
    /// Tasks completed.
    pub processed: u64,
    /// Failed attempts.
    pub failed: u64,
}

/// How stale a registry entry is before it is marked stale, and when it is no longer listed:
/// the scheduler's defaults (three publish intervals of 5 s; 1 h).
const SCHEDULE_STALE: Duration = Duration::from_secs(15);
const SCHEDULE_REMOVE: Duration = Duration::from_secs(3600);

/// Operations over a broker.
#[derive(Debug, Clone)]
pub struct Admin<B> {
    broker: B,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Wraps `broker`.
    pub fn new(broker: B) -> Self {
        Self { broker }
    }

    /// The broker.
    pub fn broker(&self) -> &B {
        &self.broker
    }

    /// Every queue with its counts, sorted by name: one script call per queue, sent together.
    pub async fn queues(&self) -> Result<Vec<QueueRow>, AdminError> {
        let paused = self.broker.paused_queues().await?;
        Ok(self
            .broker
            .all_queue_stats()
            .await?
            .into_iter()
            .map(|(q, s)| {
                let p = paused.contains(&q);
                QueueRow::new(&q, s, p)
            })
            .collect())
    }

    /// One queue with its counts; [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn queue(&self, name: &str) -> Result<QueueRow, AdminError> {
        let q = self.require_queue(name).await?;
        let stats = self.broker.queue_stats(&q).await?;
        let paused = self.broker.paused_queues().await?.contains(&q);
        Ok(QueueRow::new(&q, stats, paused))
    }

    /// Pauses or resumes a queue; [`AdminError::QueueNotFound`] (and nothing changed) for a
    /// name that names no queue, so a typo never reports success.
    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<(), AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.set_paused(&q, paused).await?)
    }

    /// Deletes a queue (refused while it holds tasks unless `force`); returns the tasks deleted.
    /// [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn delete_queue(&self, name: &str, force: bool) -> Result<u64, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.delete_queue(&q, force).await?)
    }

    /// Processed and failed per minute (last 24 h) or per day (last 90 days), oldest first.
    pub async fn history(
        &self,
        name: &str,
        span: HistorySpan,
    ) -> Result<Vec<HistoryRow>, AdminError> {
        let q = self.require_queue(name).await?;
        let points = self.broker.history(&q, span).await?;
        Ok(points
            .into_iter()
            .map(|p| HistoryRow {
                start_ms: p.start_ms,
                processed: p.processed,
                failed: p.failed,
            })
            .collect())
    }

    /// A page of tasks of `state` passing `filter`, from `cursor`; [`AdminError::QueueNotFound`]
    /// for a name that names no queue.
    pub async fn tasks(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskList, AdminError> {
        let q = self.require_queue(name).await?;
        let page = self
            .broker
            .list_page(&q, state, filter, cursor, limit)
            .await?;
        let mut tasks: Vec<TaskRow> = page
            .tasks
            .iter()
            .map(|r| TaskRow::from_record(&q, r))
            .collect();
        if state == TaskState::Active && !tasks.is_empty() {
            self.fill_running_on(&q, &mut tasks).await?;
        }
        Ok(TaskList {
            tasks,
            next: page.next,
        })
    }

    /// Sets [`TaskRow::running_on`] from the live servers' records.
    async fn fill_running_on(&self, q: &QueueName, rows: &mut [TaskRow]) -> Result<(), AdminError> {
        let servers = self.broker.servers().await?;
        let mut on: std::collections::HashMap<&str, (&str, i64)> = Default::default();
        for s in &servers {
            for t in s.tasks.iter().filter(|t| t.queue == q.as_str()) {
                on.insert(t.id.as_str(), (s.id.as_str(), t.started_at_ms));
            }
        }
        for r in rows {
            r.running_on = on
                .get(r.id.as_str())
                .map(|(server, at)| (server.to_string(), *at));
        }
        Ok(())
    }

    /// One task: [`AdminError::QueueNotFound`] for an unknown queue, [`AdminError::TaskNotFound`]
    /// for an unknown id.
    pub async fn task(&self, name: &str, id: &str) -> Result<TaskRow, AdminError> {
        let q = self.require_queue(name).await?;
        match self.broker.task(&q, id).await? {
            Some(r) if r.state == TaskState::Active => {
                let mut rows = [TaskRow::from_record(&q, &r)];
                self.fill_running_on(&q, &mut rows).await?;
                let [row] = rows;
                Ok(row)
            }
            Some(r) => Ok(TaskRow::from_record(&q, &r)),
            None => Err(AdminError::TaskNotFound {
                queue: name.to_string(),
                id: id.to_string(),
            }),
        }
    }

    /// Applies `action` to one task. Ok(false) when it already was done (the task already
    /// pending, archived, or its cancel already asked); an error when the queue or the task is
    /// missing (for every action, delete included: a mistyped id must not read as success),
    /// refused or corrupt.
    pub async fn act(&self, name: &str, id: &str, action: TaskAction) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(
            name,
            id,
            verb(action),
            self.broker.act(&q, id, action).await?,
        )
    }

    /// Gives task `id` priority level `priority` (see `Operate::prioritize`). Ok(false) when
    /// it already had that level; an error when the queue or the task is missing, when the
    /// task is active or completed (refused), or corrupt.
    pub async fn prioritize(
        &self,
        name: &str,
        id: &str,
        priority: Priority,
    ) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(
            name,
            id,
            "prioritize",
            self.broker.prioritize(&q, id, priority).await?,
        )
    }

    /// Edits waiting task `id`'s payload, run time and/or level in one atomic step (see
    /// `Operate::edit`, which says where an edited task lands). Ok(false) when the task already
    /// was as asked (also when a call re-sent after a lost reply finds its first run's work
    /// done). A task that already started (active), finished (completed) or died (archived:
    /// run it first) is [`AdminError::Refused`] with its state and the action `edit`, and
    /// nothing changes; [`AdminError::TaskNotFound`], [`AdminError::QueueNotFound`] and
    /// [`AdminError::Corrupt`] as for the other actions; an empty edit, a payload over the
    /// limit or a typed payload of another kind is an [`AdminError::Broker`].
    pub async fn edit(&self, name: &str, id: &str, edit: &TaskEdit) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        outcome(name, id, "edit", self.broker.edit(&q, id, edit).await?)
    }

    /// Applies `action` to every task of `state` passing `filter`, in chunks of 1,000, as one
    /// call without progress (see [`Admin::run_bulk`] for a run that reports its progress and
    /// can be cancelled).
    pub async fn act_all(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        action: TaskAction,
    ) -> Result<BulkRow, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self
            .broker
            .act_all(&q, state, filter, action, 1000)
            .await?
            .into())
    }

    /// Live worker servers.
    pub async fn servers(&self) -> Result<Vec<ServerRecord>, AdminError> {
        Ok(self.broker.servers().await?)
    }

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

    /// The scheduler leader, if any.
    pub async fn leader(&self) -> Result<Option<LeaderRow>, AdminError> {
        Ok(self.broker.scheduler_leader().await?.map(|l| LeaderRow {
            id: l.id,
            epoch: l.epoch,
            since_ms: l.since_ms,
        }))
    }

    /// Queues, totals, servers, leader and schedules.
    pub async fn overview(&self) -> Result<Overview, AdminError> {
        let queues = self.queues().await?;
        let mut total = QueueRow::new(&QueueName::new("total")?, QueueStats::default(), false);
        for q in &queues {
            total.pending += q.pending;
            total.active += q.active;
            total.scheduled += q.scheduled;
            total.retry += q.retry;
            total.archived += q.archived;
            total.completed += q.completed;
            total.cancelled += q.cancelled;
            total.processed += q.processed;
            total.failed += q.failed;
        }
        Ok(Overview {
            servers: self.servers().await?.len(),
            leader: self.leader().await?,
            schedules: self.schedules().await?.len(),
            queues,
            total,
        })
    }
}

impl<B: Inspect + Operate + 'static> Admin<B> {
    /// Checks that `name` names a queue of the namespace (one `SMEMBERS` of the queue list).
    /// Answers the validated name, or [`AdminError::QueueNotFound`] with the known queues, the
    /// closest one when the name looks like a typo of it, and (over Redis) other namespaces
    /// holding queues, for an operator who forgot `--namespace`.
    pub async fn require_queue(&self, name: &str) -> Result<QueueName, AdminError> {
        let q = QueueName::new(name)?;
        let known = self.broker.queues().await?;
        if known.contains(&q) {
            return Ok(q);
        }
        let redis = (&self.broker as &dyn Any).downcast_ref::<RedisBroker>();
        let ns = redis.map_or(String::new(), |r| r.keyspace().namespace().to_string());
        let mut e = UnknownQueue::new(name, &ns, known.iter().map(|k| k.to_string()).collect());
        if let Some(r) = redis {
            e.other_namespaces = lookup::namespaces_with_queues(r, &ns).await;
        }
        Err(AdminError::QueueNotFound(Box::new(e)))
    }

    /// How many tasks of `state` pass `filter`, for confirming a bulk action before it runs.
    /// Without a filter this is the state's count (one call); with one, it reads the state page
    /// by page and stops after `max_scan` tasks: the count is then a range,
    /// [`MatchCount::matched`] to [`MatchCount::at_most`] (what was found, plus every task not
    /// read yet). [`AdminError::QueueNotFound`] for an unknown queue.
    pub async fn count_matching(
        &self,
        name: &str,
        state: TaskState,
        filter: &TaskFilter,
        max_scan: u64,
    ) -> Result<MatchCount, AdminError> {
        let q = self.require_queue(name).await?;
        let s = self.broker.queue_stats(&q).await?;
        let in_state = match state {
            TaskState::Pending => Some(s.pending),
            TaskState::Active => Some(s.active),
            TaskState::Scheduled => Some(s.scheduled),
            TaskState::Retry => Some(s.retry),
            TaskState::Archived => Some(s.archived),
            TaskState::Completed => Some(s.completed),
            TaskState::Cancelled => Some(s.cancelled),
            _ => None,
        };
        if let (true, Some(n)) = (filter.is_empty(), in_state) {
            return Ok(MatchCount {
                matched: n,
                scanned: n,
                exact: true,
                in_state: n,
                at_most: n,
            });
        }
        let mut count = MatchCount {
            exact: true,
            in_state: in_state.unwrap_or(0),
            ..MatchCount::default()
        };
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .broker
                .list_page(&q, state, filter, cursor.as_deref(), 1000)
                .await?;
            count.matched += page.tasks.len() as u64;
            count.scanned += page.scanned;
            match page.next {
                Some(next) if count.scanned < max_scan => cursor = Some(next),
                Some(_) => {
                    count.exact = false;
                    count.at_most = count
                        .matched
                        .saturating_add(count.in_state.saturating_sub(count.scanned))
                        .max(count.matched);
                    return Ok(count);
                }
                None => {
                    count.at_most = count.matched;
                    return Ok(count);
                }
            }
        }
    }
}

/// The count behind a bulk action's confirmation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MatchCount {
    /// Tasks that pass the filter (all of them when `exact`, else those found so far).
    pub matched: u64,
    /// Tasks read.
    pub scanned: u64,
    /// False when the scan stopped at its bound before the end of the state: then between
    /// `matched` and `at_most` tasks match.
    pub exact: bool,
    /// Tasks in the state when counted (0 when the state has no count).
    pub in_state: u64,
    /// Most tasks that can match: `matched` when exact, else `matched` plus the tasks of the
    /// state not read.
    pub at_most: u64,
}

/// The Redis server a console looks at, from `INFO`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RedisInfo {
    /// `redis_version`.
    pub version: String,
    /// `redis_mode` (standalone, cluster, sentinel).
    pub mode: String,
    /// `used_memory` in bytes.
    pub used_memory: u64,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub maxmemory_policy: String,
    /// `connected_clients`.
    pub connected_clients: u64,
    /// `uptime_in_seconds`.
    pub uptime_seconds: u64,
}

impl RedisInfo {
    /// Reads the fields from the text of `INFO` (lines `name:value`; unknown or missing fields
    /// stay empty or zero: a console shows what the server tells).
    pub fn parse(info: &str) -> Self {
        let mut r = RedisInfo::default();
        for line in info.lines() {
            let Some((k, v)) = line.trim().split_once(':') else {
                continue;
            };
            let n = || v.parse::<u64>().unwrap_or(0);
            match k {
                "redis_version" => r.version = v.to_string(),
                "redis_mode" => r.mode = v.to_string(),
                "used_memory" => r.used_memory = n(),
                "maxmemory" => r.maxmemory = n(),
                "maxmemory_policy" => r.maxmemory_policy = v.to_string(),
                "connected_clients" => r.connected_clients = n(),
                "uptime_in_seconds" => r.uptime_seconds = n(),
                _ => {}
            }
        }
        r
    }
}

impl Admin<RedisBroker> {
    /// The other namespaces of this Redis that hold queues (a bounded `SCAN` for their queue
    /// lists; empty on a cluster): the hint for an operator whose namespace shows no queue.
    pub async fn other_namespaces(&self) -> Vec<String> {
        let ns = self.broker.keyspace().namespace().to_string();
        lookup::namespaces_with_queues(&self.broker, &ns).await
    }

    /// When the oldest task waiting in `name` became ready (unix ms), or None when none waits:
    /// the queue's latency is now minus this. Two reads, however many tasks it holds.
    pub async fn oldest_pending_ms(&self, name: &str) -> Result<Option<i64>, AdminError> {
        Ok(self.broker.oldest_ready_ms(&QueueName::new(name)?).await?)
    }

    /// The deduplication locks held in queue `name` (`EnqueueOptions::dedup`, `unique`), sorted
    /// by key, at most `limit`: key, holder, the holder's state and the time left. A bounded
    /// SCAN in the queue's slot.
    pub async fn dedup_locks(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<Vec<chronos_broker::DedupLock>, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.dedup_locks(&q, limit).await?)
    }

    /// Whether queue `name` keeps an event stream, and then its newest `count` events, oldest
    /// first.
    pub async fn recent_events(
        &self,
        name: &str,
        count: usize,
    ) -> Result<(bool, Vec<chronos_broker::TaskEvent>), AdminError> {
        use chronos_broker::Events as _;
        let q = self.require_queue(name).await?;
        if !self.broker.events_on(&q).await? {
            return Ok((false, Vec::new()));
        }
        Ok((true, self.broker.recent_events(&q, count).await?))
    }

    /// Up to `count` events of queue `name` after the entry id `after`, oldest first.
    pub async fn events_after(
        &self,
        name: &str,
        after: &str,
        count: usize,
    ) -> Result<Vec<chronos_broker::TaskEvent>, AdminError> {
        let q = QueueName::new(name)?;
        Ok(self.broker.events_after(&q, after, count).await?)
    }

    /// Turns queue `name`'s event stream on or off (off deletes its events and groups).
    pub async fn set_events(&self, name: &str, on: bool) -> Result<(), AdminError> {
        use chronos_broker::Events as _;
        let q = self.require_queue(name).await?;
        Ok(self.broker.set_events(&q, on).await?)
    }

    /// Releases deduplication lock `key` of queue `name` (as [`Admin::dedup_locks`] shows it),
    /// only while `holder` holds it when given: the next enqueue with the key creates a task.
    /// True when a lock was released.
    pub async fn release_dedup_lock(
        &self,
        name: &str,
        key: &str,
        holder: Option<&str>,
    ) -> Result<bool, AdminError> {
        Ok(self
            .broker
            .release_dedup_lock(&QueueName::new(name)?, key, holder)
            .await?)
    }

    /// The handler-signalled blocks of queue `name` in force now (`TaskError::rate_limited`):
    /// the queue's own and up to `max_keys` blocked rate keys with their ends, soonest first.
    /// Two reads, no SCAN.
    pub async fn queue_blocks(
        &self,
        name: &str,
        max_keys: usize,
    ) -> Result<chronos_broker::QueueBlocks, AdminError> {
        Ok(self
            .broker
            .queue_blocks(&QueueName::new(name)?, max_keys)
            .await?)
    }

    /// Lifts a handler-signalled block of queue `name` at once: rate key `key`'s, or the
    /// queue's own. Tasks already held back keep their due time. True when a block was lifted.
    /// [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn unblock(&self, name: &str, key: Option<&str>) -> Result<bool, AdminError> {
        let q = self.require_queue(name).await?;
        Ok(self.broker.unblock(&q, key).await?)
    }

    /// Version, memory and clients of the Redis server (of the node answering, on a cluster).
    pub async fn redis_info(&self) -> Result<RedisInfo, AdminError> {
        Ok(RedisInfo::parse(&self.broker.info().await?))
    }
}

/// What an operator action's outcome means to the caller: Ok(true) done, Ok(false) already
/// so, else the error naming queue `name`, task `id` and the action (`verb`).
fn outcome(name: &str, id: &str, verb: &'static str, o: ActionOutcome) -> Result<bool, AdminError> {
    match o {
        ActionOutcome::Done => Ok(true),
        ActionOutcome::Already => Ok(false),
        ActionOutcome::NotFound => Err(AdminError::TaskNotFound {
            queue: name.to_string(),
            id: id.to_string(),
        }),
        ActionOutcome::Refused(state) => Err(AdminError::Refused {
            id: id.to_string(),
            state: state
                .map_or("in an unknown state", |s| s.as_str())
                .to_string(),
            action: verb,
        }),
        ActionOutcome::Corrupt => Err(AdminError::Corrupt { id: id.to_string() }),
    }
}

/// Parses a run time an operator typed for an edit: RFC 3339 with an offset
/// (`2026-12-24T08:00:00Z`, `2026-12-24T09:00:00+01:00`), or a date and time without one
/// (`2026-12-24T08:00`, as an HTML `datetime-local` field sends it), read as UTC.
pub fn parse_run_at(text: &str) -> Result<chronos_broker::Timestamp, AdminError> {
    let text = text.trim();
    let at = text.parse::<jiff::Timestamp>().or_else(|_| {
        text.parse::<jiff::civil::DateTime>()
            .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|z| z.timestamp())
    });
    at.map(|t| chronos_broker::Timestamp::from_unix_ms(t.as_millisecond()))
        .map_err(|_| {
            AdminError::Invalid(format!(
                "bad run time {text:?}: give RFC 3339, like 2026-12-24T08:00:00Z"
            ))
        })
}

/// Parses a delay an operator typed for an edit (`30s`, `5m`, `2h`, `1d`, `0`).
pub fn parse_run_in(text: &str) -> Result<Duration, AdminError> {
    chronos_broker::parse_duration(text.trim()).ok_or_else(|| {
        AdminError::Invalid(format!(
            "bad delay {text:?}: give a number with a unit, like 30s, 5m, 2h or 1d"
        ))
    })
}

/// Parses a state name (`pending`, `active`, `scheduled`, `retry`, `archived`, `completed`).
pub fn parse_state(s: &str) -> Result<TaskState, AdminError> {
    TaskState::parse(s).ok_or_else(|| {
        AdminError::Invalid(format!(
            "unknown state {s:?} (pending, active, scheduled, retry, archived, completed, cancelled)"
        ))
    })
}

/// The action as a verb, for messages.
pub fn verb(action: TaskAction) -> &'static str {
    match action {
        TaskAction::RunNow => "run now",
        TaskAction::Delete => "delete",
        TaskAction::Archive => "archive",
        TaskAction::Cancel => "cancel",
    }
}

#[cfg(test)]
mod edit_input_tests {
    use super::{parse_run_at, parse_run_in};

    #[test]
    fn run_times_parse_with_an_offset_or_as_utc_and_garbage_is_an_error() {
        let z = parse_run_at("2026-12-24T08:00:00Z").expect("rfc3339");
        assert_eq!(z.unix_ms(), 1_798_099_200_000);
        assert_eq!(
            parse_run_at("2026-12-24T09:00:00+01:00").expect("offset"),
            z
        );
        assert_eq!(parse_run_at("2026-12-24T08:00").expect("local"), z);
        assert!(parse_run_at("tomorrow").is_err());
        assert_eq!(parse_run_in("30s").expect("in").as_secs(), 30);
        assert!(parse_run_in("soon").is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronos_broker::DecodeError;

    #[test]
    fn an_undecodable_task_still_has_a_row_with_the_reason() {
        let q = QueueName::new("q").expect("queue");
        let rec = TaskRecord {
            id: "t1".into(),
            state: TaskState::Archived,
            priority: Default::default(),
            snoozes: 0,
            envelope: Err(DecodeError::Empty),
            cancelled: None,
            progress: None,
            attempts: Vec::new(),
            state_time_ms: None,
        };
        let row = TaskRow::from_record(&q, &rec);
        assert_eq!((row.id.as_str(), row.state.as_str()), ("t1", "archived"));
        assert_eq!(row.decode_error.as_deref(), Some("empty task envelope"));
        assert_eq!(row.payload, serde_json::Value::Null);
    }

    #[test]
    fn state_names_parse_or_say_which_exist() {
        assert_eq!(parse_state("retry").expect("state"), TaskState::Retry);
        let err = parse_state("dead").expect_err("unknown").to_string();
        assert!(err.contains("pending, active"), "{err}");
    }
}
