//! Names a caller chooses (queues, namespaces, task ids, rate keys) and the rules they follow,
//! shared by every broker so that a name one store accepts, every store accepts.

use std::fmt;

use crate::BrokerError;

/// Longest queue name or namespace accepted, in bytes. Keys stay short, and Redis keeps small
/// keys in its compact encodings.
pub const MAX_NAME_LEN: usize = 128;

/// A validated queue name: 1 to [`MAX_NAME_LEN`] bytes, no whitespace, control characters, `{`
/// or `}` (braces would break the queue's hash tag).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

impl QueueName {
    /// Validates `name`; the error says which rule it breaks.
    pub fn new(name: impl Into<String>) -> Result<Self, BrokerError> {
        let name = name.into();
        match check_name(&name) {
            Ok(()) => Ok(Self(name)),
            Err(reason) => Err(BrokerError::InvalidQueue { name, reason }),
        }
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Debug for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Default for QueueName {
    fn default() -> Self {
        Self("default".into())
    }
}

/// Checks a queue name or namespace; the error is the rule it breaks.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("must not be empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("must be at most 128 bytes");
    }
    if name.chars().any(|c| c == '{' || c == '}') {
        return Err("must not contain '{' or '}'");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters");
    }
    Ok(())
}

/// True when `id` has the shape of a stream entry id (`<ms>-<seq>`), which only plain tasks
/// use for their task id (an explicit id of that shape is refused by [`check_explicit_id`]).
pub fn is_plain_id(id: &str) -> bool {
    id.split_once('-').is_some_and(|(ms, seq)| {
        !ms.is_empty()
            && !seq.is_empty()
            && id.len() < 42
            && ms.bytes().all(|b| b.is_ascii_digit())
            && seq.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Checks a task id an operator or a workflow names (any id a task can have).
pub fn check_task_id(id: &str) -> Result<(), BrokerError> {
    let reason = if id.is_empty() {
        "must not be empty"
    } else if id.len() > 256 {
        "must be at most 256 bytes"
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "must not contain whitespace or control characters"
    } else {
        return Ok(());
    };
    Err(BrokerError::InvalidTaskId {
        id: id.to_string(),
        reason,
    })
}

/// Checks an id a producer chooses for a new task: a task id, and not of the shape generated
/// ids have (`<digits>-<digits>`, a plain task's stream entry id), so the two never meet.
pub fn check_explicit_id(id: &str) -> Result<(), BrokerError> {
    check_task_id(id)?;
    if is_plain_id(id) {
        return Err(BrokerError::InvalidTaskId {
            id: id.to_string(),
            reason: "must not have the shape `<digits>-<digits>` of a generated id",
        });
    }
    Ok(())
}

/// Checks a rate key ([`crate::EnqueueOptions::rate_key`]): it becomes part of a Redis key name.
pub fn check_rate_key(key: &str) -> Result<(), BrokerError> {
    if key.is_empty() || key.len() > 256 || key.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(BrokerError::InvalidOption(format!(
            "rate key {key:?} must be 1 to 256 bytes without whitespace or control characters"
        )));
    }
    Ok(())
}

/// Checks a tenant key ([`crate::EnqueueOptions::tenant`]): it is part of the members of its
/// queue's tenant sets, next to separators no key may hold.
pub fn check_tenant(key: &str) -> Result<(), BrokerError> {
    if key.is_empty() || key.len() > 256 || key.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(BrokerError::InvalidOption(format!(
            "tenant {key:?} must be 1 to 256 bytes without whitespace or control characters"
        )));
    }
    Ok(())
}
