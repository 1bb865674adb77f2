//! Groups: fan-out / fan-in. N member tasks and a callback task enqueued once, when every
//! member has finished (succeeded or dead-lettered); like any task, it then runs at least once.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::flow::{
    callback_task_id, flow_task_id, Flow, GroupCallback, GroupLink, StepSpec, COUNTS_PLACEHOLDER,
    DEFAULT_GROUP_TTL,
};
use crate::{
    encode_args, new_task_id, now_ms, BrokerError, Client, DecodeError, Enqueue, EnqueueOptions,
    Flows, GroupInfo, GroupRecord, GroupState, MemberPage, MemberResult, NewTask, QueueName,
    TaskArgs,
};

/// Members enqueued per broker call by [`Client::enqueue_group`] (the broker pipelines each call
/// in script calls of 125 tasks).
const MEMBER_BATCH: usize = 5_000;

/// A group of member tasks and a callback, enqueued with [`Client::enqueue_group`].
///
/// Member `i` gets the task id `<group id>:<i>`, the callback `<group id>:cb`. The group's
/// record lives in the callback's queue. A worker reports each member's outcome to the record
/// (one atomic script, idempotent by member) before it acknowledges or dead-letters the member;
/// the report that completes the count enqueues the callback in the same step, so the callback
/// is enqueued exactly once even when members run twice or workers die between a report and an
/// ack. The callback reads the counts with the worker's `Context::group`; with
/// [`Group::collect_results`] the members' results stay readable with
/// [`Client::group_results`] (in pages, never inside the callback's envelope).
///
/// A member counts as failed when it is dead-lettered by its worker or by the recoverer (its
/// workers were lost too often). The recoverer's dead letter is recorded in the queue's reclaim
/// outbox in the same script, and reported from there until a report succeeds, so a recoverer
/// that dies right after the dead letter still leaves the member counted (by the next pass of
/// any server's recoverer). A member whose envelope no longer decodes cannot name its
/// group and is never counted: the group then does not fire (and expires with its TTL).
/// The first outcome reported for a member counts: a dead-lettered member that an operator runs
/// again does not change its group's counts, and neither does a member reported failed whose
/// dead letter then found its lease stale and that succeeded on its next delivery.
/// An operator who deletes or archives a member that has not finished (inspector, CLI,
/// console) takes it out of the count: the group then does not fire. Run an archived member
/// again instead, or enqueue a new group. An operator's cancel of a running member only fires
/// its handler's cancellation: what the handler returns settles and counts the member as
/// usual (an error is retried, `skip_retry` counts it as failed), and the group waits for it.
/// Members take no task id and no unique lock; the callback takes no unique lock, and its run
/// time options are ignored (it runs when the group finishes).
#[derive(Debug)]
pub struct Group {
    id: Option<String>,
    callback: Result<NewTask, BrokerError>,
    members: Vec<Result<StepSpec, BrokerError>>,
    collect: bool,
    ttl: Duration,
}

impl Group {
    /// A group whose callback runs `callback` under `opts`, with a random id and no members yet.
    pub fn new<T: TaskArgs>(callback: &T, opts: EnqueueOptions) -> Self {
        let opts = T::default_options().merge(opts);
        let callback =
            if opts.unique_ttl.is_some() || opts.dedup.is_some() || opts.task_id.is_some() {
                Err(BrokerError::InvalidOption(
                    "a group callback takes neither a task id nor a unique lock".into(),
                ))
            } else {
                encode_args(callback).and_then(|p| NewTask::build(T::KIND, p, opts, now_ms()))
            };
        Self {
            id: None,
            callback,
            members: Vec::new(),
            collect: false,
            ttl: DEFAULT_GROUP_TTL,
        }
    }

    /// Use this group id instead of a random one: calling [`Client::enqueue_group`] again with
    /// the same group (a producer that crashed half-way) completes it without doubling members.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Adds a member running `args` under `opts` (laid over `T`'s default options).
    pub fn member<T: TaskArgs>(mut self, args: &T, opts: EnqueueOptions) -> Self {
        let opts = T::default_options().merge(opts);
        self.members
            .push(encode_args(args).and_then(|p| StepSpec::new(T::KIND, p, opts)));
        self
    }

    /// Adds many members of one type.
    pub fn members<T: TaskArgs>(
        mut self,
        items: impl IntoIterator<Item = (T, EnqueueOptions)>,
    ) -> Self {
        for (args, opts) in items {
            self = self.member(&args, opts);
        }
        self
    }

    /// Keep every member's result (readable with [`Client::group_results`] until the group's
    /// TTL runs out after the callback fired).
    pub fn collect_results(mut self) -> Self {
        self.collect = true;
        self
    }

    /// How long the group's record and results live, from its creation until the callback
    /// fires and again from then (default [`DEFAULT_GROUP_TTL`], 7 days). A group whose members
    /// have not all finished by then never fires.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Members so far.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True before the first member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

impl MemberResult {
    /// The member's result decoded as `R`: None when it failed or returned none (or the group
    /// did not collect results).
    pub fn decode<R: DeserializeOwned>(&self) -> Option<Result<R, DecodeError>> {
        match &self.outcome {
            Ok(bytes) if !bytes.is_empty() => {
                Some(
                    rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Payload {
                        kind: "group member result".into(),
                        reason: e.to_string(),
                    }),
                )
            }
            _ => None,
        }
    }
}

impl<B: Enqueue + Flows> Client<B> {
    /// Creates the group's record, then enqueues its members (in batches). Fails with
    /// [`BrokerError::InvalidOption`] for a group without members, and as [`Client::enqueue`]
    /// does for a member that cannot be enqueued. Calling it again with the same
    /// [`Group::id`] after an error is safe for the group: the record is recognised, and the
    /// members still waiting or running are not doubled. A member that already finished and was
    /// deleted (no retention) is written and run again; its group does not count it twice (the
    /// first outcome reported for a member stands), but its handler runs twice, as under
    /// at-least-once delivery.
    pub async fn enqueue_group(&self, group: Group) -> Result<GroupInfo, BrokerError> {
        if group.members.is_empty() {
            return Err(BrokerError::InvalidOption(
                "a group needs at least one member".into(),
            ));
        }
        let id = group.id.unwrap_or_else(new_task_id);
        let mut callback = group.callback?;
        let queue = QueueName::new(callback.envelope.queue.as_str())?;
        let total = group.members.len() as u64;
        let callback_id = callback_task_id(&id);
        crate::names::check_explicit_id(&callback_id)?;
        crate::names::check_explicit_id(&flow_task_id(&id, total))?;
        callback.envelope.id = callback_id.clone();
        callback.explicit_id = true;
        callback.envelope.flow = Some(Box::new(Flow {
            callback: Some(GroupCallback {
                id: id.clone(),
                total,
                collect: group.collect,
                counts: COUNTS_PLACEHOLDER.to_string(),
            }),
            ..Flow::default()
        }));
        let specs = group.members.into_iter().collect::<Result<Vec<_>, _>>()?;
        for spec in &specs {
            QueueName::new(spec.queue.as_str())?;
        }
        self.broker()
            .open_group(&GroupRecord {
                id: id.clone(),
                queue: queue.clone(),
                total,
                callback,
                collect: group.collect,
                ttl: group.ttl,
            })
            .await?;
        let now = now_ms();
        let mut specs = specs.into_iter().enumerate().peekable();
        while specs.peek().is_some() {
            let batch: Vec<NewTask> = specs
                .by_ref()
                .take(MEMBER_BATCH)
                .map(|(i, spec)| {
                    let flow = Flow {
                        member: Some(GroupLink {
                            id: id.clone(),
                            queue: queue.to_string(),
                            index: i as u64,
                            collect: group.collect,
                        }),
                        ..Flow::default()
                    };
                    spec.task(flow_task_id(&id, i as u64), now, flow)
                })
                .collect();
            for r in self.broker().enqueue(batch).await? {
                r?;
            }
        }
        Ok(GroupInfo {
            id,
            queue,
            callback_id,
            total,
        })
    }

    /// The group's counts so far and whether its callback was enqueued; None once the record
    /// expired (or for an unknown group).
    pub async fn group_status(&self, group: &GroupInfo) -> Result<Option<GroupState>, BrokerError> {
        self.broker().group_state(&group.queue, &group.id).await
    }

    /// One page of the group's member outcomes (results only with
    /// [`Group::collect_results`]), from `cursor` (0 for the first page; then the page's
    /// `next`). About `count` members per page; read a 100k group in pages of a few thousand.
    pub async fn group_results(
        &self,
        group: &GroupInfo,
        cursor: u64,
        count: usize,
    ) -> Result<MemberPage, BrokerError> {
        self.broker()
            .group_results(&group.queue, &group.id, cursor, count)
            .await
    }
}
