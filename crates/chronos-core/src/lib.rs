//! The core of chronos-rs: what a task is, what a broker can do, and the typed client, with no
//! store driver underneath.
//!
//! Who should depend on this crate directly: implementers and wrappers of a broker (metrics,
//! fault injection, an in-memory store for tests, another store), and libraries that produce
//! tasks without choosing the store. Its dependency tree holds no Redis client: the Redis broker
//! is `chronos-broker`, and applications usually depend on the `chronos` facade, which
//! re-exports both.
//!
//! # Tour
//! * [`TaskArgs`]: a serde type with a stable kind; [`Client::enqueue`] and
//!   [`Client::enqueue_batch`] write it with [`EnqueueOptions`].
//! * [`TaskEnvelope`]: what is stored per task, versioned MessagePack.
//! * Capability traits, one file each: [`Enqueue`], [`Consume`], [`Maintain`], [`Coordinate`],
//!   [`Inspect`], [`Schedules`], [`ManageSchedules`] (schedules stored at run time,
//!   [`ScheduleDef`]), [`Operate`], [`Results`], [`SampleQueues`], [`Flows`], [`Throttle`],
//!   [`Settings`].
//!   [`Broker`] is the first seven, but each runtime asks only for what it uses (the worker's
//!   server names its set `chronos_worker::WorkerBroker`). No trait has default bodies: a
//!   store states every answer, and [`forward!`] writes a wrapper's. `chronos-broker`'s
//!   `RedisBroker` implements them over fred for standalone Redis, Sentinel and Redis Cluster.
//!   Each is also implemented for `&T`, `Arc<T>` and `Box<T>`, so a shared broker needs no
//!   wrapper type; an implementer or wrapper finds every type the methods take or return
//!   ([`Fetched`], [`Reclaimed`], [`DeadTask`], [`NewTask`], [`Trigger`], ...) here.
//! * A delivery's life, as [`Consume`] sees it: [`Consume::fetch`] hands out [`Lease`]s
//!   (each named by its [`LeaseId`]), [`Consume::start`] marks one an attempt, and a
//!   [`Settlement`] ends it: the lease, how it [`End`]s, and the attempt's [`AttemptReport`].
//!   [`Consume::settle`] settles any number at once, or the next fetch carries them, and each
//!   gets its [`Settled`] answer. [`SettleExt`] offers the per-end calls (`complete`, `retry`,
//!   ...) on every `Consume`.
//! * [`Throttle`]: rate limits (starts per period) and concurrency limits of a queue, and
//!   rate limits per rate key ([`EnqueueOptions::rate_key`]), counted in the store for the
//!   whole cluster; the worker calls it only for queues it limits.
//! * [`Settings`] and [`QueueSettings`]: a queue's limits and aging time stored in the store,
//!   overriding each server's configuration field by field; servers re-read them while they run.
//! * [`Client::result`] and [`Client::wait`]: a handler's result, kept with its task while the
//!   task is retained ([`EnqueueOptions::retention`]), read or awaited by the producer; the
//!   [`Results`] capability underneath ([`TaskOutcome`]). A wait is woken by a pub/sub message
//!   the settling script publishes on the task hash's name (only for retained completions and
//!   for dead letters, so a plain task pays nothing); while it waits it also re-reads the task
//!   once a second, which bounds a wake-up lost while the subscriber reconnected.
//! * Idle cost: [`Consume::watch`] waits for many queues with one blocking read (not on Redis
//!   Cluster), which an [`Interrupt`] cuts short; [`Maintain::signals`] pushes [`Signal`]s
//!   (earlier due times, pause changes, a resync after each reconnect) so an idle worker sleeps
//!   instead of polling, and [`Maintain::forward_due_next`] says when the next task is due.
//! * [`SampleQueues`]: queue gauges (counts by state, oldest pending task's age) for metrics,
//!   sampled by one process of the cluster that holds a short lease.
//! * [`Inspect`]: the read side for dashboards and CLIs (queue counts, tasks by state or id,
//!   pausing, live servers, the scheduler leader).
//! * [`Operate`]: operator actions ([`TaskAction`]: run now, delete, archive, cancel) on one
//!   task or on every task of a state matching a [`TaskFilter`] (kind, payload substring), in
//!   bounded chunks; listing by cursor ([`TaskPage`]); queue deletion; per-queue history
//!   ([`HistoryPoint`]); an edit of a waiting task's payload, run time and level
//!   ([`TaskEdit`], [`Operate::edit`]). [`payload_json`] shows a payload as JSON and
//!   [`json_payload`] encodes JSON text as one.
//! * Workflows: [`Chain`] (steps that run one after another, each reading the previous one's
//!   result; [`Client::enqueue_chain`], [`Client::chain_status`]) and [`Group`] (fan-out /
//!   fan-in: members and a callback enqueued exactly once when all finished;
//!   [`Client::enqueue_group`], [`Client::group_results`]). The worker moves them on through
//!   the [`Flows`] capability, only for tasks that carry a [`Flow`]: a plain task pays nothing.
//!   `chronos-broker`'s docs ("Chains and groups") say how the Redis broker keeps them.
//! * [`SCHEDULE_HEADER`] and [`TRIGGER_HEADER`]: the headers a scheduled task carries.
//! * [`TRACEPARENT_HEADER`] and [`TRACESTATE_HEADER`]: with the `opentelemetry` feature,
//!   [`Client::enqueue`] writes the current span's W3C trace context there (unless the caller
//!   set a `traceparent` header), and the worker links its span to it.
//! * [`loopback_host`]: the `Host` check of the HTTP servers that answer without a token (the
//!   console and the ingest), against DNS rebinding.
//! * `testing::Recorder` (feature `testing`): an in-memory [`Enqueue`] that records instead of
//!   writing, so a producer's tests run `Client<Recorder>` without Redis and assert on what was
//!   enqueued.
//!
//! # Errors
//! Every fallible call answers a [`BrokerError`]. Input errors are permanent; a failure of the
//! store underneath is a [`BrokerError::Store`] holding an opaque [`StoreError`] (the driver's
//! own error stays reachable through [`StoreError::downcast_ref`]), transient or not as the
//! broker that made it decided: [`BrokerError::is_transient`] is what retry loops ask.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attempt;
mod bytes_field;
mod capability;
mod chain;
mod client;
mod codec;
mod dead_letter;
mod dedup;
mod delivery;
mod edit;
mod envelope;
mod error;
pub mod event;
mod event_stream;
mod flow;
mod forward;
mod group;
mod group_record;
mod lease_id;
mod loopback;
pub mod names;
mod operate;
mod outcome;
mod payload;
mod priority;
mod progress;
mod queue_settings;
mod record;
mod result;
mod sample;
mod schedule;
mod schedule_def;
mod schema;
mod server_record;
mod settle_ext;
mod settlement;
mod signal;
mod state;
mod step;
mod task;
mod tenant;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod throttle;
mod timing;
mod trace_context;

pub use attempt::{AttemptOutcome, AttemptRow, ATTEMPTS_KEPT};
pub use capability::{
    Broker, Consume, Coordinate, Enqueue, Events, Flows, Inspect, Maintain, ManageSchedules,
    Operate, Results, SampleQueues, Schedules, Settings, Tenants, Throttle,
};
pub use chain::Chain;
pub use client::Client;
pub use codec::{decode_payload, envelope_payload_json, Codec, CODEC_HEADER, PRODUCER_HEADER};
pub use dead_letter::DeadLetter;
pub use dedup::{
    Dedup, DedupLock, DedupMode, EnqueueOutcome, Release, DEFAULT_DEDUP_TTL, LOCK_KEY_PREFIX,
    MAX_DEDUP_KEY_LEN,
};
pub use delivery::{backoff_jitter, QueueBlocks, MAX_BACKOFF, MIN_BACKOFF};
pub use delivery::{Attempt, DeadTask, Fetched, Lease, Reclaimed, StartOutcome};
pub use edit::TaskEdit;
pub use envelope::{TaskEnvelope, ENVELOPE_VERSION};
pub use error::{BrokerError, DecodeError, StoreError};
pub use event::{EventCursor, EventKind, TaskEvent, EVENTS_KEPT};
pub use event_stream::{EventGroupStream, EventStream};
pub use flow::{
    callback_task_id, counts_offset, flow_task_id, ChainInfo, ChainLink, ChainPosition,
    ChainStatus, Flow, GroupCallback, GroupCreated, GroupInfo, GroupLink, GroupState, GroupSummary,
    MemberOutcome, MemberPage, MemberReport, MemberResult, StepSpec, COUNTS_PLACEHOLDER,
    DEFAULT_CHAIN_RETENTION, DEFAULT_GROUP_TTL, SUCCESSOR_MARKER_TTL,
};
pub use group::Group;
pub use group_record::GroupRecord;
pub use lease_id::LeaseId;
pub use loopback::loopback_host;
pub use names::{QueueName, MAX_NAME_LEN};
pub use operate::{
    ActionOutcome, BulkReport, HistoryPoint, HistorySpan, TaskAction, TaskFilter, TaskPage,
};
pub use outcome::{TaskOutcome, OVERSIZED_RESULT};
pub use payload::{json_payload, payload_json};
pub use priority::Priority;
pub use progress::{ProgressUpdate, TaskProgress, MAX_PROGRESS_BYTES, PROGRESS_TTL};
pub use queue_settings::{
    format_duration, parse_duration, QueueSettings, Rate, Setting, SettingsChange,
    MAX_SETTING_PERIOD, MIN_AGING,
};
pub use record::{Cancellation, DedupCounts, LevelStats, QueueStats, TaskRecord};
pub use sample::{QueueSample, TenantSample, SAMPLED_TENANTS};
pub use schedule::{
    FireOutcome, FireRecord, FireState, LeaderInfo, ScheduleEntry, ScheduleSource,
    SchedulerMetrics, Trigger, FIRES_KEPT,
};
pub use schedule_def::{
    DefDedup, DefMisfire, DefRelease, DefSpec, PutOutcome, ScheduleDef, StoredDef,
};
pub use schema::Schemas;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub use schemars;
pub use server_record::{RunningTask, ServerRecord, DEFAULT_ARCHIVE_MAX, RUNNING_LISTED};
pub use settle_ext::SettleExt;
pub use settlement::{
    AttemptReport, BackoffOutcome, BackoffScope, CancelOutcome, Completion, DeadOutcome, End,
    Settled, Settlement, SnoozeOutcome,
};
pub use signal::{Forwarded, Interrupt, InterruptFuture, Signal, Signals};
pub use state::TaskState;
pub use step::chain_successor;
pub use task::{
    decode_args, duration_ms, encode_args, new_task_id, now_ms, unix_ms, Due, EnqueueOptions,
    NewTask, TaskArgs, TaskInfo, Timestamp, DEFAULT_MAX_PAYLOAD, DEFAULT_MAX_RETRY,
    SCHEDULE_HEADER, TRIGGER_HEADER,
};
pub use tenant::{TenantChange, TenantPage, TenantSettings, TenantStats, MAX_TENANT_WEIGHT};
pub use throttle::{Admission, KeyRate, PermitLimit, Permits};
pub use timing::{
    bucket_upper_ms, timing_bucket, TimingDelta, TimingHist, TimingMeasure, TimingMinute,
    MAX_TIMING_MINUTES, TIMINGS_KEPT, TIMING_BUCKETS,
};
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub use trace_context::{current_trace_context, parse_trace_context};
pub use trace_context::{TRACEPARENT_HEADER, TRACESTATE_HEADER};

/// What [`forward!`] names in the code it writes; not an API.
#[doc(hidden)]
pub mod __private {
    pub use tokio::sync::mpsc::Receiver;
}

/// Re-exported so users can build the [`time::OffsetDateTime`] that
/// [`EnqueueOptions::process_at`] and [`EnqueueOptions::deadline`] take without a direct
/// dependency.
pub use time;
