//! The producer and the operators: every call the run makes to chronos through its public API
//! (`Client`, `Operate`, `Inspect`, `Tenants`, `Settings`, `Events`, `RuntimeSchedules` and
//! `RedisBroker::unblock`), each recorded in the model with the time it was answered.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Result;
use chronos::prelude::*;
use chronos::{
    BrokerError, Dedup, DedupMode, EnqueueOutcome, Events as _, Operate as _, QueueName, Setting,
    Settings as _, SettingsChange, TaskAction, TaskEdit, TaskInfo, TaskState, TenantChange,
    Tenants as _,
};

use crate::faults::lock;
use crate::gen::{DedupSpec, Member, Op, Shape};
use crate::job::{queue, Act, Job};
use crate::journal::now_us;
use crate::model::{EnqueueAck, Fate, Model, OpRecord, Role};

/// What the producer and the operators share.
#[derive(Clone)]
pub(crate) struct Hands {
    /// The producer's client, through its proxy (its replies can be lost).
    pub(crate) client: Client<RedisBroker>,
    /// The operators' broker, straight to Redis.
    pub(crate) broker: RedisBroker,
    pub(crate) model: Arc<Mutex<Model>>,
}

impl std::fmt::Debug for Hands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hands").finish_non_exhaustive()
    }
}

fn q(name: &str) -> Result<QueueName> {
    Ok(QueueName::new(name)?)
}

/// The enqueue options a shape asks for.
fn options(s: &Shape) -> Result<EnqueueOptions> {
    let mut o = EnqueueOptions::new().queue(s.queue).max_retry(s.max_retry);
    if let Some(id) = &s.task_id {
        o = o.task_id(id.clone());
    }
    if let Some(d) = s.delay_ms {
        o = o.process_in(Duration::from_millis(d));
    }
    if let Some(p) = s.priority {
        o = o.priority(Priority::level(p)?);
    }
    if s.lifo {
        o = o.lifo();
    }
    if let Some(t) = &s.tenant {
        o = o.tenant(t.clone());
    }
    if let Some(d) = &s.dedup {
        o = o.dedup(match d {
            DedupSpec::Reject(k) => Dedup::key(k.clone()).mode(DedupMode::Reject),
            DedupSpec::Replace(k) => Dedup::key(k.clone()).mode(DedupMode::Replace),
            DedupSpec::Debounce {
                key,
                delay_ms,
                max_wait_ms,
            } => Dedup::key(key.clone()).mode(DedupMode::Debounce {
                delay: Duration::from_millis(*delay_ms),
                max_wait: Duration::from_millis(*max_wait_ms),
            }),
            DedupSpec::Throttle { key, window_ms } => {
                Dedup::key(key.clone()).mode(DedupMode::Throttle {
                    window: Duration::from_millis(*window_ms),
                })
            }
        });
    }
    if s.unique {
        o = o.unique(Duration::from_secs(120));
    }
    if let Some(k) = &s.rate_key {
        o = o.rate_key(k.clone());
    }
    if s.retention {
        o = o.retention(Duration::from_secs(600));
    }
    if s.discard {
        o = o.discard_on_dead_letter();
    }
    if let Some(t) = s.timeout_ms {
        o = o.timeout(Duration::from_millis(t));
    }
    Ok(o)
}

fn answer(info: &TaskInfo) -> String {
    format!("{:?} ({:?})", info.outcome, info.state)
}

impl Hands {
    /// Enqueues one planned task and records the answer. A call that fails without an answer
    /// is sent again only for an explicit id (safe: the same id and payload is the same task);
    /// otherwise the task may or may not exist, and the model says so.
    pub(crate) async fn enqueue(&self, s: Shape, resend: bool) -> Result<()> {
        let key = s.key;
        if !resend {
            lock(&self.model).register(s.clone(), Role::Single);
        }
        let job = Job {
            key,
            gen: 0,
            act: s.act,
        };
        let opts = options(&s)?;
        let sent = now_us();
        let mut tries = 0;
        let result = loop {
            let r = self.client.enqueue(&job, opts.clone()).await;
            tries += 1;
            match &r {
                Err(BrokerError::Store(_)) if s.task_id.is_some() && tries < 20 => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                _ => break r,
            }
        };
        let at = now_us();
        let mut m = lock(&self.model);
        match result {
            Ok(info) => {
                let ack = EnqueueAck {
                    sent_us: sent,
                    at_us: at,
                    answer: answer(&info),
                    due_us: Some(info.run_at_ms * 1000),
                };
                let fate = match info.outcome {
                    EnqueueOutcome::Created => Fate::Run,
                    EnqueueOutcome::Duplicate => {
                        Fate::NotCreated(format!("duplicate of {}", info.id))
                    }
                    // The holder now carries this payload: the payload it carried before must
                    // not start any more.
                    _ => {
                        for k in m.keys_of(s.queue, &info.id).to_vec() {
                            if k != key && m.tasks.get(&k).is_some_and(|t| t.fate == Fate::Run) {
                                if let Some(t) = m.tasks.get_mut(&k) {
                                    t.fate = Fate::Superseded { by: key, at };
                                }
                                m.note(k, at, format!("payload replaced by key {key}"));
                            }
                        }
                        Fate::Run
                    }
                };
                if resend && info.outcome == EnqueueOutcome::Created {
                    // A unique task's second enqueue was let in: the checker decides whether
                    // the first still held the lock.
                    m.note(
                        key,
                        at,
                        format!("unique re-send answered {} (id {})", answer(&info), info.id),
                    );
                    m.set_id(key, &info.id);
                    if let Some(t) = m.tasks.get_mut(&key) {
                        t.resent_as = Some(info.id.clone());
                    }
                } else if resend {
                    m.note(
                        key,
                        at,
                        format!("unique re-send answered {}", answer(&info)),
                    );
                } else {
                    m.enqueued(key, ack, Some(&info.id), fate);
                }
            }
            Err(e) => {
                let refused = matches!(
                    e,
                    BrokerError::DuplicateTask { .. } | BrokerError::TenantFull { .. }
                );
                if resend {
                    m.note(key, at, format!("unique re-send answered {e}"));
                } else {
                    let ack = EnqueueAck {
                        sent_us: sent,
                        at_us: at,
                        answer: format!("error: {e}"),
                        due_us: None,
                    };
                    let fate = if refused {
                        Fate::NotCreated(e.to_string())
                    } else {
                        Fate::Unknown
                    };
                    m.enqueued(key, ack, None, fate);
                }
            }
        }
        Ok(())
    }

    /// Enqueues a chain of `steps` in the flow queue.
    pub(crate) async fn chain(&self, steps: Vec<Member>) -> Result<()> {
        let keys: Vec<u64> = steps.iter().map(|m| m.key).collect();
        let mut chain = Chain::new().id(format!("ch{}", keys[0]));
        {
            let mut m = lock(&self.model);
            for (i, st) in steps.iter().enumerate() {
                let mut s = member_shape(st);
                s.queue = queue::FLOW;
                m.register(
                    s,
                    Role::Step {
                        chain: keys.clone(),
                        index: i,
                    },
                );
            }
        }
        for st in &steps {
            let job = Job {
                key: st.key,
                gen: 0,
                act: st.act,
            };
            chain = chain.then(
                &job,
                EnqueueOptions::new()
                    .queue(queue::FLOW)
                    .max_retry(st.max_retry),
            );
        }
        let sent = now_us();
        let r = self.client.enqueue_chain(chain).await;
        let at = now_us();
        let mut m = lock(&self.model);
        match r {
            Ok(info) => {
                for (i, (_, id)) in info.steps.iter().enumerate() {
                    let ack = EnqueueAck {
                        sent_us: sent,
                        at_us: at,
                        answer: if i == 0 {
                            "Created (chain)".into()
                        } else {
                            "later (chain step)".into()
                        },
                        due_us: (i == 0).then_some(at),
                    };
                    m.enqueued(keys[i], ack, Some(id), Fate::Run);
                }
            }
            Err(e) => {
                for k in &keys {
                    let ack = EnqueueAck {
                        sent_us: sent,
                        at_us: at,
                        answer: format!("error: {e}"),
                        due_us: None,
                    };
                    m.enqueued(*k, ack, None, Fate::Unknown);
                }
            }
        }
        Ok(())
    }

    /// Enqueues a group of `members` with a callback, in the flow queue.
    pub(crate) async fn group(&self, callback: u64, members: Vec<Member>) -> Result<()> {
        let keys: Vec<u64> = members.iter().map(|m| m.key).collect();
        let gid = format!("gr{callback}");
        {
            let mut m = lock(&self.model);
            for st in &members {
                let mut s = member_shape(st);
                s.queue = queue::FLOW;
                m.register(s, Role::Member { group: gid.clone() });
            }
            let mut cb = Shape::new_member(callback, Act::Callback, 3);
            cb.queue = queue::FLOW;
            m.register(
                cb,
                Role::Callback {
                    members: keys.clone(),
                },
            );
        }
        let cb = Job {
            key: callback,
            gen: 0,
            act: Act::Callback,
        };
        let group = Group::new(&cb, EnqueueOptions::new().queue(queue::FLOW))
            .id(gid.clone())
            .members(members.iter().map(|st| {
                (
                    Job {
                        key: st.key,
                        gen: 0,
                        act: st.act,
                    },
                    EnqueueOptions::new()
                        .queue(queue::FLOW)
                        .max_retry(st.max_retry),
                )
            }));
        let sent = now_us();
        let r = self.client.enqueue_group(group).await;
        let at = now_us();
        let mut m = lock(&self.model);
        let all = keys.iter().copied().chain([callback]);
        match r {
            Ok(info) => {
                for (i, k) in all.enumerate() {
                    let id = if k == callback {
                        info.callback_id.clone()
                    } else {
                        format!("{}:{i}", info.id)
                    };
                    let ack = EnqueueAck {
                        sent_us: sent,
                        at_us: at,
                        answer: "Created (group)".into(),
                        due_us: (k != callback).then_some(at),
                    };
                    m.enqueued(k, ack, Some(&id), Fate::Run);
                }
            }
            Err(e) => {
                for k in all {
                    let ack = EnqueueAck {
                        sent_us: sent,
                        at_us: at,
                        answer: format!("error: {e}"),
                        due_us: None,
                    };
                    m.enqueued(k, ack, None, Fate::Unknown);
                }
            }
        }
        Ok(())
    }

    /// The queue and id of the task of model key `key`, once its enqueue was answered.
    fn target(&self, key: u64) -> Option<(String, String)> {
        let m = lock(&self.model);
        let t = m.tasks.get(&key)?;
        Some((t.shape.queue.to_string(), t.id.clone()?))
    }

    /// Acts on one task and records what it answered.
    async fn act_on(&self, op: &Op, key: u64, action: TaskAction) -> Result<()> {
        let Some((queue, id)) = self.target(key) else {
            return self.skipped(op, key, "no task id (enqueue not answered)");
        };
        let sent = now_us();
        let r = self.broker.act(&q(&queue)?, &id, action).await;
        self.record(
            op,
            Some(key),
            Some((queue, id)),
            sent,
            r.map(|o| format!("{o:?}")),
        )
    }

    fn skipped(&self, op: &Op, key: u64, why: &str) -> Result<()> {
        let at = now_us();
        lock(&self.model).operated(
            OpRecord {
                op: op.clone(),
                task: None,
                sent_us: at,
                ack_us: at,
                answer: format!("not sent: {why}"),
                done: false,
            },
            Some(key),
        );
        Ok(())
    }

    fn record(
        &self,
        op: &Op,
        key: Option<u64>,
        task: Option<(String, String)>,
        sent: i64,
        answer: Result<String, BrokerError>,
    ) -> Result<()> {
        let at = now_us();
        let (answer, done) = match answer {
            Ok(a) => {
                let done = a == "Done";
                (a, done)
            }
            Err(e) => (format!("error: {e}"), false),
        };
        lock(&self.model).operated(
            OpRecord {
                op: op.clone(),
                task,
                sent_us: sent,
                ack_us: at,
                answer,
                done,
            },
            key,
        );
        Ok(())
    }

    /// Carries out one operator action (those with a duration return once it is undone).
    pub(crate) async fn operate(&self, op: Op) -> Result<()> {
        match &op {
            Op::Delete(k) => self.act_on(&op, *k, TaskAction::Delete).await,
            Op::Archive(k) => self.act_on(&op, *k, TaskAction::Archive).await,
            Op::RunNow(k) => self.act_on(&op, *k, TaskAction::RunNow).await,
            Op::Cancel(k) => {
                // Cancel reaches active tasks only: wait for it to start.
                let Some((queue, id)) = self.target(*k) else {
                    return self.skipped(&op, *k, "no task id");
                };
                let qn = q(&queue)?;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                while tokio::time::Instant::now() < deadline {
                    let rec = self.broker.task(&qn, &id).await;
                    if matches!(rec, Ok(Some(ref r)) if r.state == TaskState::Active) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                self.act_on(&op, *k, TaskAction::Cancel).await
            }
            Op::Prioritize(k, level) => {
                let Some((queue, id)) = self.target(*k) else {
                    return self.skipped(&op, *k, "no task id");
                };
                let sent = now_us();
                let r = self
                    .broker
                    .prioritize(&q(&queue)?, &id, Priority::level(*level)?)
                    .await;
                self.record(
                    &op,
                    Some(*k),
                    Some((queue, id)),
                    sent,
                    r.map(|o| format!("{o:?}")),
                )
            }
            Op::Edit(k) => {
                let Some((queue, id)) = self.target(*k) else {
                    return self.skipped(&op, *k, "no task id");
                };
                let Some((gen, act)) = lock(&self.model)
                    .tasks
                    .get(k)
                    .map(|t| (t.gen + 1, t.shape.act))
                else {
                    return self.skipped(&op, *k, "not in the model");
                };
                let edit = TaskEdit::new()
                    .args(&Job { key: *k, gen, act })?
                    .run_at(SystemTime::now());
                let sent = now_us();
                let r = self.broker.edit(&q(&queue)?, &id, &edit).await;
                self.record(
                    &op,
                    Some(*k),
                    Some((queue, id)),
                    sent,
                    r.map(|o| format!("{o:?}")),
                )
            }
            Op::PauseQueue(name, ms) => {
                let qn = q(name)?;
                let sent = now_us();
                let r = self.broker.set_paused(&qn, true).await;
                lock(&self.model).open_window(name, None, "paused");
                self.record(&op, None, None, sent, r.map(|_| "paused".into()))?;
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                self.resume_queue(name).await
            }
            Op::PauseTenant(t, ms) => {
                let qn = q(queue::TENANT)?;
                let sent = now_us();
                let r = self
                    .broker
                    .change_tenant_settings(&qn, Some(t), &TenantChange::new().paused(Some(true)))
                    .await;
                lock(&self.model).open_window(queue::TENANT, Some(t), "paused");
                self.record(&op, None, None, sent, r.map(|_| "paused".into()))?;
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                self.resume_tenant(t).await
            }
            Op::TenantChange {
                tenant,
                cap,
                weight,
            } => {
                let qn = q(queue::TENANT)?;
                let sent = now_us();
                let r = self
                    .broker
                    .change_tenant_settings(
                        &qn,
                        Some(tenant),
                        &TenantChange::new().concurrency(*cap).weight(Some(*weight)),
                    )
                    .await;
                if r.is_ok() {
                    lock(&self.model)
                        .caps
                        .entry(tenant.clone())
                        .or_default()
                        .push((sent, *cap));
                }
                self.record(&op, None, None, sent, r.map(|s| format!("{s:?}")))
            }
            Op::LimitChange(n) => {
                let qn = q(queue::LIMIT)?;
                let sent = now_us();
                let r = self
                    .broker
                    .change_queue_settings(&qn, &SettingsChange::new().concurrency(Setting::On(*n)))
                    .await;
                if r.is_ok() {
                    lock(&self.model).limit_concurrency.push((sent, *n));
                }
                self.record(&op, None, None, sent, r.map(|s| format!("{s:?}")))
            }
            Op::Unblock(k) => {
                let qn = q(queue::BLOCK)?;
                let sent = now_us();
                let r = self.broker.unblock(&qn, None).await;
                self.record(&op, None, None, sent, r.map(|b| format!("lifted: {b}")))?;
                // The blocker itself waits for the block's old end: run it now.
                self.act_on(&Op::RunNow(*k), *k, TaskAction::RunNow).await
            }
            Op::EventsOff(ms) => {
                let qn = q(queue::PLAIN)?;
                let sent = now_us();
                let r = self.broker.set_events(&qn, false).await;
                lock(&self.model).close_window(queue::PLAIN, None, "events on");
                self.record(&op, None, None, sent, r.map(|_| "off".into()))?;
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                let sent = now_us();
                let r = self.broker.set_events(&qn, true).await;
                if r.is_ok() {
                    lock(&self.model).open_window(queue::PLAIN, None, "events on");
                }
                self.record(&op, None, None, sent, r.map(|_| "on".into()))
            }
            Op::Sweep => self.sweep().await,
        }
    }

    async fn resume_queue(&self, name: &str) -> Result<()> {
        let sent = now_us();
        let r = self.broker.set_paused(&q(name)?, false).await;
        lock(&self.model).close_window(name, None, "paused");
        self.record(
            &Op::PauseQueue(queue_static(name), 0),
            None,
            None,
            sent,
            r.map(|_| "resumed".into()),
        )
    }

    async fn resume_tenant(&self, t: &str) -> Result<()> {
        let sent = now_us();
        let r = self
            .broker
            .change_tenant_settings(
                &q(queue::TENANT)?,
                Some(t),
                &TenantChange::new().paused(Some(false)),
            )
            .await;
        lock(&self.model).close_window(queue::TENANT, Some(t), "paused");
        self.record(
            &Op::PauseTenant(t.to_string(), 0),
            None,
            None,
            sent,
            r.map(|_| "resumed".into()),
        )
    }

    /// The end of the load: every task still waiting for a far run time runs now.
    async fn sweep(&self) -> Result<()> {
        let far: Vec<u64> = {
            let m = lock(&self.model);
            m.tasks
                .iter()
                .filter(|(_, t)| {
                    t.fate == Fate::Run && t.shape.delay_ms.is_some_and(|d| d >= 60_000)
                })
                .map(|(k, _)| *k)
                .collect()
        };
        for k in far {
            self.act_on(&Op::RunNow(k), k, TaskAction::RunNow).await?;
        }
        Ok(())
    }
}

/// The static name of a queue of [`queue::ALL`].
fn queue_static(name: &str) -> &'static str {
    queue::ALL
        .iter()
        .map(|(q, _)| *q)
        .find(|q| *q == name)
        .unwrap_or(queue::PLAIN)
}

fn member_shape(m: &Member) -> Shape {
    Shape::new_member(m.key, m.act, m.max_retry)
}
