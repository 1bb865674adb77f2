#![doc = include_str!("../README.md")]
//!
//! # Crates
//! This facade re-exports the layers; depend on one alone when that is all you need:
//! `chronos-broker` (producers and broker implementers), `chronos-worker` (the runtime),
//! `chronos-scheduler` (cluster-wide cron and interval schedules).
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

#[doc(inline)]
pub use chronos_broker::{
    decode_args, encode_args, fred, Broker, BrokerError, Client, Completion, Consume, Coordinate,
    DeadLetter, DeadOutcome, DecodeError, Enqueue, EnqueueOptions, Inspect, Keyspace, Lease,
    LeaseId, Maintain, QueueName, QueueStats, RedisBroker, RedisBrokerBuilder, ServerRecord,
    TaskArgs, TaskEnvelope, TaskInfo, TaskRecord, TaskState, DEFAULT_MAX_RETRY,
};
#[doc(inline)]
pub use chronos_worker::{
    default_retry_delay, Context, DeadLetterEvent, FailureKind, Handler, Middleware, Mux, Next,
    Server, ServerConfig, ServerHandle, ServerStats, Task, TaskError, TaskFailure,
    UnrunnablePolicy, WorkerError,
};

#[doc(inline)]
pub use chronos_broker::{
    FireOutcome, FireState, LeaderInfo, ScheduleEntry, SchedulerMetrics, Schedules,
};
#[doc(inline)]
pub use chronos_scheduler::{
    list_schedules, MisfirePolicy, OverlapPolicy, ScheduleOptions, Scheduler, SchedulerConfig,
    SchedulerError, SchedulerHandle, SchedulerStats, Spec, SpecError,
};

/// The names most programs need: `use chronos::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Client, Context, EnqueueOptions, Mux, RedisBroker, ScheduleOptions, Scheduler,
        SchedulerConfig, Server, ServerConfig, Task, TaskArgs, TaskError,
    };
}
