use chronos_core::names::check_name;

pub(crate) use chronos_core::names::{check_rate_key, check_task_id, is_plain_id};

use crate::{BrokerError, QueueName};

/// Name of the one consumer group every queue stream has.
pub use chronos_protocol::GROUP;
pub(crate) use chronos_protocol::{TENANT_LANE, TENANT_WAKE};

/// The key layout of one namespace. Every key of a queue carries the queue's hash tag, so that
/// every script touches a single cluster slot. See the crate docs for the full table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyspace {
    ns: String,
}

impl Keyspace {
    /// Validates `namespace` with the same rules as a queue name.
    pub fn new(namespace: impl Into<String>) -> Result<Self, BrokerError> {
        let ns = namespace.into();
        match check_name(&ns) {
            Ok(()) => Ok(Self { ns }),
            Err(reason) => Err(BrokerError::InvalidNamespace { name: ns, reason }),
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// `<ns>:queues`: set of every queue name ever enqueued to.
    pub fn queues(&self) -> String {
        format!("{}:queues", self.ns)
    }

    /// `<ns>:schemas`: hash of task kind to the JSON Schema of its arguments
    /// (`RedisBroker::publish_schemas`).
    pub fn schemas(&self) -> String {
        format!("{}:schemas", self.ns)
    }

    /// `<ns>:paused`: set of paused queue names.
    pub fn paused(&self) -> String {
        format!("{}:paused", self.ns)
    }

    /// Pub/sub channel (not a key) of the namespace's worker signals: `d <ms> <queue>` when a
    /// queue's scheduled or retry set gets an earlier due time (lib.lua `wake` derives the same
    /// name from the set's key), `p` when a queue is paused or resumed.
    pub fn signal(&self) -> String {
        format!("{}:signal", self.ns)
    }

    /// `<ns>:servers`: sorted set of worker server ids scored by the time their record expires.
    pub fn servers(&self) -> String {
        format!("{}:servers", self.ns)
    }

    /// `<ns>:server:<id>`: a worker server's record, with a TTL.
    pub fn server(&self, id: &str) -> String {
        format!("{}:server:{id}", self.ns)
    }

    /// A key outside any queue, for coordination (`<ns>:{<tag>}:<name>`): locks, registries.
    pub fn tagged(&self, tag: &str, name: &str) -> String {
        format!("{}:{{{tag}}}:{name}", self.ns)
    }

    /// The keys of one queue.
    pub fn queue(&self, queue: &QueueName) -> QueueKeys {
        QueueKeys {
            queue: queue.clone(),
            prefix: format!("{}:{{{}}}:", self.ns, queue.as_str()),
        }
    }
}

impl Default for Keyspace {
    fn default() -> Self {
        Self {
            ns: "chronos".into(),
        }
    }
}

/// The keys of one queue, all under the prefix `<ns>:{<queue>}:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    queue: QueueName,
    prefix: String,
}

impl QueueKeys {
    /// The queue these keys belong to.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// The common prefix, `<ns>:{<queue>}:`; scripts derive the per-task keys from it.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The stream of ready and running tasks.
    pub fn stream(&self) -> String {
        format!("{}stream", self.prefix)
    }

    /// The stream of the tasks of priority level `level`: [`QueueKeys::stream`] itself for the
    /// default level, else `<prefix>stream:p<level>` (made, with its consumer group, by the
    /// first task of that level; see [`QueueKeys::levels`]).
    /// Two pseudo-levels name the tenant streams (see [`QueueKeys::tenants`]): 10 the tenant
    /// stream `<prefix>stream:t`, 11 its wake stream `<prefix>stream:tw`.
    pub fn lane(&self, level: Option<u8>) -> String {
        match level {
            Some(TENANT_LANE) => format!("{}stream:t", self.prefix),
            Some(TENANT_WAKE) => format!("{}stream:tw", self.prefix),
            Some(l) if l != chronos_core::Priority::NORMAL.get() => {
                format!("{}stream:p{l}", self.prefix)
            }
            _ => self.stream(),
        }
    }

    /// The hash of the priority levels other than the default that have a stream in this
    /// queue (`<prefix>stream:levels`, level -> the id of the empty entry the level's first
    /// task left on the main stream to wake blocked readers): what a fetch reads to know where
    /// to look; also `aged_at` (claim.lua's next aging scan) and `blocked` (a handler blocked
    /// the queue or a rate key: claim.lua then reads [`QueueKeys::queue_block`] and
    /// [`QueueKeys::key_blocks`]). Bounded by the number of levels; deleted with the queue.
    pub fn levels(&self) -> String {
        format!("{}stream:levels", self.prefix)
    }

    /// The lanes block a script that may touch a level's stream declares: the streams of levels
    /// 0 to 9 (the default level's is [`QueueKeys::stream`]), then [`QueueKeys::levels`].
    pub fn lanes(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..chronos_core::Priority::LEVELS)
            .map(|l| self.lane(Some(l)))
            .collect();
        out.push(self.levels());
        out
    }

    /// The tenants block a script that may touch tenant tasks declares (lib.lua, "Tenants"):
    /// the tenant stream (every tenant task's delivery entry, parked in the pending list of a
    /// consumer of its own until the task's turn), its wake stream (an entry when the rotation
    /// gets its first tenant, for blocked readers), the waiting set (members
    /// `<tenant>\0<order>\0<entry id>`, all of score 0, so one tenant's are a lexical range in
    /// its order), the rotation (tenant -> its turn), the held set (`<tenant>\0<task id>` ->
    /// when started: what the tenant's cap counts), the settings hash (tenant, or `''` for
    /// the default -> `<weight> <concurrency> <backlog> <paused>`, `-` where unset) and the
    /// turn hash (tenant -> its turn, for every tenant with work; `''` -> the current turn) and
    /// the load set (tenant -> minus its waiting and held counts, so the busiest read first
    /// without counting every tenant; member `\0` says the counts are complete).
    pub fn tenants(&self) -> Vec<String> {
        vec![
            self.lane(Some(TENANT_LANE)),
            self.lane(Some(TENANT_WAKE)),
            self.tenant_waiting(),
            self.tenant_rotation(),
            self.tenant_held(),
            self.tenant_settings(),
            self.tenant_turns(),
            self.tenant_load(),
        ]
    }

    /// The tenants' waiting set (`<prefix>tn:w`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_waiting(&self) -> String {
        format!("{}tn:w", self.prefix)
    }

    /// The tenants' rotation (`<prefix>tn:r`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_rotation(&self) -> String {
        format!("{}tn:r", self.prefix)
    }

    /// The tenants' held set (`<prefix>tn:h`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_held(&self) -> String {
        format!("{}tn:h", self.prefix)
    }

    /// The tenants' settings hash (`<prefix>tn:c`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_settings(&self) -> String {
        format!("{}tn:c", self.prefix)
    }

    /// The tenants' turn hash (`<prefix>tn:p`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_turns(&self) -> String {
        format!("{}tn:p", self.prefix)
    }

    /// The tenants' load set (`<prefix>tn:l`), in the [`QueueKeys::tenants`] block.
    pub fn tenant_load(&self) -> String {
        format!("{}tn:l", self.prefix)
    }

    /// Every key that holds the queue itself rather than one task, day or consumer: its stream,
    /// its scheduled, retry, archived and completed sets, its processed and failed counters, its
    /// cancel requests, its lanes ([`QueueKeys::lanes`]), its stored settings, its tenants block
    /// ([`QueueKeys::tenants`]) and its cancelled set. The one list of them: a queue delete
    /// declares them in this order (admin_queue_delete.lua's KEYS), and the torture run's books
    /// read them from here. Not in it: the event stream, the deduplication counters and the
    /// keys made per task, per day, per consumer or per rate key, which a delete finds by SCAN.
    pub fn state_keys(&self) -> Vec<String> {
        let mut out = vec![
            self.stream(),
            self.scheduled(),
            self.retry(),
            self.archived(),
            self.completed(),
            self.processed(),
            self.failed(),
            self.cancel(),
        ];
        out.extend(self.lanes());
        out.push(self.settings());
        out.extend(self.tenants());
        out.push(self.cancelled());
        out
    }

    /// The hash of one task.
    pub fn task(&self, id: &str) -> String {
        format!("{}t:{id}", self.prefix)
    }

    /// The last progress task `id` reported: `<at ms>:<json>`, expiring
    /// [`chronos_core::PROGRESS_TTL`] after the last report.
    pub fn progress(&self, id: &str) -> String {
        format!("{}pg:{id}", self.prefix)
    }

    /// The queue's event stream (`<prefix>events`): on while it exists, capped near
    /// [`chronos_core::EVENTS_KEPT`] entries. The scripts that settle a transition take it as
    /// their last key and write to it only while it exists (see `lib.lua`: `EVENTS`).
    pub fn events(&self) -> String {
        format!("{}{}", self.prefix, chronos_protocol::EVENTS_NAME)
    }

    /// The sorted set of delayed tasks, scored by run-at (unix ms).
    pub fn scheduled(&self) -> String {
        format!("{}scheduled", self.prefix)
    }

    /// The sorted set of tasks waiting for a retry, scored by retry-at (unix ms).
    pub fn retry(&self) -> String {
        format!("{}retry", self.prefix)
    }

    /// The sorted set of dead-lettered tasks, scored by died-at (unix ms).
    pub fn archived(&self) -> String {
        format!("{}archived", self.prefix)
    }

    /// The sorted set of completed tasks kept for retention, scored by expiry (unix ms).
    pub fn completed(&self) -> String {
        format!("{}completed", self.prefix)
    }

    /// Sorted set of tasks their handler cancelled, scored by when (unix ms).
    pub fn cancelled(&self) -> String {
        format!("{}cancelled", self.prefix)
    }

    /// The unique lock for one content hash.
    pub fn unique(&self, hash: &str) -> String {
        format!("{}u:{hash}", self.prefix)
    }

    /// The discard marker of one task: set for the idempotency window when a dead-lettered task
    /// is dropped, so a re-sent dead-letter call answers "discarded" instead of "stale".
    pub fn done(&self, id: &str) -> String {
        format!("{}d:{id}", self.prefix)
    }

    /// The reclaim outbox: tasks the recoverer dead-lettered (task id -> `1` discarded or `0`
    /// archived, then the envelope) whose flow reports are not yet acknowledged.
    pub fn reclaimed(&self) -> String {
        format!("{}reclaimed", self.prefix)
    }

    /// The receipt of one enqueue call (named by a token random per call): the first run's
    /// codes, so a client's re-send of the call answers the same and writes nothing.
    pub fn enqueue_receipt(&self, token: &str) -> String {
        format!("{}e:{token}", self.prefix)
    }

    /// The fetch receipt of one consumer: the nonce of its last fetch call that delivered
    /// anything and the entry ids it delivered, so a re-sent call returns them again instead of
    /// reading new ones; and how many completions its reads acked that the queue's counters
    /// do not count yet (fewer than [`crate::COUNT_BATCH`]).
    pub fn receipt(&self, consumer: &str) -> String {
        format!("{}c:{consumer}", self.prefix)
    }

    /// The marker that chain step `id` (in this queue) was enqueued by its predecessor: set for
    /// [`crate::SUCCESSOR_MARKER_TTL`] so a predecessor that runs again enqueues it no second
    /// time, even after the step completed and was deleted.
    pub fn successor(&self, id: &str) -> String {
        format!("{}fl:{id}", self.prefix)
    }

    /// The end record of chain `chain_id`, whose last step ran in this queue: its result.
    pub fn chain_end(&self, chain_id: &str) -> String {
        format!("{}ch:{chain_id}", self.prefix)
    }

    /// The record of group `group_id`, whose callback runs in this queue.
    pub fn group(&self, group_id: &str) -> String {
        format!("{}g:{group_id}", self.prefix)
    }

    /// The members of group `group_id` already counted, with their outcomes.
    pub fn group_members(&self, group_id: &str) -> String {
        format!("{}gm:{group_id}", self.prefix)
    }

    /// The counter of tasks completed since the queue was created.
    pub fn processed(&self) -> String {
        format!("{}processed", self.prefix)
    }

    /// The counter of failed attempts since the queue was created.
    pub fn failed(&self) -> String {
        format!("{}failed", self.prefix)
    }

    /// The counters of deduplicated enqueues since the queue was created (a hash: `reject`,
    /// `throttle`, `replace`, `debounce`).
    pub fn deduplicated(&self) -> String {
        format!("{}deduplicated", self.prefix)
    }

    /// The sorted set of cancel requests: stream entry ids of active deliveries an operator
    /// asked to cancel, scored by when (unix ms); trimmed and expired after a minute.
    pub fn cancel(&self) -> String {
        format!("{}cancel", self.prefix)
    }

    /// The hash of one UTC day's history counts per minute (field: unix minute), for
    /// `counter` [`HistoryCounter::Processed`] or [`HistoryCounter::Failed`]; `day` is the unix
    /// day (ms / 86,400,000). Expires two days after its last write.
    pub fn history_minutes(&self, counter: HistoryCounter, day: i64) -> String {
        format!("{}h:{}:m:{day}", self.prefix, counter.code())
    }

    /// The history count of one UTC day (`day` as in [`QueueKeys::history_minutes`]). Expires 91
    /// days after its last write.
    pub fn history_day(&self, counter: HistoryCounter, day: i64) -> String {
        format!("{}h:{}:d:{day}", self.prefix, counter.code())
    }

    /// The hash of one hour's run times and queue waits (`hour`: unix ms / 3,600,000): field
    /// `<minute of the hour>:<r|w>:<bucket>:<kind>` ([`chronos_core::timing_bucket`]), value a
    /// count. Written by the workers (`Maintain::record_timings`); expires
    /// [`chronos_core::TIMINGS_KEPT`] after its last write.
    pub fn timing(&self, hour: i64) -> String {
        format!("{}timing:{hour}", self.prefix)
    }

    /// The queue rate limiter's state: a hash with `t`, when the next start is due (unix ms
    /// by Redis' clock, a generic cell rate algorithm). Expires a period after that.
    pub fn rate(&self) -> String {
        format!("{}lim", self.prefix)
    }

    /// The queue's concurrency permits: a sorted set of permit tokens (one per task a worker
    /// holds) scored by expiry (unix ms). Expires when no permit is left alive.
    pub fn active(&self) -> String {
        format!("{}lim:active", self.prefix)
    }

    /// The permit receipt of one consumer: its last grant (`<nonce>:<granted>:<returned>`),
    /// so a re-sent acquire or give-back answers without counting twice. Expires after 60 s.
    pub fn permit_receipt(&self, consumer: &str) -> String {
        format!("{}lim:g:{consumer}", self.prefix)
    }

    /// The per-key rate window of one rate key: `<window start ms>:<starts>:<deferred>` (starts
    /// taken in the window, and deliveries deferred during it, which spreads them over the
    /// windows ahead), expiring at the window's end.
    pub fn rate_key(&self, key: &str) -> String {
        format!("{}kr:{key}", self.prefix)
    }

    /// The queue's handler-signalled block (`TaskError::rate_limited(..).queue_wide()`): a
    /// string, the block's end (unix ms), expiring then (PXAT). Written by backoff.lua (only
    /// ever to a later end), read by claim.lua and admit.lua, removed by its expiry or an
    /// operator's unblock.
    pub fn queue_block(&self) -> String {
        format!("{}block", self.prefix)
    }

    /// The queue's blocked rate keys (`TaskError::rate_limited` on a keyed task): a sorted set
    /// of rate key -> block end (unix ms). Written by backoff.lua (ZADD GT: only ever to a later
    /// end), which also trims ended members and sets the key to expire at its latest end; read
    /// by admit.lua, claim.lua (whether any exists), the inspector and the console.
    pub fn key_blocks(&self) -> String {
        format!("{}block:keys", self.prefix)
    }

    /// How many times handlers blocked the queue or one of its keys during UTC day `day` (days
    /// since the epoch): a string counter, incremented by backoff.lua, expiring two days after
    /// its first count.
    pub fn throttled_day(&self, day: i64) -> String {
        format!("{}h:t:d:{day}", self.prefix)
    }

    /// True when `key` is one of this queue's keys (it carries the queue's prefix, so it lives
    /// in the queue's cluster slot). Key names read back from Redis are checked with this before
    /// a script declares them.
    pub fn owns(&self, key: &str) -> bool {
        key.starts_with(&self.prefix)
    }

    /// The queue's stored settings: a hash of limits and the aging time that override every
    /// server's configuration field by field (see `redis/settings.rs` for the fields and
    /// their encoding), and the level retries go to (`retry_level`, read by forward.lua).
    /// Deleted by Redis when its last field is removed.
    pub fn settings(&self) -> String {
        format!("{}settings", self.prefix)
    }
}

/// Which history a counter key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryCounter {
    /// Tasks completed.
    Processed,
    /// Failed attempts (retried, dead-lettered, or lost with their worker).
    Failed,
}

impl HistoryCounter {
    fn code(self) -> &'static str {
        match self {
            HistoryCounter::Processed => "p",
            HistoryCounter::Failed => "f",
        }
    }
}

/// Milliseconds in a day: history buckets are UTC days.
pub(crate) const DAY_MS: i64 = 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// admin_queue_delete.lua reads the state keys by position (its KEYS header).
    #[test]
    fn state_keys_follow_the_queue_delete_layout() {
        let k = Keyspace::default().queue(&QueueName::new("q").expect("name"));
        let s = k.state_keys();
        let tenants = k.tenants();
        assert_eq!(
            s[..8],
            [
                k.stream(),
                k.scheduled(),
                k.retry(),
                k.archived(),
                k.completed(),
                k.processed(),
                k.failed(),
                k.cancel()
            ]
        );
        assert_eq!(s[8..19], k.lanes()[..]);
        assert_eq!(s[19], k.settings());
        assert_eq!(s[20..20 + tenants.len()], tenants[..]);
        assert_eq!(s[20 + tenants.len()..], [k.cancelled()]);
        assert!(s.iter().all(|key| k.owns(key)));
    }
}
