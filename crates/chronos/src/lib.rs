#![doc = include_str!("../README.md")]
//!
//! # Crates
//! This facade re-exports the layers; depend on one alone when that is all you need:
//! `chronos-broker` (producers and broker implementers), `chronos-worker` (the runtime),
//! `chronos-scheduler` (cluster-wide cron and interval schedules).
//!
//! # Operating from code
//! [`Operate`] (implemented by [`RedisBroker`]) is what the `chronos` CLI and the console call:
//! [`Operate::act`] runs a [`TaskAction`] on one task, [`Operate::act_all`] on every task of a
//! state that passes a [`TaskFilter`] (in bounded chunks, reported as a [`BulkReport`]),
//! [`Operate::list_page`] pages a state by cursor ([`TaskPage`]), [`Operate::history`]
//! reads a queue's counts per minute or day ([`HistorySpan`]), and [`Operate::edit`] changes a
//! waiting task's payload, run time and level in one atomic step ([`TaskEdit`]).
//!
//! # Testing
//! [`testing`] runs handlers (alone or through a whole [`Mux`]) in process, records what
//! producer code enqueues, and lists a schedule's next triggers, all without Redis; the
//! [`guide::testing`] page shows the pattern.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(inline)]
pub use chronos_broker::{
    decode_args, encode_args, forward, fred, time, Attempt, AttemptReport, Broker, BrokerError,
    Client, Completion, Connect, Consume, Coordinate, DeadLetter, DeadOutcome, DeadTask,
    DecodeError, End, Enqueue, EnqueueOptions, EvictionCheck, Fetched, Inspect, Keyspace, Lease,
    LeaseId, LevelStats, Maintain, NewTask, Priority, QueueName, QueueStats, Reclaimed,
    RedisBroker, RedisBrokerBuilder, Results, ServerRecord, SettleExt, Settled, Settlement,
    SnoozeOutcome, StartOutcome, StoreError, TaskArgs, TaskEnvelope, TaskInfo, TaskOutcome,
    TaskRecord, TaskState, Timestamp, Trigger, DEFAULT_MAX_RETRY, SCHEDULE_HEADER, TRIGGER_HEADER,
};
// Producer contract v1: a payload's codec, named per task, so producers in other languages
// can send JSON (crates/chronos-protocol/contract/CONTRACT.md).
/// Re-exported so task argument types can `#[derive(chronos::schemars::JsonSchema)]` (with
/// `#[schemars(crate = "chronos::schemars")]`) without a direct dependency.
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub use chronos_broker::schemars;
#[doc(inline)]
pub use chronos_broker::{
    decode_payload, envelope_payload_json, Codec, Schemas, CODEC_HEADER, PRODUCER_HEADER,
};
#[doc(inline)]
pub use chronos_broker::{Admission, KeyRate, PermitLimit, Permits, Throttle};
// Handler-signalled backoff (`TaskError::rate_limited`): what a broker records, and the
// blocks in force (`RedisBroker::queue_blocks`, `chronos queue show`, the console).
#[doc(inline)]
pub use chronos_broker::{
    backoff_jitter, BackoffOutcome, BackoffScope, QueueBlocks, MAX_BACKOFF, MIN_BACKOFF,
};
#[doc(inline)]
pub use chronos_worker::{retry_after_header, InvalidRetryAfter};
// A handler's cancel (`TaskError::cancel`): what a broker answers and what the inspector shows.
#[doc(inline)]
pub use chronos_broker::{CancelOutcome, Cancellation};
// A running task's progress (`Context::progress`): what a producer reads and how it travels.
#[doc(inline)]
pub use chronos_broker::{ProgressUpdate, TaskProgress, MAX_PROGRESS_BYTES, PROGRESS_TTL};
#[doc(inline)]
pub use chronos_worker::ProgressError;
// A task's attempt history and its handlers' own log lines.
#[doc(inline)]
pub use chronos_broker::{AttemptOutcome, AttemptRow, ATTEMPTS_KEPT};
#[doc(inline)]
pub use chronos_worker::{LogCapture, RedactFn, TaskLogs};
// A queue's event stream (opt-in per queue): what it holds and how it is read.
#[doc(inline)]
pub use chronos_broker::{
    event, EventCursor, EventGroupStream, EventKind, EventStream, Events, TaskEvent, EVENTS_KEPT,
};
// A queue's settings stored in Redis (limits that override each server's config at run time,
// the aging time of priority levels): the library side of `chronos queue limits`.
#[doc(inline)]
pub use chronos_broker::{
    Chain, ChainInfo, ChainPosition, ChainStatus, Flow, Flows, Group, GroupCreated, GroupInfo,
    GroupRecord, GroupState, GroupSummary, MemberOutcome, MemberPage, MemberReport, MemberResult,
    DEFAULT_CHAIN_RETENTION, DEFAULT_GROUP_TTL,
};
#[doc(inline)]
pub use chronos_broker::{
    QueueSample, SampleQueues, TenantSample, SAMPLED_TENANTS, TRACEPARENT_HEADER, TRACESTATE_HEADER,
};
#[doc(inline)]
pub use chronos_broker::{QueueSettings, Rate, Setting, Settings, SettingsChange};
// Fair sharing between the tenants of a queue (`EnqueueOptions::tenant`): their stored
// settings and counts, the library side of `chronos tenant ls|set|pause`.
#[doc(inline)]
pub use chronos_broker::{
    TenantChange, TenantPage, TenantSettings, TenantStats, Tenants, MAX_TENANT_WEIGHT,
};
// Operator actions: the library side of `chronos task run|rm|archive|cancel|edit`, `task ls` and
// `queue history|rm`, implemented by `RedisBroker`.
#[doc(inline)]
pub use chronos_broker::{
    json_payload, payload_json, ActionOutcome, BulkReport, HistoryPoint, HistorySpan, Operate,
    TaskAction, TaskEdit, TaskFilter, TaskPage,
};
// Deduplication of enqueues (`EnqueueOptions::dedup`): modes, release points, and what an
// enqueue answers.
#[doc(inline)]
pub use chronos_broker::{
    Dedup, DedupLock, DedupMode, EnqueueOutcome, Release, DEFAULT_DEDUP_TTL, MAX_DEDUP_KEY_LEN,
};
// What a broker wrapper forwards for pushed signals and interruptible blocking reads
// (`Maintain::signals`, `Maintain::forward_due_next`, `Consume::interrupter`).
#[doc(inline)]
pub use chronos_broker::{Forwarded, Interrupt, InterruptFuture, Signal, Signals};
/// The scheduler's metric names.
pub use chronos_scheduler::metrics as scheduler_metrics;
/// Metric names the worker and the scheduler report, and (feature `prometheus`) the
/// Prometheus page: `metrics::serve`, or one line of config, `ServerConfig::metrics_addr`.
pub use chronos_worker::metrics;
#[doc(inline)]
pub use chronos_worker::{
    async_trait, dead_letter_hook, default_retry_delay, Context, DeadLetterEvent, DeadLetterHook,
    ErrorHook, FailureKind, Handler, Middleware, Mux, Next, QueueLimit, RetryDelayFn, Server,
    ServerConfig, ServerHandle, ServerStats, Task, TaskError, TaskFailure, UnrunnablePolicy,
    WorkerBroker, WorkerError, DEFAULT_DEAD_LETTER_HOOK_TIMEOUT, DEFAULT_MAX_SNOOZES,
    DEFAULT_QUEUE_SAMPLE_INTERVAL,
};

#[doc(inline)]
pub use chronos_broker::{
    DefMisfire, DefSpec, FireOutcome, FireRecord, FireState, LeaderInfo, ManageSchedules,
    PutOutcome, ScheduleDef, ScheduleEntry, ScheduleSource, SchedulerMetrics, Schedules, StoredDef,
    FIRES_KEPT,
};
// What the workers count of each attempt (run time, queue wait) and what they publish about
// the tasks they run: read by the console's timing tab and servers page.
#[doc(inline)]
pub use chronos_broker::{
    bucket_upper_ms, timing_bucket, RunningTask, TimingDelta, TimingHist, TimingMeasure,
    TimingMinute, MAX_TIMING_MINUTES, RUNNING_LISTED, TIMINGS_KEPT, TIMING_BUCKETS,
};
#[doc(inline)]
pub use chronos_scheduler::{
    entry_next_after, list_schedules, Change, Clock, MisfirePolicy, NewSchedule, OverlapPolicy,
    RunNow, RuntimeSchedules, RuntimeSpec, ScheduleEdit, ScheduleOptions, Scheduler,
    SchedulerConfig, SchedulerError, SchedulerHandle, SchedulerStats, Spec, SpecError, SystemClock,
};

/// Guides: how to use and operate chronos-rs, one concept per page. The same files are read on
/// GitHub under `crates/chronos/docs/`.
pub mod guide {
    // A guide links to another as `[text][guide-x]` and ends with `[guide-x]: x.md`, which GitHub
    // follows. These definitions come before the file: the first definition of a label wins, so
    // rustdoc links to the guide's module instead of a file docs.rs does not serve.
    macro_rules! guide_links {
        () => {
            concat!(
                "[guide-enqueue]: crate::guide::enqueue\n",
                "[guide-handlers]: crate::guide::handlers\n",
                "[guide-progress]: crate::guide::progress\n",
                "[guide-scheduling]: crate::guide::scheduling\n",
                "[guide-runtime-schedules]: crate::guide::runtime_schedules\n",
                "[guide-priorities]: crate::guide::priorities\n",
                "[guide-dedup]: crate::guide::dedup\n",
                "[guide-tenants]: crate::guide::tenants\n",
                "[guide-limits]: crate::guide::limits\n",
                "[guide-workflows]: crate::guide::workflows\n",
                "[guide-events]: crate::guide::events\n",
                "[guide-producers]: crate::guide::producers\n",
                "[guide-testing]: crate::guide::testing\n",
                "[guide-operating]: crate::guide::operating\n",
                "[guide-console]: crate::guide::console\n",
                "[guide-observability]: crate::guide::observability\n",
                "[guide-redis]: crate::guide::redis\n",
                "[guide-deploy]: crate::guide::deploy\n",
                "[guide-wrapping]: crate::guide::wrapping\n",
                "[guide-reliability]: crate::guide::reliability\n",
                "[guide-benchmarks]: crate::guide::benchmarks\n",
                "[guide-layout]: crate::guide::layout\n",
            )
        };
    }

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/enqueue.md")]
    pub mod enqueue {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/handlers.md")]
    pub mod handlers {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/progress.md")]
    pub mod progress {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/scheduling.md")]
    pub mod scheduling {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/runtime-schedules.md")]
    pub mod runtime_schedules {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/priorities.md")]
    pub mod priorities {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/dedup.md")]
    pub mod dedup {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/tenants.md")]
    pub mod tenants {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/limits.md")]
    pub mod limits {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/workflows.md")]
    pub mod workflows {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/events.md")]
    pub mod events {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/producers.md")]
    pub mod producers {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/testing.md")]
    pub mod testing {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/operating.md")]
    pub mod operating {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/console.md")]
    pub mod console {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/observability.md")]
    pub mod observability {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/redis.md")]
    pub mod redis {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/deploy.md")]
    pub mod deploy {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/wrapping.md")]
    pub mod wrapping {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/RELIABILITY.md")]
    pub mod reliability {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/benchmarks.md")]
    pub mod benchmarks {}

    #[doc = guide_links!()]
    #[doc = include_str!("../docs/layout.md")]
    pub mod layout {}
}

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

/// The repository README's examples, compiled as doctests so they cannot drift from the API.
/// (Outside `cfg(doctest)` nothing reads the file, so packaging this crate does not need it.)
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

/// The names most programs need: `use chronos::prelude::*;`. [`Inspect`] is here so that the
/// inspector's methods (`queue_stats`, `task`, `list_tasks`, `set_paused`, `servers`,
/// `scheduler_leader`) can be called on a [`RedisBroker`] without a further import.
pub mod prelude {
    pub use crate::{
        Chain, Client, Connect, Context, EnqueueOptions, Group, Inspect, Mux, Priority, QueueLimit,
        RedisBroker, ScheduleOptions, Scheduler, SchedulerConfig, Server, ServerConfig, Task,
        TaskArgs, TaskError,
    };
}
