//! The worker runtime of chronos-rs: typed handlers, the [`Mux`] that routes tasks to them, and
//! the [`Server`] that runs them against a broker.
//!
//! Who should depend on this crate directly: services that execute tasks and want only the
//! runtime; most applications use the `chronos` facade, which re-exports it.
//!
//! # Tour
//! * [`Handler`]: any `async fn(Context, Task<T>) -> Result<R, TaskError>` with a serde `R`
//!   (`()` for none); [`Mux::handle`] registers one per [`chronos_core::TaskArgs`] kind. The
//!   result goes with the acknowledgement and is kept while the task is retained, for
//!   `Client::result` and `Client::wait`. (A handler that never returns `Ok` names its `R`:
//!   `Err::<(), _>(...)`.)
//! * [`TaskError`]: `?` turns any `std::error::Error + Send + Sync`, `anyhow::Error`,
//!   `Box<dyn Error + Send + Sync>` or `String` into a retryable failure;
//!   [`TaskError::skip_retry`] dead-letters at once, [`TaskError::retry_after`] picks the delay.
//! * [`Context`]: what the handler and every [`Middleware`] (code around each handler call:
//!   tracing, metrics, auth) know of the attempt, including the task's headers and, for a task
//!   the scheduler fired, [`Context::schedule_id`] and [`Context::trigger_time`].
//! * [`Server`] with [`ServerConfig`] (a builder method per field): weighted or strict-priority
//!   queues, bounded concurrency, timeouts and deadlines, a replaceable retry delay, a sync hook
//!   for errors and an async one for dead letters ([`DeadLetterHook`], awaited with a timeout).
//! * [`QueueLimit`] through [`ServerConfig::limit`]: cluster-wide rate limits (task starts per
//!   period), concurrency limits (tasks at once) and per-key rate limits of a queue, counted in
//!   Redis; a task held back waits without spending an attempt and without a busy loop. The
//!   configuration is the default: the queue's settings stored in Redis
//!   ([`chronos_core::QueueSettings`]) override it field by field, and running servers apply a
//!   change within about two seconds.
//! * [`WorkerBroker`]: what the server needs of its broker (the one place that lists it), so a
//!   wrapper (metrics, fault injection) implements those capabilities, not the whole broker.
//! * Workflows: a chain step reads the previous step's result with [`Context::parent_result`]
//!   and its place with [`Context::chain`]; a group's callback reads the counts with
//!   [`Context::group`] (and the members' results with `Client::group_results`).
//! * What a running task tells: [`Context::progress`] and [`Context::percent`] (coalesced,
//!   written with the lease refresh, read by `Client::progress`), and its own log lines,
//!   [`Context::log`] and the `tracing` events [`LogCapture`] takes from its handler, kept with
//!   the attempt's row of the task's history ([`ServerConfig::task_logs`]: caps, redaction).
//! * [`testing`]: run a handler, or a task through a whole [`Mux`], in process without Redis,
//!   with a [`testing::TestContext`] the test builds (attempt, headers, cancellation).
//!
//! # What the server guarantees
//! * At least once: a task is acknowledged only after its handler returned `Ok`. A task whose
//!   worker dies is re-delivered once its lease has been idle for `recover_min_idle`. If its
//!   start was recorded (a few milliseconds after its handler began), that counts as a failed
//!   attempt, so a task that keeps killing its workers ends in the dead letters; a delivery not
//!   recorded as started goes back without one, three times per attempt, and the fourth such
//!   loss counts as that attempt. A task can therefore run more than once: handlers must be idempotent.
//! * A running task's lease is refreshed every `heartbeat_interval`, so a live worker keeps a
//!   long task. A worker that stalls past `recover_min_idle` (frozen, cut off from Redis) loses
//!   it to the recoverer: the task runs again elsewhere, and the stalled handler is cancelled
//!   and its result dropped.
//! * A panic, a timeout or a passed deadline fails only that attempt. A payload that does not
//!   decode, or a kind with no handler, is dead-lettered with the reason (or retried up to max
//!   retry, see [`UnrunnablePolicy`]); it never blocks the queue or loops forever.
//! * Chains and groups move on before the task that moves them is settled: a chain step's
//!   successor is enqueued, and a group member is counted, before the step or member is
//!   acknowledged or dead-lettered, each by one idempotent script. A worker that dies in between
//!   leaves the task to be delivered again, whose second run enqueues no second successor and
//!   counts no second time; a group's callback is enqueued exactly once. Plain tasks make no
//!   such call. A member the recoverer dead-letters (its workers were lost too often) is counted
//!   as failed from the queue's reclaim outbox, which the dead-lettering script writes in the
//!   same step: a recoverer that dies before counting it leaves it to the next pass of any
//!   server's recoverer.
//! * [`ServerHandle::shutdown`] loses nothing: unstarted tasks go back without spending an
//!   attempt, running ones get `shutdown_timeout`, then are cancelled and retried.
//!
//! # What an idle server costs
//! What a server's polling costs Redis does not grow with its queues where the broker can avoid
//! it (Redis, standalone or Sentinel): each maintenance loop visits one queue per period in turn,
//! and is told at once (a pub/sub push, or its own work) about anything that cannot wait.
//! * Fetching: a queue with nothing ready parks, and one blocking read (XREADGROUP over every
//!   parked queue's stream, on one connection, for up to 5 s) waits for all of them; what it
//!   reads goes into its queue's buffer, served by weight or strict priority as before. A queue
//!   that runs dry, a pause or resume, and shutdown cut the read short (CLIENT UNBLOCK ...
//!   TIMEOUT, which takes nothing, so nothing is stranded). On Redis Cluster, where streams of
//!   different slots cannot share a read, and for limited queues ([`QueueLimit`]), each queue
//!   blocks on its own connection for up to 1 s.
//! * Forwarding delayed and retry tasks: the forwarder sleeps until the earliest due time of its
//!   queues, woken early by a pub/sub push from the script that adds a task with an earlier due
//!   time; a queue holding delayed tasks is forwarded at least every `safety_interval` (10 s),
//!   one with none only in its turn (one such queue per `safety_interval`), and every queue
//!   after the subscriber reconnects. Without pushes (a broker that has none) it polls every
//!   queue every `forward_interval` (500 ms).
//! * Pausing: pause and resume push a message; the paused set is read at start, after a
//!   reconnect and every `safety_interval` (every 500 ms without pushes).
//! * Stored settings (limits): a change pushes a message naming its queue, which is read again;
//!   every queue is read after a reconnect, and one queue per second in turn (every queue every
//!   second without pushes).
//! * Recovery: every `recover_interval` (5 s) one read of the live servers' ids, and one queue's
//!   pending list (XPENDING; the reclaim script runs only when something is idle) and reclaim
//!   outbox (HSCAN), in turn. Every queue is read at the start and `recover_min_idle` later,
//!   and each period from the moment a server's record expires (it stopped heartbeating:
//!   crashed, frozen, cut off) until its deliveries are idle long enough to take, so a lost
//!   server's tasks are re-run as before; deliveries stranded on a live server (a blocking read
//!   whose reply was lost) wait for their queue's turn.
//! * The janitor, every `janitor_interval` (60 s), sweeps the queues this server took tasks of
//!   since their last sweep and one more in turn. The heartbeat writes one server record.
//!
//! `cargo xtask bench idle` prints the calls per second for 1, 10 and 100 queues.
//!
//! # What a task costs the worker
//! The worker's own CPU per plain no-op task, beside what the same task costs Redis (the
//! broker's "Per-task budget"), is printed by `cargo xtask bench e2e` for each concurrency
//! (user + system time of the process while it drains, per task). On a 2-core VM, 2026-12-04,
//! a quiet moment: about 45 µs per task at concurrency 1, 15 µs at 16 and 8 µs at 64 (Redis: 47,
//! 13 and 7 µs); on a busier moment 79 / 22 / 13 / 11 µs at 1 / 16 / 64 / 256. Per task, the
//! path is:
//! * the fetch: one script call per read of up to 128 deliveries, whose reply is decoded into
//!   leases (the envelope's MessagePack included), or at concurrency 1 the read that also acks
//!   the last task (`Consume::fetch` carrying its settlement), so one round trip per task;
//! * the start mark: none for a handler that ends within 2 ms, else one call per batch;
//! * the run: a spawned tokio task per delivery, a cancellation token and its child (the
//!   handler's signal), a `tracing` span, the log capture scope, a progress cell, and the
//!   handler itself;
//! * the settlement: one `Settlement` per attempt; an ack carried by the fetcher's next read, or
//!   batched by the settler with others of its queue.
//!
//! A profile of the release build draining at concurrency 64 (perf, DWARF call stacks) spends
//! the worker's time roughly as: the allocator 15-17 % (a lease, an envelope, the span and the
//! context per task), spawning and finishing the task 10 %, cancellation tokens 5-7 %, decoding
//! the claim reply and the envelope 6 %, the tracing span and the log scope 6 %, the rest in
//! the Redis client's encoding and decoding, wake-ups between the fetcher, dispatcher and
//! executor, and the kernel's socket calls. At concurrency 1 the per-task cost is mostly
//! wake-ups and system calls (one round trip and a few cross-thread hand-offs per task).
//!
//! Every task runs inside a `tracing` span named `task` with its id, queue, kind and attempt
//! (with the `opentelemetry` feature, exported as `process <queue>`, a consumer span with the
//! messaging attributes, linked to the producer's trace context).
//!
//! # Metrics
//! The server counts tasks, failures, run times, recoveries and dead letters through the
//! `metrics` facade, and can sample queue depths cluster-wide; the `prometheus` feature adds
//! a page to scrape with one line of config, `ServerConfig::metrics_addr`. The names are
//! listed in [`metrics`].
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
mod broker;
mod canceller;
mod carry;
mod config;
mod dispatcher;
mod ended;
mod error;
mod executor;
mod fetcher;
mod flow;
mod forwarder;
mod heartbeat;
mod janitor;
mod limit;
mod limiter;
mod logs;
mod loops;
mod mark;
pub mod metrics;
mod mux;
mod outcome;
mod park;
mod progress;
mod progress_writer;
mod recoverer;
mod retry_after;
mod runtime;
mod sampler;
mod server;
mod settings_poller;
mod settler;
mod slot;
mod starter;
mod task;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod timing;
#[cfg(feature = "opentelemetry")]
mod trace;
mod watcher;

pub use broker::WorkerBroker;
pub use config::{
    dead_letter_hook, default_retry_delay, DeadLetterEvent, DeadLetterHook, ErrorHook,
    RetryDelayFn, ServerConfig, TaskFailure, UnrunnablePolicy, DEFAULT_DEAD_LETTER_HOOK_TIMEOUT,
    DEFAULT_MAX_SNOOZES, DEFAULT_QUEUE_SAMPLE_INTERVAL,
};
pub use error::{ProgressError, WorkerError};
pub use limit::QueueLimit;
pub use logs::{LogCapture, RedactFn, TaskLogs};
pub use mux::{Handler, Middleware, Mux, Next};
pub use outcome::{FailureKind, TaskError};
pub use retry_after::{retry_after_header, InvalidRetryAfter};
pub use server::{Server, ServerHandle, ServerStats};
pub use task::{Context, Task};

/// Re-exported for implementing [`Middleware`] and [`Handler`] by hand (`#[async_trait]` on the
/// impl) without a direct dependency.
pub use async_trait::async_trait;
