//! The names and numbers both sides agree on, named once: the fields of a task record, of a
//! stream entry and of a group record, and the numbers of the argument layouts.
//!
//! The Lua side gets the same names from [`prologue`], which the loader prepends to every
//! script (before `lib.lua`), so a number or a field name is written in Rust only: scripts say
//! `F_STATE`, `F_DELIVERY`, ... for the task record and its entries. This module's tests pin
//! the rest: a task-record field spelled as a literal in a script fails, except the group
//! scripts' own record (`G_*` fields, spelled in group_open.lua and group_report.lua) and a
//! few argument codes that share a letter with a field (listed in the test).

use chronos_core::event::fields as event;
use chronos_core::DEFAULT_MAX_RETRY;

/// Name of the one consumer group every queue stream has (Lua: `GROUP`).
pub const GROUP: &str = "workers";

// Task record: the hash `<ns>:{<q>}:t:<id>` (see the crate docs, "Key layout").

/// Task record: state (`pending`, `active`, `scheduled`, `retry`, `archived`, `completed`).
pub const STATE: &str = "s";
/// Task record: entry id of the current delivery.
pub const DELIVERY: &str = "m";
/// Task record: entry id of the last settled delivery (answers a re-sent settle).
pub const SETTLED: &str = "d";
/// Task record and entry: failed attempts so far.
pub const RETRIED: &str = "r";
/// Task record and plain entry: max retry.
pub const MAX_RETRY: &str = "x";
/// Task record and entry: last error.
pub const ERROR: &str = "err";
/// Task record and entry: when the last attempt failed (unix ms).
pub const FAILED_AT: &str = "f";
/// Task record: completion time (unix ms).
pub const COMPLETED_AT: &str = "c";
/// Task record: the unique lock's key, when the task holds one.
pub const UNIQUE: &str = "u";
/// Task record and plain entry: `'1'` to drop the task when it dies (else it is archived).
pub const DISCARD: &str = "dl";
/// Task record: the producer's fingerprint of an explicit id.
pub const FINGERPRINT: &str = "fp";
/// Task record: entry id of the delivery that took a start of its rate key (admit.lua).
pub const RATE_TAKEN: &str = "k";
/// Task record: the handler's result (completed and retained only).
pub const RESULT: &str = "res";
/// Task record and entry: the envelope (in the record only while the task is out of the stream).
pub const ENVELOPE: &str = "e";
/// Task record: free re-deliveries of the current attempt (reclaim.lua).
pub const FREE_REDELIVERIES: &str = "z";
/// Task record: times the task was snoozed by its handler (snooze.lua); absent: never.
pub const SNOOZES: &str = "sn";
/// Task record: `1` when the task's deduplication lock is let go when it starts (start.lua);
/// absent: when it ends (or, for a lock only its TTL ends, no `u` at all).
pub const UNIQUE_RELEASE: &str = "ur";
/// Task record: unix ms of the first enqueue of a debounced task's run, which bounds how far a
/// later enqueue may push its run time (edit.lua).
pub const DEBOUNCE_FIRST: &str = "df";

/// Task record: the reason its handler gave for cancelling it (cancel.lua; Lua:
/// `F_CANCEL_REASON`), present only in a cancelled task.
pub const CANCEL_REASON: &str = "cr";
/// Task record: when its handler cancelled it (unix ms; Lua: `F_CANCELLED_AT`).
pub const CANCELLED_AT: &str = "ca";
/// Task record: its attempt history, one JSON object per line for each attempt that ended
/// (lib.lua `attempt_row`; Lua: `F_ATTEMPTS`), at most [`chronos_core::ATTEMPTS_KEPT`] lines.
pub const ATTEMPTS: &str = "at";
/// Bytes of an attempt's error kept in its history row (Lua: `ATTEMPT_ERROR_BYTES`).
pub const ATTEMPT_ERROR_BYTES: usize = 2048;
/// Bytes a task's attempt history may hold: the oldest rows go first past it, so handlers'
/// log lines never make a record unbounded (Lua: `ATTEMPTS_BYTES`).
pub const ATTEMPTS_BYTES: usize = 64 * 1024;

// Stream entry: `i`, `e`, and once the task failed before `r`, `err`, `f` (the record's names);
// a plain task's entry has no `i`, and `x`/`dl` where they are not the defaults.

/// Entry: the task id (absent from a plain task's entry, whose id is the task's).
pub const TASK_ID: &str = "i";

// Group record: the hash `<ns>:{<cbq>}:g:<gid>` (group_open.lua, group_report.lua).

/// Group record: number of members.
pub const GROUP_SIZE: &str = "n";
/// Group record: members that succeeded.
pub const GROUP_OK: &str = "ok";
/// Group record: members that were dead-lettered.
pub const GROUP_KO: &str = "ko";
/// Group record: `'1'` once the callback was enqueued.
pub const GROUP_FIRED: &str = "fired";
/// Group record: the callback's envelope.
pub const GROUP_CALLBACK: &str = "cb";
/// Group record: offset of the counts text in the callback's envelope.
pub const GROUP_OFFSET: &str = "off";
/// Group record: the callback's task id.
pub const GROUP_CALLBACK_ID: &str = "cbid";
/// Group record: `'1'` when members' results are collected.
pub const GROUP_COLLECT: &str = "col";
/// Group record: the group's TTL (ms).
pub const GROUP_TTL: &str = "ttl";

/// Task record: the task's priority level (`0`..`9`), present only for a level other than the
/// default: it names the stream the task's deliveries go to (see `chronos_broker::QueueKeys::lane`).
pub const PRIORITY: &str = "p";

/// Queue settings hash (`<prefix>settings`): how long a task of a level may wait behind more
/// urgent levels before it is served ahead of them, in ms (Lua: `S_AGING`); absent: the
/// default, [`chronos_core::Priority::DEFAULT_AGING`] (Lua: `DEFAULT_AGING_MS`).
pub const SETTINGS_AGING: &str = "aging_ms";

/// Level hash (`<prefix>stream:levels`): when claim.lua next scans the levels for tasks past
/// the aging bound (unix ms; Lua: `LEVELS_AGED_AT`). Its other fields are levels.
pub const LEVELS_AGED_AT: &str = "aged_at";

/// Level hash: present (value `1`) once a handler blocked the queue or one of its rate keys
/// (backoff.lua), so claim.lua, which reads the hash's fields anyway, checks the block keys
/// only then (Lua: `LEVELS_BLOCKED`); claim.lua removes it when no block key is left.
pub const LEVELS_BLOCKED: &str = "blocked";

/// Queue settings hash: the priority level (`0`..`9`) retried tasks go to when it is more
/// urgent than their own, so retries run ahead of the backlog (Lua: `S_RETRY_LEVEL`); absent:
/// retries keep their level.
pub const SETTINGS_RETRY_LEVEL: &str = "retry_level";

/// Task record: the tenant of a task enqueued with one (Lua: `F_TENANT`): its deliveries are
/// entries of the queue's tenant stream, and it waits for its turn in the tenants' waiting set.
pub const TENANT: &str = "tn";
/// Task record: a tenant task's place inside its tenant (Lua: `F_TENANT_ORDER`): the key its
/// member of the waiting set sorts by (a time, later for less urgent levels; lib.lua
/// `tenant_order`), kept so that a task handed back returns to its place.
pub const TENANT_ORDER: &str = "to";

/// The pseudo-level of the tenant stream in lease ids (`10/<entry id>`) and in the level hash
/// (Lua: `TENANT_LANE`).
pub const TENANT_LANE: u8 = 10;
/// The pseudo-level of the tenants' wake stream, which blocked readers wait on (Lua:
/// `TENANT_WAKE`).
pub const TENANT_WAKE: u8 = 11;
/// The consumer that holds every waiting tenant task's entry in the tenant stream's pending
/// list until its turn comes (Lua: `TENANT_PARK`): an entry is delivered by moving it from this
/// consumer to a worker's. Not a valid worker consumer name (those have no `~`).
pub const TENANT_PARK: &str = "~waiting";
/// Keys in the tenants block (`chronos_broker::QueueKeys::tenants`; Lua: `TENANTS_LEN`).
pub const TENANTS_LEN: usize = 8;

/// Every field, with the name of the Lua local [`prologue`] gives it.
const FIELDS: &[(&str, &str)] = &[
    ("F_STATE", STATE),
    ("F_DELIVERY", DELIVERY),
    ("F_SETTLED", SETTLED),
    ("F_RETRIED", RETRIED),
    ("F_MAX_RETRY", MAX_RETRY),
    ("F_ERROR", ERROR),
    ("F_FAILED_AT", FAILED_AT),
    ("F_COMPLETED_AT", COMPLETED_AT),
    ("F_UNIQUE", UNIQUE),
    ("F_DISCARD", DISCARD),
    ("F_FINGERPRINT", FINGERPRINT),
    ("F_RATE_TAKEN", RATE_TAKEN),
    ("F_RESULT", RESULT),
    ("F_ENVELOPE", ENVELOPE),
    ("F_FREE_REDELIVERIES", FREE_REDELIVERIES),
    ("F_SNOOZES", SNOOZES),
    ("F_UNIQUE_RELEASE", UNIQUE_RELEASE),
    ("F_DEBOUNCE_FIRST", DEBOUNCE_FIRST),
    ("F_CANCEL_REASON", CANCEL_REASON),
    ("F_ATTEMPTS", ATTEMPTS),
    ("F_CANCELLED_AT", CANCELLED_AT),
    ("F_TASK_ID", TASK_ID),
    ("F_PRIORITY", PRIORITY),
    ("F_TENANT", TENANT),
    ("F_TENANT_ORDER", TENANT_ORDER),
    ("G_SIZE", GROUP_SIZE),
    ("G_OK", GROUP_OK),
    ("G_KO", GROUP_KO),
    ("G_FIRED", GROUP_FIRED),
    ("G_CALLBACK", GROUP_CALLBACK),
    ("G_OFFSET", GROUP_OFFSET),
    ("G_CALLBACK_ID", GROUP_CALLBACK_ID),
    ("G_COLLECT", GROUP_COLLECT),
    ("G_TTL", GROUP_TTL),
    ("EVENTS_NAME", EVENTS_NAME),
];

/// The fields of an event entry (`chronos_core::event::fields`), as the Lua table `E` that
/// [`prologue`] gives every script: `E.TYPE`, `E.TASK`, ...
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("TYPE", event::TYPE),
    ("TASK", event::TASK),
    ("KIND", event::KIND),
    ("ATTEMPT", event::ATTEMPT),
    ("WORKER", event::WORKER),
    ("REASON", event::REASON),
    ("AT", event::AT),
    ("VALUE", event::VALUE),
    ("HOLDER", event::HOLDER),
    ("RESULT", event::RESULT),
    ("LEVEL", event::LEVEL),
];

/// The event types (`chronos_core::event::fields`), as the Lua table `EV`: `EV.ENQUEUED`, ...
const EVENT_TYPES: &[(&str, &str)] = &[
    ("ENQUEUED", event::ENQUEUED),
    ("DEDUPLICATED", event::DEDUPLICATED),
    ("STARTED", event::STARTED),
    ("PROGRESS", event::PROGRESS),
    ("RETRIED", event::RETRIED),
    ("SNOOZED", event::SNOOZED),
    ("COMPLETED", event::COMPLETED),
    ("DEAD", event::DEAD),
    ("CANCELLED", event::CANCELLED),
    ("RECLAIMED", event::RECLAIMED),
    ("THROTTLED", event::THROTTLED),
    ("DEFERRED", event::DEFERRED),
    ("REQUEUED", event::REQUEUED),
    ("FORWARDED", event::FORWARDED),
    ("DELETED", event::DELETED),
    ("ARCHIVED", event::ARCHIVED),
    ("RUN_NOW", event::RUN_NOW),
    ("EDITED", event::EDITED),
    ("PRIORITIZED", event::PRIORITIZED),
    ("CANCEL_REQUESTED", event::CANCEL_REQUESTED),
];

/// The last part of a queue's event stream's key (`<prefix>events`, Lua: `EVENTS_NAME`).
pub const EVENTS_NAME: &str = "events";

/// The delivery count start.lua sets on a started plain task's pending entry (XCLAIM
/// RETRYCOUNT): far above any count a read or a reclaim gives, so the pending list itself
/// records "started" (Lua: `STARTED`).
pub const STARTED: i64 = 1_000_000;

/// Values per task in an enqueue.lua call (Lua: `ENQUEUE_STRIDE`).
pub const ENQUEUE_STRIDE: usize = 12;

/// Values per task with a record in a complete.lua call (Lua: `COMPLETE_STRIDE`).
pub const COMPLETE_STRIDE: usize = 6;

/// Completions a claim.lua call that settles as it fetches lets wait in the consumer's receipt
/// before it adds them to the queue's processed counters (Lua: `COUNT_BATCH`): the counters lag
/// a busy consumer by fewer than this many tasks, and are exact once its queue drains.
pub const COUNT_BATCH: u64 = 64;

/// How long (ms) a consumer's fetch receipt is kept while it holds completion counts owed to
/// the counters (Lua: `OWED_TTL_MS`): longer than any gap between two reads of a live consumer,
/// so the counts are not lost with it; a dead consumer's are paid when it is removed.
pub const OWED_TTL_MS: u64 = 86_400_000;

/// Values per trigger in a fire.lua call (Lua: `FIRE_STRIDE`).
pub const FIRE_STRIDE: usize = 13;

/// The Lua prepended to every script: the constants above as `local`s. Locals cost the script
/// nothing at run time, and the text is the same on every start, so each script's SHA1 is too.
pub fn prologue() -> String {
    let mut lua = String::from(
        "-- Generated from chronos-protocol's src/names.rs (the Rust side of the protocol): edit it there.\n",
    );
    lua.push_str(&format!("local STARTED = {STARTED}\n"));
    // The first byte of an envelope this version writes (edit.lua reads envelopes).
    lua.push_str(&format!(
        "local ENVELOPE_VERSION = {}\n",
        chronos_core::ENVELOPE_VERSION
    ));
    // A string, as the scripts compare and store it: the envelope's default max retry.
    lua.push_str(&format!("local PLAIN_MAX_RETRY = '{DEFAULT_MAX_RETRY}'\n"));
    lua.push_str(&format!("local ENQUEUE_STRIDE = {ENQUEUE_STRIDE}\n"));
    lua.push_str(&format!("local COMPLETE_STRIDE = {COMPLETE_STRIDE}\n"));
    lua.push_str(&format!("local COUNT_BATCH = {COUNT_BATCH}\n"));
    lua.push_str(&format!("local OWED_TTL_MS = {OWED_TTL_MS}\n"));
    lua.push_str(&format!(
        "local ATTEMPTS_KEPT = {}\n",
        chronos_core::ATTEMPTS_KEPT
    ));
    lua.push_str(&format!(
        "local ATTEMPT_ERROR_BYTES = {ATTEMPT_ERROR_BYTES}\n"
    ));
    lua.push_str(&format!("local ATTEMPTS_BYTES = {ATTEMPTS_BYTES}\n"));
    lua.push_str(&format!("local FIRE_STRIDE = {FIRE_STRIDE}\n"));
    lua.push_str(&format!(
        "local FIRES_KEPT = {}\n",
        chronos_core::FIRES_KEPT
    ));
    lua.push_str(&format!(
        "local EVENTS_KEPT = {}\n",
        chronos_core::EVENTS_KEPT
    ));
    // The consumer group of every stream, and the level whose tasks use the main stream.
    lua.push_str(&format!("local GROUP = '{}'\n", GROUP));
    lua.push_str(&format!(
        "local NORMAL_LEVEL = '{}'\n",
        chronos_core::Priority::NORMAL
    ));
    lua.push_str(&format!("local S_AGING = '{SETTINGS_AGING}'\n"));
    // The lanes block (`QueueKeys::lanes`): one stream per level, then the level hash.
    lua.push_str(&format!(
        "local LEVELS = {}\nlocal LANES_LEN = LEVELS + 1\n",
        chronos_core::Priority::LEVELS
    ));
    lua.push_str(&format!("local LEVELS_AGED_AT = '{LEVELS_AGED_AT}'\n"));
    lua.push_str(&format!("local LEVELS_BLOCKED = '{LEVELS_BLOCKED}'\n"));
    // The tenants block (`QueueKeys::tenants`) and its stream's pseudo-levels and parking
    // consumer.
    lua.push_str(&format!(
        "local TENANT_LANE = '{TENANT_LANE}'\nlocal TENANT_WAKE = '{TENANT_WAKE}'\n\
         local TENANT_PARK = '{TENANT_PARK}'\nlocal TENANTS_LEN = {TENANTS_LEN}\n"
    ));
    lua.push_str(&format!("local S_RETRY_LEVEL = '{SETTINGS_RETRY_LEVEL}'\n"));
    lua.push_str(&format!(
        "local DEFAULT_AGING_MS = {}\n",
        chronos_core::Priority::DEFAULT_AGING.as_millis()
    ));
    for (name, value) in FIELDS {
        lua.push_str(&format!("local {name} = '{value}'\n"));
    }
    // The event names as two tables, not a local each: Lua allows a function 200 locals, and
    // every script is one function holding this prologue, lib.lua and its own code.
    for (table, names) in [("E", EVENT_FIELDS), ("EV", EVENT_TYPES)] {
        let members: Vec<String> = names
            .iter()
            .map(|(name, value)| format!("{name} = '{value}'"))
            .collect();
        lua.push_str(&format!("local {table} = {{{}}}\n", members.join(", ")));
    }
    lua
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// Quoted words of the scripts that are not fields: Redis type names, Lua type names,
    /// states, argument codes, and the fields of the scheduler's own hashes (leader info,
    /// metrics) and of the rate-limit hash, which are not part of this protocol.
    const NOT_FIELDS: &[&str] = &[
        "zset", "table", "hash", "none", "string", "stream", "number", // types
        "retry",  // a state ('pending', ... are longer than a field name)
        "o",      // a group member's outcome code (`o` succeeded, `f` failed)
        "j",      // due.lua's list selector (`f`/`j`)
        "b",      // enqueue.lua's receipt code of a task refused for a full tenant
        "t",      // the rate-limit hash's next-start time
        "id", "epoch", "since", // the scheduler's leader info
        "name",  // a consumer group's name in an XINFO GROUPS reply
        "q",     // backoff.lua's scope: `q` the queue (`k` the rate key)
        "dead", "lost", // attempt outcomes (lib.lua `attempt_row`)
    ];

    fn lua_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("scripts dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                lua_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "lua") {
                out.push(path);
            }
        }
    }

    /// Short quoted words in the code (not the comments) of `text`: the shape of a field name.
    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines() {
            let code = line.split("--").next().unwrap_or("");
            for (k, part) in code.split('\'').enumerate() {
                if k % 2 == 1
                    && (1..=5).contains(&part.len())
                    && part.chars().all(|c| c.is_ascii_lowercase())
                {
                    out.push(part.to_string());
                }
            }
        }
        out
    }

    #[test]
    fn scripts_spell_only_declared_fields() {
        let declared: BTreeSet<&str> = FIELDS
            .iter()
            .chain(EVENT_FIELDS)
            .chain(EVENT_TYPES)
            .map(|(_, v)| *v)
            .collect();
        let mut files = Vec::new();
        lua_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts"),
            &mut files,
        );
        assert!(files.len() >= 30, "only {} scripts", files.len());
        let mut used = BTreeSet::new();
        for path in &files {
            let text = std::fs::read_to_string(path).expect("read");
            for w in words(&text) {
                assert!(
                    declared.contains(w.as_str()) || NOT_FIELDS.contains(&w.as_str()),
                    "{}: '{w}' looks like a field but names.rs declares none such",
                    path.display()
                );
                used.insert(w);
            }
            // The generated names are the only way to say a field in lib.lua, so each use there
            // must name a declared one.
            for name in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
                if (name.starts_with("F_") || name.starts_with("G_")) && name.len() > 2 {
                    assert!(
                        FIELDS.iter().any(|(n, _)| *n == name),
                        "{}: {name} is not generated by names.rs",
                        path.display()
                    );
                }
            }
        }
        let prologue = prologue();
        for (name, value) in FIELDS {
            let spelled = used.contains(*value)
                || files.iter().any(|p| {
                    std::fs::read_to_string(p)
                        .expect("read")
                        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                        .any(|w| w == *name)
                });
            assert!(spelled, "field {name} = '{value}' is used by no script");
            assert!(prologue.contains(&format!("local {name} = '{value}'\n")));
        }
    }

    /// The members a script reads of the prologue's table `table` (`E.TYPE` -> `TYPE`).
    fn members<'a>(code: &'a str, table: &str) -> Vec<&'a str> {
        let dotted = format!("{table}.");
        let mut out = Vec::new();
        for (at, _) in code.match_indices(&dotted) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                continue;
            }
            let rest = &code[at + dotted.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(rest.len());
            out.push(&rest[..end]);
        }
        out
    }

    #[test]
    fn scripts_name_only_declared_events_and_use_every_one() {
        let mut files = Vec::new();
        lua_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts"),
            &mut files,
        );
        let prologue = prologue();
        for (table, names) in [("E", EVENT_FIELDS), ("EV", EVENT_TYPES)] {
            let mut used = BTreeSet::new();
            for path in &files {
                let text = std::fs::read_to_string(path).expect("read");
                let code: String = text
                    .lines()
                    .map(|l| l.split("--").next().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n");
                for m in members(&code, table) {
                    // A misspelt member is nil in Lua: the event would be lost without an error.
                    assert!(
                        names.iter().any(|(n, _)| *n == m),
                        "{}: {table}.{m} is not generated by names.rs",
                        path.display()
                    );
                    used.insert(m.to_string());
                }
            }
            for (name, value) in names {
                assert!(used.contains(*name), "{table}.{name} is used by no script");
                assert!(prologue.contains(&format!("{name} = '{value}'")));
            }
        }
    }

    /// Literals that look like a task-record field but are argument or receipt codes, by file.
    const CODES: &[(&str, &str)] = &[
        ("due.lua", "f"),     // which lists: 'f' forward
        ("forward.lua", "r"), // set of a task: 'r' retry
        ("janitor.lua", "c"), // set of a task: 'c' completed
        ("janitor.lua", "x"), // set of a task: 'x' cancelled
        ("enqueue.lua", "u"), // receipt code: unique lock held
        ("enqueue.lua", "k"), // receipt code: corrupt queue keys
        ("enqueue.lua", "c"), // receipt code: id conflict
        ("enqueue.lua", "p"), // dedup mode: replace
        ("enqueue.lua", "d"), // dedup mode: debounce
        ("enqueue.lua", "s"), // dedup release: on start
        ("enqueue.lua", "x"), // dedup release: at expiry
        ("lib.lua", "s"),     // lock_record's release point: on start
        ("lib.lua", "x"),     // lock_record's release point: at expiry
    ];

    #[test]
    fn scripts_name_task_fields_by_their_generated_names() {
        let task_fields: BTreeSet<&str> = FIELDS
            .iter()
            .filter(|(n, _)| n.starts_with("F_"))
            .map(|(_, v)| *v)
            .collect();
        let mut files = Vec::new();
        lua_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts"),
            &mut files,
        );
        for path in &files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // The group record's own fields (`x`, `dl`, `fp` of the callback) share letters.
            if name.starts_with("group_") {
                continue;
            }
            let text = std::fs::read_to_string(path).expect("read");
            for w in words(&text) {
                assert!(
                    !task_fields.contains(w.as_str()) || CODES.contains(&(name, w.as_str())),
                    "{}: task field '{w}' spelled as a literal: use its F_ name",
                    path.display()
                );
            }
        }
    }

    /// A script that changes a task (writes its state, makes its record, or hands it to one
    /// of the helpers that move it) writes the change's event: it calls lib.lua's
    /// `transition` or `attempt_ended`, and never appends to the event stream itself, so the
    /// events of every transition come from one place. The scripts that change no task state
    /// an event would report are listed with why.
    #[test]
    fn every_script_that_moves_a_task_writes_its_event() {
        const NO_EVENT: &[(&str, &str)] = &[
            ("janitor.lua", "removes tasks whose final event was written"),
            (
                "admin_queue_delete.lua",
                "deletes the keys of a queue that holds no task",
            ),
            ("events_on.lua", "makes the event stream"),
        ];
        let moves = [
            "F_STATE, '",
            "new_record(",
            "set_aside(",
            "back_to_stream(",
            "tenant_back(",
            "tenant_ready(",
            "tenant_park(",
            "add_entry(",
            "'XADD'",
            "'DEL', tkey",
            "ZADD', KEYS[1], 'NX'",
        ];
        let mut files = Vec::new();
        lua_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts"),
            &mut files,
        );
        for path in &files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "lib.lua" {
                continue;
            }
            let text = std::fs::read_to_string(path).expect("read");
            let code: String = text
                .lines()
                .map(|l| l.split("--").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                !code
                    .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .any(|w| w == "EVENTS"),
                "{name}: names the event stream itself; write through lib.lua's `transition`"
            );
            let moving = moves.iter().find(|m| code.contains(**m));
            let writes = code.contains("transition(") || code.contains("attempt_ended(");
            if let Some(m) = moving {
                if !writes {
                    assert!(
                        NO_EVENT.iter().any(|(n, _)| *n == name),
                        "{name}: changes a task ({m}) but writes no event through lib.lua's \
                         `transition` or `attempt_ended`"
                    );
                }
            }
        }
    }

    #[test]
    fn prologue_is_only_locals() {
        // Anything but `local` assignments would run on every call of every script.
        for line in prologue().lines().filter(|l| !l.starts_with("--")) {
            assert!(line.starts_with("local "), "{line}");
        }
    }
}
