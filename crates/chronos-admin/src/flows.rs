//! Chains and groups as an operator follows them from one of their tasks: where a chain
//! stands (each step's task and state, the current step), and how far a group is (members
//! done and failed, its callback and its state), with a page of member outcomes.

use chronos_broker::{
    callback_task_id, flow_task_id, ChainInfo, ChainStatus, Flows, Inspect, Operate, QueueName,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;

/// One chain step as seen from the task the operator looks at.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StepRow {
    /// Its index, from 0.
    pub index: u32,
    /// Its task id (`<chain>:<index>`).
    pub task_id: String,
    /// Its queue: known for the task looked at and the steps after it; for earlier steps, the
    /// same queue is assumed (a chain whose steps change queues shows them as not found).
    pub queue: String,
    /// Its state now: None for a step not enqueued yet, `gone` when no record is found.
    pub state: Option<String>,
}

/// A chain, from one of its steps.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ChainView {
    /// The chain id.
    pub id: String,
    /// The step looked at.
    pub step: u32,
    /// Steps in the chain.
    pub total: u32,
    /// Where it stands: `running step N (state)`, `succeeded`, `failed at step N: error`, or
    /// `unknown` (records gone).
    pub status: String,
    /// Every step.
    pub steps: Vec<StepRow>,
}

/// A group, from one of its members or its callback.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GroupView {
    /// The group id.
    pub id: String,
    /// The callback's queue, which holds the group's record.
    pub queue: String,
    /// Members in the group.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members dead-lettered.
    pub failed: u64,
    /// Whether the callback was enqueued.
    pub fired: bool,
    /// The callback's task id.
    pub callback_id: String,
    /// The callback task's state now (None before it is enqueued, `gone` once no record is
    /// left).
    pub callback_state: Option<String>,
    /// The member looked at (its index), if a member was.
    pub member: Option<u64>,
    /// Whether the members' results are kept.
    pub collect: bool,
}

/// The flow a task belongs to.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub enum FlowView {
    /// A chain step.
    Chain(ChainView),
    /// A group member or callback.
    Group(GroupView),
}

/// One member's outcome as its group kept it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MemberRow {
    /// Its index.
    pub index: u64,
    /// Its task id (`<group>:<index>`).
    pub task_id: String,
    /// None when it succeeded, else its last error.
    pub error: Option<String>,
}

impl<B: Inspect + Operate + Flows + 'static> Admin<B> {
    /// The chains and groups task `id` of queue `name` belongs to: none for a plain task or
    /// one whose envelope does not decode. [`AdminError::QueueNotFound`] or
    /// [`AdminError::TaskNotFound`] when the queue or the task does not exist.
    pub async fn flow_of(&self, name: &str, id: &str) -> Result<Vec<FlowView>, AdminError> {
        let q = self.require_queue(name).await?;
        let Some(rec) = self.broker.task(&q, id).await? else {
            return Err(AdminError::TaskNotFound {
                queue: name.to_string(),
                id: id.to_string(),
            });
        };
        let Some(flow) = rec.envelope.ok().and_then(|e| e.flow) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        if let Some(c) = &flow.chain {
            out.push(FlowView::Chain(self.chain_view(&q, c).await?));
        }
        if let Some(m) = &flow.member {
            out.push(FlowView::Group(
                self.group_view(&m.queue, &m.id, Some(m.index), m.collect)
                    .await?,
            ));
        }
        if let Some(cb) = &flow.callback {
            out.push(FlowView::Group(
                self.group_view(name, &cb.id, None, cb.collect).await?,
            ));
        }
        Ok(out)
    }

    async fn chain_view(
        &self,
        q: &QueueName,
        c: &chronos_broker::ChainLink,
    ) -> Result<ChainView, AdminError> {
        let mut steps = Vec::new();
        for i in 0..c.total {
            let queue = match i.checked_sub(c.step + 1) {
                // After this step: the queue its producer chose.
                Some(k) => c
                    .rest
                    .get(k as usize)
                    .map_or_else(|| q.to_string(), |s| s.queue.clone()),
                None => q.to_string(),
            };
            steps.push(StepRow {
                index: i,
                task_id: flow_task_id(&c.id, u64::from(i)),
                queue,
                state: None,
            });
        }
        let mut info = ChainInfo {
            id: c.id.clone(),
            steps: Vec::new(),
        };
        for s in &mut steps {
            let Ok(sq) = QueueName::new(s.queue.as_str()) else {
                continue;
            };
            info.steps.push((sq.clone(), s.task_id.clone()));
            let rec = self.broker.task(&sq, &s.task_id).await?;
            s.state = match rec {
                Some(r) => Some(r.state.as_str().to_string()),
                None if s.index <= c.step => Some("gone".to_string()),
                None => None,
            };
        }
        let status = match self.broker.chain_state(&info).await? {
            ChainStatus::Running { step, state } => {
                format!(
                    "running step {} of {} ({})",
                    step + 1,
                    c.total,
                    state.as_str()
                )
            }
            ChainStatus::Succeeded { .. } => "succeeded".to_string(),
            ChainStatus::Failed { step, error } => {
                format!("failed at step {}: {error}", step + 1)
            }
            _ => "unknown (its records are gone)".to_string(),
        };
        Ok(ChainView {
            id: c.id.clone(),
            step: c.step,
            total: c.total,
            status,
            steps,
        })
    }

    /// Group `id`, whose record lives in queue `queue` (its callback's), with its callback's
    /// state. A group without a record (expired after its callback ran, or never opened) reads
    /// as 0 members, not as an error.
    pub async fn group_view(
        &self,
        queue: &str,
        id: &str,
        member: Option<u64>,
        collect: bool,
    ) -> Result<GroupView, AdminError> {
        let q = QueueName::new(queue)?;
        let st = self.broker.group_state(&q, id).await?;
        let callback_id = callback_task_id(id);
        let callback_state = match self.broker.task(&q, &callback_id).await? {
            Some(r) => Some(r.state.as_str().to_string()),
            None if st.as_ref().is_some_and(|s| s.fired) => Some("gone".to_string()),
            None => None,
        };
        Ok(match st {
            Some(s) => GroupView {
                id: id.to_string(),
                queue: queue.to_string(),
                total: s.total,
                succeeded: s.succeeded,
                failed: s.failed,
                fired: s.fired,
                callback_id: s.callback_id,
                callback_state,
                member,
                collect,
            },
            None => GroupView {
                id: id.to_string(),
                queue: queue.to_string(),
                total: 0,
                succeeded: 0,
                failed: 0,
                fired: false,
                callback_id,
                callback_state,
                member,
                collect,
            },
        })
    }

    /// Up to `limit` member outcomes of group `id` (record in queue `queue`), by index, each
    /// once; members still running have none yet, and a group without a record has none.
    pub async fn group_members(
        &self,
        queue: &str,
        id: &str,
        limit: usize,
    ) -> Result<Vec<MemberRow>, AdminError> {
        let q = QueueName::new(queue)?;
        let mut out = Vec::new();
        let mut cursor = 0u64;
        loop {
            let page = self.broker.group_results(&q, id, cursor, 200).await?;
            for m in page.members {
                if out.iter().any(|r: &MemberRow| r.index == m.index) {
                    continue;
                }
                out.push(MemberRow {
                    index: m.index,
                    task_id: flow_task_id(id, m.index),
                    error: m.outcome.err(),
                });
            }
            match page.next {
                Some(n) if out.len() < limit => cursor = n,
                _ => break,
            }
        }
        out.sort_by_key(|r| r.index);
        out.truncate(limit);
        Ok(out)
    }
}
