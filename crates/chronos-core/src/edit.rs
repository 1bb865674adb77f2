//! Changes to one waiting task: the argument of [`Operate::edit`](crate::Operate::edit).

use std::time::Duration;

use crate::{duration_ms, encode_args, BrokerError, Priority, TaskArgs, Timestamp};

/// What [`Operate::edit`](crate::Operate::edit) changes in one waiting (pending, scheduled or
/// retry) task: its payload, its run time, its priority level, any of them together. Unset
/// parts stay as they are; the task keeps its id, kind, attempts and every other option.
///
/// ```
/// use std::time::Duration;
/// use chronos_core::{Priority, TaskEdit};
///
/// let edit = TaskEdit::new()
///     .payload(rmp_serde::to_vec_named(&("to", "b@example.com")).unwrap())
///     .run_in(Duration::from_secs(30))
///     .priority(Priority::HIGH);
/// assert!(!edit.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskEdit {
    payload: Option<Vec<u8>>,
    kind: Option<String>,
    run: Option<Run>,
    priority: Option<Priority>,
}

/// A new run time, as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    At(i64),
    In(Duration),
}

impl TaskEdit {
    /// An edit that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the payload with `bytes` (MessagePack, as the handler decodes it). The kind is
    /// not checked: the bytes must be what the task's handler reads. Bytes over the broker's
    /// payload limit are refused at the call with [`BrokerError::PayloadTooLarge`].
    pub fn payload(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(bytes.into());
        self.kind = None;
        self
    }

    /// Replaces the payload with `args`, encoded as [`Client::enqueue`](crate::Client::enqueue)
    /// encodes them; the edit is then refused with [`BrokerError::InvalidOption`] when the task
    /// is not of kind `T::KIND`. Fails with [`BrokerError::Encode`] when `args` do not
    /// serialize.
    pub fn args<T: TaskArgs>(mut self, args: &T) -> Result<Self, BrokerError> {
        self.payload = Some(encode_args(args)?);
        self.kind = Some(T::KIND.to_string());
        Ok(self)
    }

    /// Runs the task at `at` (a time now or past: due now). A pending task with a time in the
    /// future leaves the stream and waits as scheduled.
    pub fn run_at(mut self, at: impl Into<Timestamp>) -> Self {
        self.run = Some(Run::At(at.into().unix_ms()));
        self
    }

    /// Runs the task `delay` from the time of the call (by the caller's clock, as
    /// [`EnqueueOptions::process_in`](crate::EnqueueOptions::process_in)); zero: due now.
    pub fn run_in(mut self, delay: Duration) -> Self {
        self.run = Some(Run::In(delay));
        self
    }

    /// Gives the task priority level `priority`, as
    /// [`Operate::prioritize`](crate::Operate::prioritize) does.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// True when nothing is to change.
    pub fn is_empty(&self) -> bool {
        self.payload.is_none() && self.run.is_none() && self.priority.is_none()
    }

    /// The new payload, if any.
    pub fn new_payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    /// The kind the new payload is for, when it was given by [`TaskEdit::args`].
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// The new run time in unix ms, a delay counted from `now_ms`; None when unchanged.
    pub fn run_at_ms(&self, now_ms: i64) -> Option<i64> {
        self.run.map(|r| match r {
            Run::At(at) => at,
            Run::In(d) => now_ms.saturating_add(duration_ms(d)),
        })
    }

    /// The new level, if any.
    pub fn new_priority(&self) -> Option<Priority> {
        self.priority
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_counts_from_the_given_now_and_a_time_stays_as_given() {
        let e = TaskEdit::new().run_in(Duration::from_millis(1500));
        assert_eq!(e.run_at_ms(1000), Some(2500));
        let e = TaskEdit::new().run_at(Timestamp::from_unix_ms(7));
        assert_eq!(e.run_at_ms(1000), Some(7));
        assert_eq!(TaskEdit::new().run_at_ms(1000), None);
        assert!(TaskEdit::new().is_empty());
    }

    #[test]
    fn raw_bytes_clear_the_kind_typed_args_set() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Mail {
            to: String,
        }
        impl TaskArgs for Mail {
            const KIND: &'static str = "mail";
        }
        let e = TaskEdit::new()
            .args(&Mail { to: "a".into() })
            .expect("args");
        assert_eq!(e.kind(), Some("mail"));
        assert_eq!(
            crate::payload_json(e.new_payload().expect("payload")),
            r#"{"to":"a"}"#
        );
        assert_eq!(TaskEdit::new().payload(vec![0xc0]).kind(), None);
    }
}
