//! The cluster-wide scheduler of chronos-rs: interval and cron schedules whose every trigger is
//! enqueued exactly once across all instances, through leader crashes, pauses and hand-offs.
//!
//! Who should depend on this crate directly: services that schedule but do not execute; most
//! applications use the `chronos` facade. The scheduler only enqueues: a worker `Server` must
//! run somewhere to execute the tasks.
//!
//! # How it works
//! * **One leader.** Every instance runs a [`Scheduler`]; they elect a leader with a Redis lock
//!   (`SET NX PX`, default TTL 5 s) that the leader renews every half TTL by compare-and-renew.
//!   Each acquisition takes a new *fencing epoch* from a counter. On shutdown or
//!   [`SchedulerHandle::resign_leadership`] (which returns once the lock is released) the leader
//!   releases the lock by compare-and-delete and publishes a message that wakes the followers at
//!   once; a crashed leader's lock expires within one TTL, and followers poll at half the TTL in
//!   case the message was missed. A leader stops firing on its own once it cannot prove it
//!   still holds the lock.
//! * **Exactly once per trigger.** Trigger times are deterministic: intervals are aligned to the
//!   unix epoch, cron triggers come from the expression in its zone. Each trigger is fired by one
//!   script that (1) refuses a caller whose epoch is older than the queue's fence (a new leader
//!   raises the fence of its queues when it takes over, so a paused, deposed leader that wakes up
//!   is refused), (2) refuses a trigger at or before the schedule's last fired mark or whose dedup
//!   key `<schedule>:<trigger unix seconds>` exists, and (3) sets the dedup key, moves the last
//!   fired mark forward, enqueues the task (id `<schedule>:<trigger unix seconds>`) and counts it
//!   in the cluster-wide counters, all atomically. Two leaders in split-brain therefore cannot
//!   both enqueue one trigger, and a fire call re-sent after a lost reply is answered with its
//!   first run's outcomes without enqueueing or counting anything again.
//! * **Schedule ids.** An id names a schedule's fire state across the cluster and across deploys.
//!   Give one with [`ScheduleOptions::id`]; otherwise it is `<kind>:<hash of kind, spec, zone and
//!   queue>`. The payload is not part of it: a rolling deploy that changes only the payload keeps
//!   the id, so old and new instances share the fire state and neither re-fires what the other
//!   fired. (Versions before this one hashed the payload too, so upgrading starts derived ids
//!   afresh, from their first registration.)
//! * **Bounded catch-up, fenced by the first registration.** Every instance marks, at start, when
//!   each of its schedule ids was first registered anywhere in the cluster (a per-id mark written
//!   once, at Redis' clock). A new leader fires the triggers that fell due after the *later* of
//!   the schedule's last fired trigger and that first registration, as its [`MisfirePolicy`]
//!   allows (default: at most 10, from the last hour): a day-long outage of a per-minute job
//!   never fires 1440 runs, a new id never fires triggers from before it existed, and a
//!   last-fired mark of an earlier life of the id (one without a registration mark, say written
//!   by an older version) never reaches back before the id's registration. A schedule
//!   registered while no leader ran is still caught up from its registration on.
//! * **Backlogs while leading.** When more than one trigger of a schedule is due at once (the
//!   wall clock jumped forward, the host was suspended, the leader stalled for a whole period),
//!   the misfire policy decides over all of them, as in a catch-up, instead of firing the whole
//!   backlog. The scheduler reads the wall clock through [`SchedulerConfig::clock`].
//! * **Overlap and enqueue options.** [`OverlapPolicy::Forbid`] skips a trigger while the
//!   schedule's previous task is still pending, scheduled, retrying or running. A schedule's
//!   enqueue options (unique lock, dead-letter discard, deadline, headers, retries, timeout,
//!   retention) apply to every task it fires; a trigger whose unique lock is held is skipped.
//!   `EnqueueOptions::durable` is refused at registration ([`SchedulerError::DurableSchedule`]):
//!   the fire path sends no `WAIT` (see "Redis failover" below).
//! * **Every live schedule fires, whoever leads.** The leader fires the schedules registered in
//!   code by any instance seen alive within three publish intervals, not only its own: each
//!   instance publishes its schedules' definitions (task kind and payload, enqueue options,
//!   spec, misfire and overlap policies) beside its registry entries, and the leader reads
//!   those of the ids it does not register itself at the start of each term and then once per
//!   [`SchedulerConfig::publish_interval`]. So in a rolling deploy that adds a schedule, the
//!   new instances' schedule fires while an old instance still leads, under the same ids,
//!   dedup keys and fire state, caught up from its first registration as its misfire policy
//!   allows; when the new version takes over, it goes on from the last fired trigger. An id
//!   registered with different definitions by two versions fires the one written last (give
//!   a changed schedule a new id). A schedule whose registering instances all went quiet is
//!   dropped with them (the registry lists it stale). Not carried, so fired only by leaders
//!   that register it: a schedule whose options name a rate key or an absolute deadline, and
//!   schedules of instances of versions before this one, which publish no definitions.
//! * **Registry.** Every instance publishes its schedules (id, spec, zone, queue, kind, next
//!   run) once, rewrites an entry only when it changes, and otherwise marks itself alive with
//!   one small command per publish interval. [`list_schedules`] reads the entries back with the
//!   last fired trigger and task, marking those whose instances all went quiet as stale. The
//!   leader prunes instances not seen for `remove_after` and, with them, every id no instance
//!   registers any more: its registry entry, its definition and its fire state (last fired,
//!   last task, first registration), so a later registration of that id starts afresh.
//!
//! # Runtime schedules
//! Besides those registered in code, schedules can be added, updated, paused, resumed, removed
//! and run at once while the cluster runs, through [`RuntimeSchedules`] (validated
//! [`NewSchedule`]s; the `chronos schedule` CLI uses the same front). They are stored in Redis
//! (`{scheduler}:runtime`, with a revision counter); each change is one compare-and-set script,
//! idempotent when re-sent.
//! * **Seen by every instance.** Each instance reads the revision every
//!   [`SchedulerConfig::runtime_poll`] (one `GET`, default 500 ms) and reloads the set when it
//!   moved, so a newly elected leader already holds it. The leader applies a change within
//!   about a second of it being stored: one poll interval plus the reads.
//! * **Same exactly-once rules.** The leader fires runtime schedules through the same fenced,
//!   deduplicated fire script as code schedules: task ids `<schedule>:<trigger unix seconds>`,
//!   dedup keys, last-fired marks, misfire policies and catch-up after a failover. A
//!   schedule added (or resumed) is caught up from that moment (its stored activation time,
//!   by the caller's clock), never from before.
//! * **Changes.** A paused or removed schedule fires nothing once the leader has seen the change;
//!   a resumed one fires from its resume on (the pause is not caught up); an update of the spec
//!   takes effect from the next trigger; a removed one's fire state is forgotten, so the id can
//!   start afresh. Run-now ([`RuntimeSchedules::run_now`]) enqueues one task
//!   `<schedule>:run:<request>` carrying the schedule headers, once per request id (for a day),
//!   counted as fired, without touching the regular triggers.
//! * **Two sources, one id each.** An id that a running instance registers in code is refused
//!   ([`SchedulerError::CodeSchedule`]); a code registration that later takes a runtime id wins
//!   on the instances that register it. The registry lists both, with
//!   [`chronos_core::ScheduleEntry::source`] and `paused`.
//!
//! # Redis failover
//! Exactly once holds across leader crashes, pauses and hand-overs, and across a Redis restart
//! that keeps its data. A failover of the Redis primary is weaker: Redis replicates
//! asynchronously, and a fire acknowledged by the old primary but not yet replicated is lost
//! with it, task, dedup key and last-fired mark together, so the trigger can be fired again
//! after the failover; if the old primary's task already ran, it runs twice. The failover
//! tests measure 0 to 1 doubled triggers per failover and none missed
//! (`crates/chronos/docs/RELIABILITY.md`). The scheduler sends no `WAIT` for replicas, which
//! is why a schedule asking for `durable` enqueues is refused rather than fired without it.
//!
//! # Redis keys
//! Cluster-wide, tagged `{scheduler}`: `leader` (the lock), `epoch`, `leader-info` (id, epoch,
//! since), `registry` (id -> entry), `registry:live` (instance -> last seen),
//! `registry:i:<instance>` (the ids an instance registers), `registry:def` (code schedule id ->
//! definition, read by a leader that does not register it), `runtime` (id -> stored runtime
//! schedule) and `runtime:rev` (its revision). Per queue, tagged with the queue:
//! `sched:fence`, `sched:last`, `sched:task`, `sched:reg` (first registrations), `sched:fires`
//! (each schedule's last fires, for the console),
//! `sched:metrics`, `sched:d:<schedule>:<trigger secs>` (dedup keys, expiring) and
//! `sched:c:<call>` (a fire call's outcomes, expiring), `sched:r:<schedule>:<request>` (a
//! run-now request, expiring after a day). Every script declares every key it
//! touches, so each runs in one slot of a Redis Cluster.
//!
//! # Metrics
//! Through the `metrics` facade (free until the application installs a recorder): triggers
//! fired, missed and suppressed per queue, the lateness of each fired trigger (a histogram), a
//! leader gauge, and a gauge of the schedules the leader fires that only other instances
//! register (non-zero while a rolling deploy is under way); [`metrics`] lists the names.
//!
//! # Time zones and DST
//! Cron expressions run in an explicit IANA zone (default UTC). What a daylight-saving change
//! does depends on whether the expression names one fixed time of day, that is a single value
//! in each of its second (if given), minute and hour fields (`30 2 * * *`, `@daily`):
//! * **Fixed time of day.** A time skipped by a spring-forward transition fires once, at the
//!   first valid instant after the gap (`30 2 * * *` fires at 03:00 on a day that jumps from
//!   02:00 to 03:00). A time repeated by a fall-back transition fires once, on its first pass.
//! * **Any other expression** (a wildcard, step, list or range in the second, minute or hour
//!   field: `*/30 * * * *`, `0 */2 * * *`, `30 * * * *`, `30 2,14 * * *`, `0 1-3 * * *`):
//!   a slot inside the spring-forward gap is skipped, with no replacement run after it
//!   (`0 */2 * * *` in Europe/Berlin fires at 00:00 and then 04:00 that night), and a slot in the
//!   repeated hour fires on both passes, since those are distinct instants (`30 2,14 * * *`
//!   fires at 02:30 twice on the fall-back day).
//!
//! `tests/dst.rs` pins each case in Europe/Berlin and America/New_York.
//! [`Spec::upcoming`] lists a spec's next triggers from any instant, exactly those the scheduler
//! fires, so a test or a preview sees these rules without waiting.
//!
//! # Example
//! ```no_run
//! use chronos_broker::{RedisBroker, TaskArgs};
//! use chronos_scheduler::{ScheduleOptions, Scheduler, SchedulerConfig};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Cleanup { older_than_days: u32 }
//! impl TaskArgs for Cleanup { const KIND: &'static str = "cleanup"; }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = RedisBroker::connect("redis://127.0.0.1:6379").await?;
//! let mut scheduler = Scheduler::new(broker, SchedulerConfig::default());
//! scheduler.register_interval(Duration::from_secs(30), &Cleanup { older_than_days: 7 }, ScheduleOptions::new())?;
//! scheduler.register_cron("0 3 * * *", &Cleanup { older_than_days: 30 },
//!                         ScheduleOptions::new().zone("Europe/Berlin"))?;
//! let handle = scheduler.start().await?;
//! // ... run a worker Server too, somewhere ...
//! handle.resign_leadership().await?; // returns once another instance can take over
//! handle.shutdown().await;
//! # Ok(()) }
//! ```

mod adopter;
mod batch;
mod catchup;
mod config;
mod def;
mod election;
mod error;
mod firing;
mod id;
mod leader;
pub mod metrics;
mod misfire;
mod options;
mod registry;
mod runtime;
mod schedule;
mod scheduler;
mod shared;
mod spec;
mod stats;
mod watcher;

pub use config::{Clock, SchedulerConfig, SystemClock};
pub use def::{entry_next_after, next_run};
pub use error::SchedulerError;
pub use misfire::MisfirePolicy;
pub use options::{OverlapPolicy, ScheduleOptions};
pub use registry::list_schedules;
pub use runtime::{Change, NewSchedule, RunNow, RuntimeSchedules, RuntimeSpec, ScheduleEdit};
pub use scheduler::{Scheduler, SchedulerHandle};
pub use spec::{Spec, SpecError};
pub use stats::SchedulerStats;
