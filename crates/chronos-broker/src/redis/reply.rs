//! Checked conversions of script replies: a reply of the wrong shape becomes
//! [`BrokerError::Protocol`], never a panic; and the reply codes of each script, one enum per
//! script (or per protocol several scripts share), so each code has one meaning and one spelling.

use fred::prelude::*;

use crate::BrokerError;

pub(crate) fn int(v: &Value, context: &'static str) -> Result<i64, BrokerError> {
    v.as_i64()
        .ok_or_else(|| bad(context, format!("expected an integer, got {v:?}")))
}

pub(crate) fn array(v: Value, context: &'static str) -> Result<Vec<Value>, BrokerError> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Null => Ok(Vec::new()),
        other => Err(bad(context, format!("expected an array, got {other:?}"))),
    }
}

pub(crate) fn bytes(v: Value, context: &'static str) -> Result<Vec<u8>, BrokerError> {
    match v {
        Value::Bytes(b) => Ok(b.to_vec()),
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        other => Err(bad(context, format!("expected bytes, got {other:?}"))),
    }
}

pub(crate) fn string(v: Value, context: &'static str) -> Result<String, BrokerError> {
    let b = bytes(v, context)?;
    String::from_utf8(b).map_err(|_| bad(context, "expected UTF-8 text".into()))
}

/// An optional text field: nil and empty both mean None.
pub(crate) fn opt_string(v: Value, context: &'static str) -> Result<Option<String>, BrokerError> {
    if v.is_null() {
        return Ok(None);
    }
    let s = string(v, context)?;
    Ok(if s.is_empty() { None } else { Some(s) })
}

pub(crate) fn bad(context: &'static str, detail: String) -> BrokerError {
    BrokerError::Protocol { context, detail }
}

/// A boolean script argument: `"1"` or `"0"` (scripts compare strings).
pub(crate) fn flag(on: bool) -> Value {
    if on { "1" } else { "0" }.into()
}

/// Declares the reply codes of one script (or of scripts that share a protocol): an enum whose
/// `from_reply` is the only place each code's number is spelled on the Rust side; the script's
/// header comment is the Lua side.
macro_rules! codes {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The meaning of `code`; None for a code the script never answers.
            pub(crate) fn from_reply(code: i64) -> Option<Self> {
                match code {
                    $($code => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// A row of enqueue.lua (an array row `{2, run-at, state}` carries code 2).
    EnqueueCode {
        /// Enqueued, ready now.
        Ready = 1,
        /// Already there: the same task again, or one a first run of this call wrote.
        Exists = 2,
        /// Enqueued into the scheduled set.
        Scheduled = 3,
        /// The unique lock is held by another task: nothing written.
        UniqueHeld = -1,
        /// The id holds a different task: nothing written.
        IdConflict = -2,
        /// The queue's stream or scheduled set has the wrong type: nothing written.
        CorruptKeys = -3,
        /// The task's tenant has as many tasks waiting as its backlog cap: nothing written.
        TenantFull = -4,
        /// A deduplicated task whose key another task holds (row `{4, holder}`): nothing
        /// written.
        Duplicate = 4,
        /// A replace or debounce whose key a task holds (row `{5, holder}`): nothing written;
        /// edit.lua gives the holder this payload if it still waits.
        Offer = 5,
    }
}

codes! {
    /// The first value of a start.lua row.
    StartCode {
        /// Started.
        Started = 1,
        /// The delivery is no longer this one: its entry was acked and removed.
        Lost = 0,
        /// The task record is corrupt (the reason follows).
        Corrupt = -1,
    }
}

codes! {
    /// The reply of retry.lua.
    RetryCode {
        /// Moved to the retry set (also for a re-sent call whose first run did it).
        Scheduled = 1,
        /// The lease no longer matches: nothing changed.
        Stale = 0,
    }
}

codes! {
    /// The first value of snooze.lua's reply (the snooze count follows).
    SnoozeCode {
        /// Moved to the scheduled set (also for a re-sent call whose first run did it).
        Snoozed = 1,
        /// The task has snoozed the most it may: nothing changed.
        TooMany = 2,
        /// The lease no longer matches: nothing changed.
        Stale = 0,
    }
}

codes! {
    /// The first value of backoff.lua's reply (the block's end and the task's due time follow).
    BackoffCode {
        /// The block is set and the task scheduled (also for a re-sent call whose first run
        /// did it).
        Blocked = 1,
        /// The lease no longer matches: nothing changed.
        Stale = 0,
    }
}

codes! {
    /// The reply of cancel.lua.
    CancelCode {
        /// In the cancelled set (also for a re-sent call whose first run did it).
        Cancelled = 1,
        /// The lease no longer matches: nothing changed.
        Stale = 0,
    }
}

codes! {
    /// The reply of dead.lua.
    DeadCode {
        /// Archived.
        Archived = 1,
        /// Dropped (enqueued with discard).
        Discarded = 2,
        /// The lease no longer matches: nothing changed.
        Stale = 0,
    }
}

codes! {
    /// One task's code of the operator's scripts (admin_run, admin_archive, admin_delete,
    /// admin_cancel), which share this protocol.
    ActionCode {
        /// Done.
        Done = 1,
        /// Already done (a re-sent call whose first run did it): nothing changed.
        Already = 2,
        /// No such task.
        NotFound = 0,
        /// Its state refuses the action (the state name comes with the code).
        Refused = -1,
        /// Corrupt record: nothing changed.
        Corrupt = -2,
    }
}

codes! {
    /// The reply of edit.lua: [`ActionCode`]'s codes, and one more.
    EditCode {
        /// Edited.
        Done = 1,
        /// The task already was as asked (a re-sent call whose first run did it).
        Already = 2,
        /// No such task.
        NotFound = 0,
        /// Its state refuses the edit (the state name comes with the code).
        Refused = -1,
        /// Corrupt record: nothing changed.
        Corrupt = -2,
        /// The task is of another kind than the new payload is for (the kind comes with it).
        OtherKind = -3,
    }
}

codes! {
    /// The reply of chain_next.lua.
    ChainNextCode {
        /// The step was written now.
        Written = 1,
        /// Enqueued before (marker or task present).
        Before = 0,
        /// The queue's stream or scheduled set has the wrong type: nothing written.
        CorruptKeys = -3,
    }
}

codes! {
    /// The reply of group_open.lua.
    GroupOpenCode {
        /// Created.
        Created = 1,
        /// The same group exists already (a producer's retry).
        Exists = 2,
        /// The id holds another group.
        IdConflict = -2,
        /// The record is not a hash.
        Corrupt = -3,
    }
}

codes! {
    /// The first value of group_report.lua's reply.
    GroupReportCode {
        /// Counted now.
        Counted = 1,
        /// Counted before.
        Already = 2,
        /// No such group: nothing written.
        UnknownGroup = 0,
        /// Corrupt record or callback queue: nothing written.
        Corrupt = -3,
        /// Member index out of range: nothing written.
        OutOfRange = -4,
    }
}

codes! {
    /// One trigger's code of fire.lua.
    FireCode {
        /// Enqueued.
        Fired = 1,
        /// Already fired.
        Duplicate = -1,
        /// Skipped: the schedule's previous task is still live.
        Overlap = -2,
        /// Refused: the caller's epoch is older than the queue's fence.
        Stale = -3,
        /// Skipped: another task holds the unique lock.
        Unique = -4,
        /// Skipped: the deadline had passed.
        Expired = -5,
    }
}

codes! {
    /// The reply of sched_run.lua (the outcome it keeps in its run marker too).
    SchedRunCode {
        /// Enqueued.
        Fired = 1,
        /// This request already ran in another call.
        Duplicate = -1,
        /// A key has the wrong type: nothing written.
        CorruptKeys = -3,
        /// Another task holds the unique lock.
        Unique = -4,
    }
}

codes! {
    /// The reply of sched_put.lua.
    SchedPutCode {
        /// Written (revision bumped).
        Written = 1,
        /// The store already holds the new value: nothing written.
        Unchanged = 0,
        /// The stored value is not the expected one: nothing written.
        Conflict = -1,
        /// A schedule registered in code uses this id: nothing written.
        CodeOwned = -2,
    }
}

codes! {
    /// The reply of lock_renew.lua and lock_release.lua.
    LockCode {
        /// The caller held the lock: renewed, or released.
        Held = 1,
        /// Not the holder (the lock expired or another holds it): nothing changed.
        NotHeld = 0,
    }
}

codes! {
    /// The reply of registry_publish.lua.
    PublishCode {
        /// Written.
        Written = 1,
        /// A liveness-only call for an instance the registry does not know: nothing written.
        UnknownInstance = 0,
    }
}

codes! {
    /// The integer reply of push.lua (it answers the first task's id otherwise).
    PushCode {
        /// The queue's stream has the wrong type: nothing written.
        CorruptStream = -3,
    }
}

codes! {
    /// The first value of an admit.lua or hold.lua row.
    AdmitCode {
        /// Run it.
        Run = 1,
        /// Deferred (its due time follows).
        Deferred = 0,
        /// No longer current: its entry was acked and removed.
        Gone = -1,
    }
}
