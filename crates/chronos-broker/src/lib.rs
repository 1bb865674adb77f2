//! The Redis broker of chronos-rs: the key layout, the stream and sorted-set primitives and the
//! calls of the Lua scripts (whose text and shared names live in `chronos-protocol`),
//! implementing the capability traits of `chronos-core` ([`RedisBroker`]) for standalone Redis,
//! Sentinel and Redis Cluster.
//!
//! Who should depend on this crate directly: producer-only services over Redis (they need
//! [`Client`] and nothing else) and tools that read the key layout. Everything of
//! `chronos-core` is re-exported here, so `chronos_broker::TaskArgs` and
//! `chronos_core::TaskArgs` are the same item; the types and traits are described there.
//!
//! # Guarantees
//! * Every state transition of a task is one Lua script: a crash between two Redis calls never
//!   half-moves a task. Every script declares every key it touches (so Redis Cluster routes,
//!   migrates and refuses it as a whole), reads and checks before its first write, and never
//!   raises an error after it: a corrupt record fails only its own task, which is dead-lettered
//!   with the reason.
//! * Every script is idempotent, because the Redis client re-sends commands that were in flight
//!   when a connection dropped, and a re-sent call answers what its first run did: a fetch
//!   that found work at once returns the same deliveries again (the consumer's fetch receipt;
//!   a blocking wait leaves a lost reply's deliveries to the recoverer, unspent), a retry or dead-letter
//!   reports the settlement it already made (the hash's `d`, or a discard marker), an ack finds
//!   nothing left to do, and an enqueue answers from its call's receipt without writing again,
//!   even after a fast worker already ran and deleted the task (for the idempotency window, 15 s
//!   by default, [`RedisBrokerBuilder::idempotency_window`]).
//! * A delivery is an attempt only once [`Consume::start`] marked it, right before its handler
//!   runs: deliveries fetched but never started (a lost fetch reply, a crash with a prefetched
//!   batch) are re-delivered without spending an attempt, while a worker lost mid-task costs one
//!   (so a task that keeps killing its workers ends in the dead letters).
//! * Due times, retry times, retention and archive ages are decided by the Redis server's clock
//!   (`TIME` inside the scripts), never by a producer's or worker's, so skewed hosts agree.
//! * Enqueue, fetch and ack cost O(1) Redis work per task and batch: one round trip per batch
//!   of enqueues (script calls of 500 plain tasks or 125 others per queue, pipelined), one
//!   script per fetched batch, one per batch of starts, one per batch of acks. See "Per-task
//!   budget" below.
//! * A delivery ends by a [`Settlement`]: [`Consume::settle`] sends each [`End`] to its script
//!   (consume/complete, retry, snooze, backoff, dead, cancel and requeue.lua), the completions
//!   of a queue in one call per level and per 1000, its requeues in one call per level, and all
//!   the calls of one `settle` at once, so the client pipelines them. A [`Consume::fetch`] that
//!   carries settlements acks the bare ones in its claim call ("complete and fetch" below).
//! * Bad input gets a typed [`BrokerError`] and writes nothing.
//!
//! # Plain tasks
//! Most tasks ask for nothing beyond being run: no explicit id, no unique key, no retention, no
//! rate key, no delay, no replication wait, no workflow. Such a *plain* task is stored as one
//! stream entry holding its envelope and nothing else, and its id is that entry's id
//! (`<ms>-<seq>`, e.g. `1764633600000-17`; an explicit id of that shape is refused, so the two
//! kinds never meet). It has no hash while it is pending or active:
//! * the inspector reads it from its entry (pending), and from the group's pending entries list
//!   (active: [`Consume::start`] sets the delivery count of a started plain task's entry to
//!   1 000 000, so "started" needs no record either);
//! * its max retry and dead-letter policy travel in the entry (`x`, `dl`) only when they are not
//!   the defaults (25, archive);
//! * the first transition that takes it out of its entry and keeps it (a retry, a dead letter, a
//!   reclaim, a requeue, a completion with a retention, an operator's archive, prioritize or
//!   edit) first writes the hash every other task has, in the same script, and the task goes
//!   on as any other; an operator's delete, cancel or run-now reads its entry and needs no
//!   hash.
//!
//! Everything a task can do, a plain task can; it only pays for a record once it needs one.
//! Workers of releases before plain tasks drop a plain task's entry as foreign: upgrade the
//! workers first, or keep producers on [`RedisBrokerBuilder::plain_tasks`]`(false)` meanwhile.
//! [`LeaseId::is_plain`] tells a plain task's delivery (task id equal to entry id).
//!
//! # Per-task budget
//! What a plain task costs Redis, in commands (as `INFO commandstats` counts them: a script call
//! is its `EVALSHA` plus every command it runs), on the path of a busy queue:
//!
//! | step | commands | why each is there |
//! |---|---|---|
//! | enqueue, one task | `EVALSHA` push.lua: `GET`, `XADD`, `SET` (4) | `XADD` is the task; `GET`/`SET` are the call's receipt, so a call re-sent after a lost reply answers the same id instead of enqueueing twice |
//! | enqueue, a batch | per call of 500 tasks: `EVALSHA`, `GET`, `SET`; per task: `XADD` (~1.01 per task) | one `XADD` per task; the receipt is per call and holds only the first id (the entries get consecutive ids) |
//! | fetch | per call of up to 128 deliveries: `EVALSHA` claim.lua: `GET`, `HKEYS`, `XREADGROUP`, `SET` (5) | `XREADGROUP` hands each entry to one consumer; the fetch receipt makes a re-sent fetch return the same deliveries |
//! | fetch, blocks | none while no handler ever blocked the queue (claim.lua reads the level hash's fields anyway, and a `blocked` field there says to look); after a block, one `EXISTS` per call (and a `GET` while a key exists) until both block keys are gone; a blocking read that returned entries adds one `EVALSHA` hold.lua with an `EXISTS` | a queue blocked by a handler (`TaskError::rate_limited`) is not read at all; the hold catches a block set while the read waited, and deliveries of blocked rate keys (a blocking read cannot check keys) |
//! | start | none for a handler that ends within 2 ms; else per batch: `EVALSHA` start.lua: `XPENDING`, `XCLAIM` (3) | marks the deliveries started, so a lost worker is charged an attempt (see Guarantees) |
//! | complete | per call of up to 1000: `EVALSHA` complete.lua: `TIME`, `XACK`, `XDEL`, `INCRBY`, `HINCRBY`, `INCRBY` (7, plus a `PEXPIRE` on the first count of a minute and of a day) | `XACK`+`XDEL` are the completion; the counters feed `processed` and the per-minute history |
//! | complete and fetch | per call (a worker's fetcher carrying the plain completions that ended since its last read: [`Consume::fetch`] with them as its `carry`): claim.lua's `EVALSHA`, `GET`, `HKEYS`, `XREADGROUP`, `SET` plus `XACK`, `XDEL` (7), and per [`COUNT_BATCH`] completions, or when a call takes nothing, `TIME`, `INCRBY`, `HINCRBY`, `INCRBY` | one round trip per task at concurrency 1 instead of an ack and a fetch; the counts wait in the fetch receipt (`<owed>\|<nonce>:...`), so `processed` lags a busy consumer by fewer than [`COUNT_BATCH`] tasks and is exact once its queue drains |
//!
//! A task with a record adds, per task: at enqueue an `EXISTS` and an `HSET` (plus the unique
//! lock's `SET NX`; a deduplicated enqueue whose key is held writes nothing there, then pays a
//! pipelined read of the holder's state for a duplicate, or an edit.lua call for a replace or
//! debounce: `cargo xtask bench outcomes` prints each), at start an `HMGET` and an `HSET`, at completion an `HMGET` and its share of
//! a `DEL` (or, retained, an `HSET`, `HDEL`, `PEXPIRE`, `ZADD` and a `PUBLISH`), which is what a
//! plain task does not pay. Per-task work that could be done once per batch is: the receipt,
//! the clock, the counters and the history are per call. Measured figures are printed by
//! `cargo xtask bench` (Redis CPU and commands per task, beside BullMQ's); on a 2-core VM on
//! 2026-12-02: 2.9 µs and 1.01 commands per batch-enqueued plain task, 9.0 µs and 0.36 commands
//! per task drained at concurrency 64, against BullMQ's 28.3 µs / 9 and 52.0 µs / 23 in the same
//! run.
//!
//! # Chains and groups
//! * A chain step's successor is enqueued by the worker that ran the step, after the step
//!   succeeded and before it is acknowledged: a crash in between re-runs the step (at least
//!   once, as any task), never loses the chain. The successor's enqueue is one script that sets
//!   a marker (`fl:<id>`, 7 days) beside it, so a step that runs twice enqueues its successor
//!   once, even when the successor already completed and was deleted. The last step records
//!   the chain's result (`ch:<chain id>`) the same way. A dead-lettered step stops the chain.
//!   Cost: one script call per step (besides its ack), and the steps' records are retained
//!   ([`DEFAULT_CHAIN_RETENTION`], 24 h, unless a step sets its own retention).
//! * A group's record (`g:<gid>`) and its set of counted members with their outcomes
//!   (`gm:<gid>`) live in the callback's queue slot. A member's outcome is reported by one
//!   script there, before the member's ack or dead letter; the report is idempotent by member,
//!   and the one that completes the count enqueues the callback in the same script, guarded by
//!   the record's `fired` flag: exactly once. Cost: one script call per member, O(1) each;
//!   100k members cost 100k small hash fields (results only with `collect_results`), expiring
//!   with the group's TTL (7 days by default, renewed when the callback fires).
//! * A member dead-lettered by the recoverer (its workers were lost) is recorded in the queue's
//!   reclaim outbox (`reclaimed`) by the same script that dead-letters it; the recoverer
//!   reports it to its group and only then removes the entry ([`Maintain::reclaimed_dead`],
//!   [`Maintain::ack_reclaimed`]), on every pass, including entries an earlier pass left (a
//!   recoverer that died in between, a lost reply, a report that failed).
//! * What is not covered: a member whose envelope does not decode cannot name its group; a
//!   chain step or member an operator deletes never reports.
//!
//! # Redis must not evict
//! An evicted task hash or stream entry is a task lost without a trace, and an evicted lock or
//! dedup key breaks exactly-once firing. [`RedisBrokerBuilder::connect`] therefore refuses a
//! Redis whose `maxmemory-policy` is not `noeviction` (see [`EvictionCheck`] to warn instead).
//!
//! # Key layout
//! `<ns>` is the namespace (default `chronos`), `<q>` the queue name. Every key of a queue carries
//! the hash tag `{<q>}`, so each script touches one cluster slot. Deleting a queue
//! ([`Operate::delete_queue`]) removes every key of it but the scheduler's (`sched:*`), whatever
//! the "removed by" column says, so a queue created again under the name starts empty.
//!
//! | key | type | contents | written by | removed by |
//! |---|---|---|---|---|
//! | `<ns>:queues` | set | every queue name enqueued to | first enqueue or consume of a queue per process | never (one short member per queue) |
//! | `<ns>:paused` | set | paused queue names | `Inspect::set_paused` | `set_paused(false)` |
//! | `<ns>:signal` | pub/sub channel (no key) | worker signals ([`Maintain::signals`]): `d <ms> <queue>` when a scheduled or retry set gets an earlier due time (lib.lua `wake`, from enqueue, retry, admit, chain_next), `p` when a queue is paused or resumed | those scripts; `Inspect::set_paused` | nothing is stored |
//! | `<ns>:{<q>}:stream` | stream | one entry `i=<task id> e=<envelope>` per ready or running delivery (the envelope lives here while the task is in the stream); a plain task's entry is `e=<envelope>` alone (plus `x`/`dl` where its max retry or dead-letter policy is not the default), and its id is the entry's id (see [Plain tasks](#plain-tasks)); group `workers` holds the running ones in its PEL, where a started plain task's delivery count is set to 1 000 000 | enqueue, forward, reclaim, requeue (each moves the envelope into the entry) | XDEL on every settle (complete, retry, dead-letter, requeue, reclaim; those that keep the task move the envelope into its hash first), so it holds only live deliveries |
//! | `<ns>:{<q>}:t:<id>` | hash (none for a plain task while it is pending or active) | `s` state, `m` entry id of the current delivery, `d` entry id of the last settled delivery, `r` failed attempts, `x` max retry, `err`/`f` last error and time, `c` completion time, `u` unique key, `dl` discard flag, `fp` producer fingerprint (explicit ids only), `p` priority level (only when not the default 5), `k` entry id of the delivery that took a start of its rate key (admit.lua); `ur` `1` when its deduplication lock is let go on start, `df` first enqueue (ms) of a debounced task's run; `cr`/`ca` the reason and time (ms) of a task its handler cancelled; `at` its attempt history (one JSON row per line per attempt that ended, the newest 25; written by the settling scripts); `res` the handler's result (completed and retained only); `e` envelope only while the task is out of the stream (scheduled, retry, archived, completed, cancelled), so a pending or active task's hash holds small fields and stays a compact listpack until it has an attempt history (a row is longer than a listpack value) | enqueue; every transition | complete (or its retention TTL), discard, janitor for archived and retained tasks |
//! | `<ns>:{<q>}:scheduled` | zset | delayed task ids by run-at ms | enqueue with process-in/at, an operator's edit of the run time | forward when due |
//! | `<ns>:{<q>}:retry` | zset | failed task ids by retry-at ms | retry (re-scored by an operator's edit) | forward when due |
//! | `<ns>:{<q>}:archived` | zset | dead-lettered task ids by died-at ms | dead-letter, reclaim | janitor (age and count caps) |
//! | `<ns>:{<q>}:cancelled` | zset | ids of tasks their handler cancelled (`TaskError::cancel`), by cancelled-at ms | cancel (cancel.lua) | janitor (the archive's age and count caps, counted on their own), run now, delete |
//! | `<ns>:{<q>}:completed` | zset | retained task ids by expiry ms | complete with retention | janitor once expired |
//! | `<ns>:{<q>}:u:<sha256>`, `<ns>:{<q>}:u:k:<key>` | string | id of the task holding the unique or deduplication lock (of a payload hash, or of a caller's key) | unique or deduplicated enqueue | complete, dead-letter, cancel, delete, start (release on start), an operator's release (dedup_release.lua, `chronos dedup rm`), or only its TTL (throttle, release at expiry); listed by `RedisBroker::dedup_locks` (SCAN in the slot) |
//! | `<ns>:{<q>}:deduplicated` | hash | lifetime counters of deduplicated enqueues: `reject`, `throttle`, `replace`, `debounce` | enqueue (a duplicate), edit (a replace or debounce that reached its holder) | a queue delete (four integers) |
//! | `<ns>:{<q>}:processed`, `<ns>:{<q>}:failed` | string | lifetime counters | complete; retry and dead-letter | a queue delete (one integer each) |
//! | `<ns>:{<q>}:events` | stream | the queue's event stream while it is on: one entry per transition of a task (type, task id, kind, and what it says), capped near [`EVENTS_KEPT`] | the scripts of the transitions, while the stream exists (`chronos events on` makes it) | `chronos events off`, a queue delete; trimmed by every write |
//! | `<ns>:{<q>}:d:<id>` | string | discard marker of a dead-lettered task that was dropped: `<entry id>\|` (its worker's dead-letter call), `~<entry id>` (the recoverer's reclaim, which a worker's late call must not take for its own) | dead-letter, reclaim | its TTL (the idempotency window) |
//! | `<ns>:{<q>}:reclaimed` | hash | reclaim outbox: task id -> `1` (discarded) or `0` (archived), then the envelope, of every task the recoverer dead-lettered and has not yet reported to its group | reclaim (same script as the dead letter; TTL 7 days set again on each write) | the recoverer after reporting (`Maintain::ack_reclaimed`, at once for non-members), or its TTL |
//! | `<ns>:{<q>}:e:<token>` | string | receipt of one enqueue call: one code per task of the call | enqueue | its TTL (the idempotency window) |
//! | `<ns>:{<q>}:c:<consumer>` | string | fetch receipt `[<owed>\|]<nonce>:<entry ids>` of the consumer's last fetch that delivered anything, with the completions it acked whose counts are not added yet | claim | its TTL (60 s) |
//! | `<ns>:{<q>}:pg:<id>` | string | task `<id>`'s last progress, `<ms>:<json>` (store clock) | `Maintain::keep_alive` (heartbeat.lua: only while the reporter holds the delivery) | its TTL ([`PROGRESS_TTL`], 24 h after the last report) |
//! | `<ns>:{<q>}:fl:<id>` | string | marker that chain step `<id>` was enqueued by its predecessor | `Flows::enqueue_successor` (script `chain_next`) | its TTL (7 days, [`SUCCESSOR_MARKER_TTL`]) |
//! | `<ns>:{<q>}:ch:<chain id>` | string | end of a chain whose last step ran in `<q>`: `1` + result, or `0` | `Flows::finish_chain`, before the last step's ack | its TTL (the last step's retention, 24 h by default) |
//! | `<ns>:{<cbq>}:g:<gid>` | hash | group record: `n` members, `ok`/`ko` counts, `fired`, `cb` callback envelope, `off` offset of its counts text, `cbid`, `x`, `dl`, `col`, `ttl`, `fp` | `Flows::open_group` (script `group_open`), `group_report` | its TTL (the group's, 7 days by default: set at creation, set again when the callback fires) |
//! | `<ns>:{<cbq>}:gm:<gid>` | hash | counted members: field = member index, value = `o` + result (when collecting) or `f` + error | `group_report` | its TTL (follows the record's) |
//! | `<ns>:{<q>}:sched:*`, `<ns>:{scheduler}:*` | various | the scheduler's fence, fire state, dedup keys, metrics and registry (see the `chronos-scheduler` crate docs) | the scheduler | TTLs and the leader's pruning |
//! | `<ns>:{scheduler}:runtime` | hash | runtime schedule id -> [`ScheduleDef`] (MessagePack) | [`ManageSchedules::put_schedule_def`] (`sched_put.lua`, compare-and-set) | the same, on remove (one field per schedule an operator added) |
//! | `<ns>:{scheduler}:runtime:rev` | string | revision of the runtime schedules, bumped by every change that wrote | `sched_put.lua` | never (one integer) |
//! | `<ns>:{<q>}:sched:r:<schedule>:<request>` | string | marker of one run-now request: `<call token>:<outcome>` (the call that ran it, and `1` enqueued or `-4` unique lock held) | [`ManageSchedules::run_schedule`] (`sched_run.lua`) | its TTL (1 day) |
//! | `<ns>:{<q>}:stream:p<n>` | stream | the deliveries of tasks of priority level `n` (0-9 but 5, the default, whose tasks use `stream`), entries as in `stream`; same group | enqueue, forward, run-now, prioritize or edit of a task of that level (its record's `p`) | XDEL on every settle, as `stream`; deleted with the queue |
//! | `<ns>:{<q>}:stream:levels` | hash | level -> id of the task-less entry the level's first task left on `stream` (it wakes readers blocked there; counts leave it out while it is there); `blocked` once a handler blocked the queue or a rate key | the first task of a level; backoff.lua (`blocked`) | deleted with the queue; claim.lua removes `blocked` when no block key is left |
//! | `<ns>:{<q>}:cancel` | zset | stream entry ids of active deliveries an operator asked to cancel, by request time | `Operate::act` (cancel) | trimmed by the next cancel; expires a minute after the last |
//! | `<ns>:{<q>}:h:<p\|f>:m:<day>` | hash | processed (`p`) or failed (`f`) count per unix minute (field) of one UTC day | complete (`p`); retry, dead-letter, reclaim (`f`), in the same script | TTL 49 h |
//! | `<ns>:{<q>}:h:<p\|f>:d:<day>` | string | processed or failed count of one UTC day | as above | TTL 91 days |
//! | `<ns>:{<q>}:timing:<hour>` | hash | run times and queue waits of one unix hour: field `<minute of the hour>:<r\|w>:<bucket>:<kind>`, value a count ([`TimingHist`] buckets) | [`Maintain::record_timings`] (the worker's heartbeat, one pipeline per queue) | TTL 25 h |
//! | `<ns>:{<q>}:lim` | hash | rate state of the queue: `t` when the next start is due (unix ms, Redis' clock; GCRA) | permit.lua (grant), permit_return.lua (give back) | its TTL (one period after `t`) |
//! | `<ns>:{<q>}:lim:active` | zset | concurrency tokens of tasks workers hold, by expiry ms | permit.lua (grant), permit_keep.lua (heartbeat) | permit_return.lua (task ended), expired members pruned by each grant, the key's expiry (set to its latest token's expiry by each grant and heartbeat) |
//! | `<ns>:{<q>}:lim:g:<consumer>` | string | permit receipt `<nonce>:<granted>:<returned>` of the consumer's last grant | permit.lua, permit_return.lua | its TTL (60 s) |
//! | `<ns>:{<q>}:kr:<rate key>` | string | per-key rate window `<window start ms>:<starts>:<deferred>` (starts taken in the window; deliveries deferred during it) | admit.lua | its TTL (the window's end) |
//! | `<ns>:{<q>}:block` | string | the queue's handler-signalled block: its end (unix ms) | backoff.lua (`TaskError::rate_limited(..).queue_wide()`; only ever to a later end) | its expiry (PXAT the end), an operator's unblock |
//! | `<ns>:{<q>}:h:t:d:<day>` | string | times handlers blocked the queue or one of its keys during a UTC day | backoff.lua | TTL 2 days |
//! | `<ns>:{<q>}:block:keys` | zset | blocked rate keys of the queue, scored by their block's end (unix ms) | backoff.lua (`TaskError::rate_limited` on a keyed task; ZADD of a later end only) | ended members trimmed by each backoff.lua call; the key expires at its latest end; an operator's unblock |
//! | `<ns>:{<q>}:settings` | hash | stored settings that override each server's configuration field by field: `rate` and `per_key_rate` (`<n>/<period ms>` or `none`), `burst` (`<n>`), `concurrency` (`<n>` or `none`), `aging_ms` (`<ms>`: how long a task may wait behind more urgent levels, read by claim.lua), `retry_level` (`0`..`9`: the level retries go to when more urgent than their own, read by forward.lua); an absent field means the server's config | [`Settings::change_queue_settings`] (`settings_put.lua`) | the same, when its last field is unset (the hash is then empty and gone) |
//! | `<ns>:{<q>}:t:<id>` (pub/sub channel) | channel | a message when the task completes retained or is dead-lettered, for [`Client::wait`] | complete, dead-letter, reclaim | (channels hold nothing) |
//! | `<ns>:servers`, `<ns>:server:<id>` | zset, string | worker server records | the worker runtime | TTL and its janitor |
//! | `<ns>:sampler` | string | id of the process that samples queue gauges for metrics | [`SampleQueues::sampler_lease`] | its TTL (three sampling periods) |
//!
//! # Example
//! ```no_run
//! use chronos_broker::{Client, Connect, EnqueueOptions, TaskArgs};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! struct EmailArgs { to: String }
//! impl TaskArgs for EmailArgs { const KIND: &'static str = "email:send"; }
//!
//! # async fn run() -> Result<(), chronos_broker::BrokerError> {
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let info = client
//!     .enqueue(&EmailArgs { to: "a@example.com".into() },
//!              EnqueueOptions::new().queue("mail").process_in(Duration::from_secs(60)))
//!     .await?;
//! println!("enqueued {} as {:?}", info.id, info.state);
//! # Ok(()) }
//! ```
mod connect;
mod keys;
mod redis;

pub use chronos_core::*;
pub use chronos_protocol::COUNT_BATCH;
pub use connect::Connect;
pub use keys::{HistoryCounter, Keyspace, QueueKeys, GROUP};
pub use redis::RedisReader;
pub use redis::{
    EvictionCheck, RedisBroker, RedisBrokerBuilder, DEFAULT_IDEMPOTENCY_WINDOW, MAX_BLOCK,
};

/// The typed producer API over Redis: [`chronos_core::Client`] with [`RedisBroker`] as the
/// default broker; [`Connect`] adds `Client::connect(url)`.
pub type Client<B = RedisBroker> = chronos_core::Client<B>;

/// Re-exported so users can name fred types (config, errors) without a direct dependency.
pub use fred;
