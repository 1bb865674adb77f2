//! Testing producers without Redis: a [`Recorder`] is an [`Enqueue`] broker that keeps what it
//! is given in memory, so `Client<Recorder>` runs the code under test unchanged and the test
//! asserts on what it enqueued.
//!
//! # The pattern
//! Write producer code generic over the broker: take a `&Client<B>` with `B: Enqueue` (or a
//! `&impl Enqueue`). Production passes the `Client` over Redis, a test passes
//! `Client::new(recorder.clone())` (or [`Recorder::client`]); the recorder is a cheap handle,
//! every clone sees the same record.
//!
//! ```
//! use chronos_core::testing::Recorder;
//! use chronos_core::{BrokerError, Client, Enqueue, EnqueueOptions, TaskArgs};
//! use serde::{Deserialize, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Welcome { user: u64 }
//! impl TaskArgs for Welcome { const KIND: &'static str = "welcome"; }
//!
//! // The code under test: generic over the broker.
//! async fn sign_up<B: Enqueue>(client: &Client<B>, user: u64) -> Result<(), BrokerError> {
//!     let later = EnqueueOptions::new().queue("mail").process_in(Duration::from_secs(600));
//!     client.enqueue(&Welcome { user }, later).await?;
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let recorder = Recorder::new();
//! sign_up(&Client::new(recorder.clone()), 7).await.unwrap();
//!
//! let sent = recorder.assert_enqueued::<Welcome>(|t| t.args.user == 7);
//! assert_eq!(sent.queue, "mail");
//! assert!(sent.is_scheduled());
//! assert_eq!(recorder.enqueued::<Welcome>().len(), 1);
//! # }
//! ```
//!
//! # How close to Redis it answers
//! Each stored task is answered with the [`TaskInfo`] the Redis broker gives: `Pending` and run
//! at now, or `Scheduled` with its run-at when it was delayed (a run-at in the past runs now).
//! One difference: a task without an explicit id gets a random id here (32 hex characters),
//! where Redis gives a plain task its stream entry's id (`<ms>-<seq>`); ids are opaque either
//! way.
//! It refuses what Redis refuses, with the same errors: a bad queue name
//! ([`BrokerError::InvalidQueue`]), a payload over the size limit
//! ([`BrokerError::PayloadTooLarge`], [`DEFAULT_MAX_PAYLOAD`] unless
//! [`Recorder::max_payload_bytes`] says otherwise), a unique task whose lock another task holds
//! ([`BrokerError::DuplicateTask`]; locks expire by the wall clock after their TTL, and
//! nothing here runs tasks, so nothing releases them earlier except [`Recorder::clear`]), and an
//! explicit task id already used for a different task ([`BrokerError::TaskIdConflict`]; the
//! same task again answers its first enqueue and is recorded once). A deduplicated task
//! ([`crate::EnqueueOptions::dedup`]) is answered as Redis answers it: a duplicate names the
//! holder; a replace or a debounce gives the recorded holder the new payload (and a debounce
//! its new run time), since nothing starts here; [`Recorder::drain`] lets go every lock but a
//! throttle's, which lives its window. What it does not do:
//! replicas (a [`crate::EnqueueOptions::durable`] enqueue succeeds as if every replica
//! acknowledged), and tasks never move on (a scheduled task stays scheduled).
//!
//! # Panics
//! The `assert_*` methods panic when the assertion fails, with a message that lists what was
//! enqueued: that is what a test helper is for. [`Recorder::enqueued`] panics when a task of
//! `T`'s kind does not decode as `T` (two types share one kind: a bug of the test's program).
//! No method panics because of a poisoned lock.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::task::Due;
use crate::{
    now_ms, BrokerError, Client, DeadLetter, DecodeError, Dedup, DedupMode, Enqueue,
    EnqueueOutcome, NewTask, QueueName, Release, TaskArgs, TaskEnvelope, TaskInfo, TaskState,
    DEFAULT_MAX_PAYLOAD,
};

/// An in-memory [`Enqueue`] broker that records every task it stores (see the
/// [module docs](self) for what it mirrors of Redis). Clones share one record.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<Record>>,
}

#[derive(Debug, Default)]
struct Record {
    tasks: Vec<RecordedTask>,
    /// (queue, id) -> index in `tasks`, and the producer's fingerprint for an explicit id.
    ids: HashMap<(String, String), (usize, Option<String>)>,
    /// (queue, unique key) -> (holder id, expiry unix ms, let go only at expiry).
    locks: HashMap<(String, String), (String, i64, bool)>,
    max_payload: Option<usize>,
}

/// One task the recorder stored, untyped: the envelope a Redis broker would have written and
/// the answer the enqueue got.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordedTask {
    /// What the enqueue answered.
    pub info: TaskInfo,
    /// The task as stored: kind, queue, payload, options, headers, enqueue time.
    pub envelope: TaskEnvelope,
    /// The unique lock's TTL, for a unique task.
    pub unique_ttl: Option<Duration>,
}

/// One recorded task of type `T`, its arguments decoded, with the options it was enqueued with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Enqueued<T> {
    /// The arguments, decoded from the stored payload (so a `#[serde(skip)]` field shows as the
    /// worker would see it).
    pub args: T,
    /// The task id.
    pub id: String,
    /// The queue.
    pub queue: String,
    /// `Pending`, or `Scheduled` when it was delayed.
    pub state: TaskState,
    /// When it may first run (unix ms).
    pub run_at_ms: i64,
    /// Headers given at enqueue.
    pub headers: BTreeMap<String, String>,
    /// Retries allowed after the first attempt.
    pub max_retry: u32,
    /// Per-attempt time limit.
    pub timeout: Option<Duration>,
    /// Absolute deadline (unix ms).
    pub deadline_ms: Option<i64>,
    /// The unique lock's TTL, for a unique task.
    pub unique_ttl: Option<Duration>,
    /// How long a completed task is kept.
    pub retention: Option<Duration>,
    /// Archived or discarded when retries run out.
    pub dead_letter: DeadLetter,
    /// The whole stored envelope, for anything the fields above do not show.
    pub envelope: TaskEnvelope,
}

impl<T> Enqueued<T> {
    /// Whether it waits for a later run-at.
    pub fn is_scheduled(&self) -> bool {
        self.state == TaskState::Scheduled
    }

    /// One header, if the task carries it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

impl RecordedTask {
    /// The arguments decoded as `T`; an error when the kind is not `T::KIND` or the payload does
    /// not decode as `T`.
    pub fn args<T: TaskArgs>(&self) -> Result<T, DecodeError> {
        if self.envelope.kind != T::KIND {
            return Err(DecodeError::Payload {
                kind: T::KIND.to_string(),
                reason: format!("the task is of kind {:?}", self.envelope.kind),
            });
        }
        crate::decode_payload(&self.envelope)
    }

    /// The typed view of this task.
    pub fn typed<T: TaskArgs>(&self) -> Result<Enqueued<T>, DecodeError> {
        let e = &self.envelope;
        Ok(Enqueued {
            args: self.args()?,
            id: e.id.clone(),
            queue: e.queue.clone(),
            state: self.info.state,
            run_at_ms: self.info.run_at_ms,
            headers: e.headers.clone(),
            max_retry: e.max_retry,
            timeout: e.timeout_ms.map(Duration::from_millis),
            deadline_ms: e.deadline_ms,
            unique_ttl: self.unique_ttl,
            retention: e.retention_ms.map(Duration::from_millis),
            dead_letter: e.dead_letter,
            envelope: e.clone(),
        })
    }

    /// One line for a failed assertion's message: id, queue, state and arguments as JSON.
    fn line(&self) -> String {
        let e = &self.envelope;
        let mut s = format!(
            "{} id={} queue={} {}",
            e.kind,
            e.id,
            e.queue,
            self.info.state.as_str()
        );
        if self.info.state == TaskState::Scheduled {
            let _ = write!(s, " run_at_ms={}", self.info.run_at_ms);
        }
        let _ = write!(s, " args={}", crate::envelope_payload_json(e));
        if !e.headers.is_empty() {
            let _ = write!(s, " headers={:?}", e.headers);
        }
        s
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A client over this recorder (the same as `Client::new(recorder.clone())`).
    pub fn client(&self) -> Client<Recorder> {
        Client::new(self.clone())
    }

    /// Refuses payloads larger than `limit` bytes, as a `RedisBroker` built with the same limit
    /// does (default [`DEFAULT_MAX_PAYLOAD`]).
    pub fn max_payload_bytes(self, limit: usize) -> Self {
        self.lock().max_payload = Some(limit);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Record> {
        // A panic while holding the lock (an assertion in another thread) leaves the record
        // consistent: every write below completes before anything can panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every stored task, in enqueue order.
    pub fn tasks(&self) -> Vec<RecordedTask> {
        self.lock().tasks.clone()
    }

    /// Removes and returns every stored task, and releases every unique lock: what a worker
    /// that ran them all would leave (run them with `chronos_worker::testing::run_envelope`).
    pub fn drain(&self) -> Vec<RecordedTask> {
        let mut r = self.lock();
        r.ids.clear();
        // A throttle's lock outlives its task.
        r.locks.retain(|_, (_, _, at_expiry)| *at_expiry);
        std::mem::take(&mut r.tasks)
    }

    /// Forgets every task and unique lock.
    pub fn clear(&self) {
        self.drain();
        self.lock().locks.clear();
    }

    /// How many tasks are stored.
    pub fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored tasks of `T::KIND`, decoded, in enqueue order.
    ///
    /// # Panics
    /// When one of them does not decode as `T` (two types share a kind).
    pub fn enqueued<T: TaskArgs>(&self) -> Vec<Enqueued<T>> {
        self.tasks()
            .iter()
            .filter(|t| t.envelope.kind == T::KIND)
            .map(|t| match t.typed::<T>() {
                Ok(e) => e,
                Err(err) => panic!(
                    "a recorded task of kind {:?} does not decode as {}: {err}\n  {}",
                    T::KIND,
                    std::any::type_name::<T>(),
                    t.line()
                ),
            })
            .collect()
    }

    /// The first stored task of `T::KIND` for which `matches` holds.
    ///
    /// # Panics
    /// When there is none; the message lists every stored task.
    pub fn assert_enqueued<T: TaskArgs>(
        &self,
        matches: impl Fn(&Enqueued<T>) -> bool,
    ) -> Enqueued<T> {
        let found = self.enqueued::<T>().into_iter().find(|t| matches(t));
        match found {
            Some(t) => t,
            None => panic!(
                "expected an enqueued {:?} task that matches, found none.\n{}",
                T::KIND,
                self.listing()
            ),
        }
    }

    /// Asserts that no stored task of `T::KIND` matches `matches`.
    ///
    /// # Panics
    /// When one does; the message lists every stored task.
    pub fn refute_enqueued<T: TaskArgs>(&self, matches: impl Fn(&Enqueued<T>) -> bool) {
        if let Some(t) = self.enqueued::<T>().iter().find(|t| matches(t)) {
            panic!(
                "expected no enqueued {:?} task that matches, found task {}.\n{}",
                T::KIND,
                t.id,
                self.listing()
            );
        }
    }

    /// Asserts that exactly `n` tasks of `T::KIND` are stored.
    ///
    /// # Panics
    /// When the count differs; the message lists every stored task.
    pub fn assert_enqueued_count<T: TaskArgs>(&self, n: usize) {
        let got = self.enqueued::<T>().len();
        if got != n {
            panic!(
                "expected {n} enqueued {:?} task(s), found {got}.\n{}",
                T::KIND,
                self.listing()
            );
        }
    }

    /// Asserts that nothing was stored.
    ///
    /// # Panics
    /// When something was; the message lists it.
    pub fn assert_nothing_enqueued(&self) {
        if !self.is_empty() {
            panic!("expected nothing enqueued.\n{}", self.listing());
        }
    }

    fn listing(&self) -> String {
        let tasks = self.tasks();
        if tasks.is_empty() {
            return "Nothing was enqueued.".into();
        }
        let mut s = format!("Enqueued ({}):", tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            let _ = write!(s, "\n  #{} {}", i + 1, t.line());
        }
        s
    }

    /// Stores one task as the enqueue script would, or refuses it.
    fn store(r: &mut Record, task: NewTask, now: i64) -> Result<TaskInfo, BrokerError> {
        let env = &task.envelope;
        QueueName::new(env.queue.as_str())?;
        let limit = r.max_payload.unwrap_or(DEFAULT_MAX_PAYLOAD);
        if env.payload.len() > limit {
            return Err(BrokerError::PayloadTooLarge {
                size: env.payload.len(),
                limit,
            });
        }
        let id_key = (env.queue.clone(), env.id.clone());
        let fingerprint = task.explicit_id.then(|| task.fingerprint());
        if let Some((i, stored_fp)) = r.ids.get(&id_key) {
            // The id is in use: the same task again answers its first enqueue. As in the script,
            // an explicit id compares what the producer chose, any other the stored bytes.
            let stored = &r.tasks[*i];
            let same = match &fingerprint {
                Some(fp) => stored_fp.as_ref() == Some(fp),
                None => stored.envelope == task.envelope,
            };
            return if same {
                Ok(stored.info.clone())
            } else {
                Err(BrokerError::TaskIdConflict {
                    id: env.id.clone(),
                    queue: env.queue.clone(),
                })
            };
        }
        if let (Some(hash), Some(ttl)) = (&env.unique_key, task.unique_ttl) {
            let lock = (env.queue.clone(), hash.clone());
            let holder = r
                .locks
                .get(&lock)
                .filter(|(_, until, _)| *until > now)
                .map(|(id, _, _)| id.clone());
            if let Some(holder) = holder {
                return match &task.dedup {
                    None => Err(BrokerError::DuplicateTask {
                        queue: env.queue.clone(),
                    }),
                    Some(d) => Ok(Self::held(r, &task, d, holder, now)),
                };
            }
            let ttl = crate::duration_ms(ttl).max(1);
            let at_expiry = task
                .dedup
                .as_ref()
                .is_some_and(|d| d.release_point() == Release::AtExpiry);
            r.locks
                .insert(lock, (env.id.clone(), now.saturating_add(ttl), at_expiry));
        }
        // As the script decides: due after now (by the store's clock) waits in the scheduled set.
        let run_at = match task.due {
            Due::Now => now,
            Due::At(at) => at,
            Due::In(d) => now.saturating_add(d.max(0)),
        };
        let (state, run_at_ms) = if run_at > now {
            (TaskState::Scheduled, run_at)
        } else {
            (TaskState::Pending, now)
        };
        let info = TaskInfo {
            id: env.id.clone(),
            queue: env.queue.clone(),
            kind: env.kind.clone(),
            state,
            run_at_ms,
            outcome: EnqueueOutcome::Created,
        };
        let at = r.tasks.len();
        r.ids.insert(id_key, (at, fingerprint));
        r.tasks.push(RecordedTask {
            info: info.clone(),
            envelope: task.envelope,
            unique_ttl: task.unique_ttl,
        });
        Ok(info)
    }
}

impl Recorder {
    /// The answer to a deduplicated task whose key `holder` holds, as the Redis broker gives
    /// it. Tasks never start here, so a holder still recorded always waits: a replace or a
    /// debounce of the same kind gives it the new payload (a debounce also its new run time,
    /// now + delay but no later than its first enqueue + max wait).
    fn held(r: &mut Record, task: &NewTask, d: &Dedup, holder: String, now: i64) -> TaskInfo {
        let env = &task.envelope;
        let Some(&(i, _)) = r.ids.get(&(env.queue.clone(), holder.clone())) else {
            // A throttle's holder that a drain took away: finished, as far as a test can tell.
            return TaskInfo {
                id: holder,
                queue: env.queue.clone(),
                kind: env.kind.clone(),
                state: TaskState::Completed,
                run_at_ms: now,
                outcome: EnqueueOutcome::Duplicate,
            };
        };
        let stored = &mut r.tasks[i];
        let same_kind = stored.envelope.kind == env.kind;
        let outcome = match d.dedup_mode() {
            DedupMode::Replace if same_kind => {
                stored.envelope.payload = env.payload.clone();
                EnqueueOutcome::Replaced
            }
            DedupMode::Debounce { delay, max_wait } if same_kind => {
                stored.envelope.payload = env.payload.clone();
                let first = stored.envelope.enqueued_at_ms;
                let at = now
                    .saturating_add(crate::duration_ms(delay))
                    .min(first.saturating_add(crate::duration_ms(max_wait)));
                (stored.info.state, stored.info.run_at_ms) = if at > now {
                    (TaskState::Scheduled, at)
                } else {
                    (TaskState::Pending, now)
                };
                EnqueueOutcome::Extended
            }
            _ => EnqueueOutcome::Duplicate,
        };
        TaskInfo {
            outcome,
            ..stored.info.clone()
        }
    }
}

impl Enqueue for Recorder {
    async fn enqueue(
        &self,
        tasks: Vec<NewTask>,
    ) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError> {
        let now = now_ms();
        let mut r = self.lock();
        Ok(tasks
            .into_iter()
            .map(|t| Self::store(&mut r, t, now))
            .collect())
    }
}
