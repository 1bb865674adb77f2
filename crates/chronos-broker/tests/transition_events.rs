//! Every transition a task can make writes its event, in the call that makes it: one step per
//! transition (a worker's, the recoverer's and forwarder's, the throttles', an operator's, the
//! scheduler's and the flows'), each checked on its own, and every step that wrote the wrong
//! events reported together. Events that a step's setup writes (an enqueue before a retry, ...)
//! are read past, not checked again.

mod common;

use std::time::Duration;

use chronos_broker::{
    encode_args, now_ms, BackoffScope, Client, Completion, Consume, EnqueueOptions, Events, Flows,
    Group, KeyRate, Lease, LeaseId, MemberReport, NewTask, Operate, Priority, ProgressUpdate,
    QueueName, RedisBroker, Schedules, SettleExt, TaskAction, TaskEdit, Trigger,
};
use chronos_broker::{Maintain, ManageSchedules, Throttle};
use common::{broker, email, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

/// The stream read step by step: each check reads what was written since the last read.
struct Steps {
    b: RedisBroker,
    after: String,
    failures: Vec<String>,
    checked: usize,
}

impl Steps {
    /// The events of `task` written since the last read.
    async fn read(&mut self, task: &str) -> Vec<String> {
        let events = self
            .b
            .events_after(&q(), &self.after, 10_000)
            .await
            .expect("read events");
        if let Some(last) = events.last() {
            self.after = last.id.clone();
        }
        events
            .iter()
            .filter(|e| e.task_id == task)
            .map(|e| e.event.name().to_string())
            .collect()
    }

    /// Reads past what a step's setup wrote.
    async fn skip(&mut self) {
        self.read("").await;
    }

    /// `transition` of `task` wrote exactly `want` (in order) since the last read.
    async fn check(&mut self, transition: &str, task: &str, want: &[&str]) {
        let got = self.read(task).await;
        self.checked += 1;
        if got != want {
            self.failures.push(format!(
                "{transition}: task {task} wrote {got:?}, not {want:?}"
            ));
        }
    }
}

async fn enqueue(b: &RedisBroker, id: &str, opts: EnqueueOptions) {
    Client::new(b.clone())
        .enqueue(&email(1), opts.task_id(id))
        .await
        .expect("enqueue");
}

/// Fetches `id`'s delivery (the next one of the queue) without marking it started.
async fn fetch(b: &RedisBroker, id: &str) -> Lease {
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &q(), "w", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    b.close_reader(reader).await;
    let l = f.leases.into_iter().next().expect("a delivery");
    assert_eq!(l.id.task_id, id, "the queue's next delivery");
    l
}

/// Fetches `id`'s delivery and marks it started, as a worker does before its handler.
async fn started(b: &RedisBroker, id: &str) -> Lease {
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(b, &mut reader, &q(), "w", 1, Duration::ZERO).await;
    b.close_reader(reader).await;
    let l = f.leases.into_iter().next().expect("a delivery");
    assert_eq!(l.id.task_id, id, "the queue's next delivery");
    l
}

async fn complete(b: &RedisBroker, lease: LeaseId) {
    b.complete(
        &q(),
        &[Completion {
            lease,
            retention: None,
            result: None,
        }],
    )
    .await
    .expect("complete");
}

fn new_task(id: &str) -> NewTask {
    let payload = encode_args(&email(1)).expect("encode");
    NewTask::build(
        "email",
        payload,
        EnqueueOptions::new().task_id(id),
        now_ms(),
    )
    .expect("task")
}

#[tokio::test]
async fn every_transition_writes_its_event() {
    let b = broker().await;
    b.set_events(&q(), true).await.expect("events on");
    let mut s = Steps {
        b: b.clone(),
        after: b.last_event_id(&q()).await.expect("last"),
        failures: Vec::new(),
        checked: 0,
    };
    let none = EnqueueOptions::new;

    // A worker's transitions.
    enqueue(&b, "run", none()).await;
    s.check("enqueue", "run", &["enqueued"]).await;
    let l = started(&b, "run").await;
    s.check("start", "run", &["started"]).await;
    b.keep_alive(
        &q(),
        "w",
        std::slice::from_ref(&l.id.msg_id),
        &[ProgressUpdate {
            msg_id: l.id.msg_id.clone(),
            task_id: "run".into(),
            json: br#"{"percent":50}"#.to_vec(),
        }],
    )
    .await
    .expect("progress");
    s.check("progress", "run", &["progress"]).await;
    complete(&b, l.id).await;
    s.check("complete", "run", &["completed"]).await;

    enqueue(&b, "quick", none()).await;
    s.skip().await;
    let l = fetch(&b, "quick").await;
    complete(&b, l.id).await;
    s.check(
        "complete of an attempt never marked started",
        "quick",
        &["started", "completed"],
    )
    .await;

    enqueue(&b, "again", none()).await;
    let l = started(&b, "again").await;
    s.skip().await;
    assert!(b.retry(&l.id, Duration::ZERO, "boom").await.expect("retry"));
    s.check("retry", "again", &["retried"]).await;
    b.forward_due(&q(), 100).await.expect("forward");
    s.check("forward (retry -> ready)", "again", &["forwarded"])
        .await;
    let l = started(&b, "again").await;
    s.skip().await;
    b.snooze(&l.id, Duration::ZERO, 10).await.expect("snooze");
    s.check("snooze", "again", &["snoozed"]).await;
    b.forward_due(&q(), 100).await.expect("forward");
    s.check("forward (scheduled -> ready)", "again", &["forwarded"])
        .await;
    let l = started(&b, "again").await;
    s.skip().await;
    b.back_off(
        &l.id,
        &BackoffScope::Key("api".into()),
        Duration::from_secs(60),
    )
    .await
    .expect("back off");
    s.check("backoff", "again", &["throttled"]).await;

    // The throttles' deferrals: a delivery of a blocked key read by a blocking read (held),
    // one read by a fetch and checked (admit), and one whose key's window is full (admit).
    let reader_b = b.clone();
    let read = tokio::spawn(async move {
        let mut reader = reader_b.open_reader().await.expect("reader");
        let f = reader_b
            .fetch(&mut reader, &q(), "w", &[], 1, Duration::from_secs(3))
            .await
            .expect("fetch");
        reader_b.close_reader(reader).await;
        f
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    enqueue(&b, "held", none().rate_key("api")).await;
    let f = read.await.expect("join");
    assert!(f.leases.is_empty(), "the blocked key's delivery is held");
    s.check(
        "hold (a blocked key, a blocking read)",
        "held",
        &["enqueued", "deferred"],
    )
    .await;
    enqueue(&b, "kb", none().rate_key("api")).await;
    let l = fetch(&b, "kb").await;
    s.skip().await;
    let blocks_only = KeyRate {
        rate: 0,
        period: Duration::from_secs(1),
    };
    b.admit(&q(), &[(l.id, "api".to_string())], &blocks_only)
        .await
        .expect("admit");
    s.check("admit (a blocked key)", "kb", &["deferred"]).await;
    enqueue(&b, "k1", none().rate_key("cust")).await;
    enqueue(&b, "k2", none().rate_key("cust")).await;
    let (l1, l2) = (fetch(&b, "k1").await, fetch(&b, "k2").await);
    s.skip().await;
    let limit = KeyRate {
        rate: 1,
        period: Duration::from_secs(60),
    };
    let keyed = [(l1.id.clone(), "cust".to_string()), (l2.id, "cust".into())];
    b.admit(&q(), &keyed, &limit).await.expect("admit");
    s.check("admit (a full key)", "k2", &["deferred"]).await;
    b.start(&q(), std::slice::from_ref(&l1.id))
        .await
        .expect("start");
    complete(&b, l1.id).await;
    s.skip().await;

    enqueue(&b, "back", none()).await;
    let l = fetch(&b, "back").await;
    s.skip().await;
    b.requeue(&q(), std::slice::from_ref(&l.id))
        .await
        .expect("requeue");
    s.check("requeue", "back", &["requeued"]).await;
    let l = started(&b, "back").await;
    s.skip().await;
    b.dead_letter(&l.id, "bad address", true)
        .await
        .expect("dead");
    s.check("dead", "back", &["dead"]).await;

    enqueue(&b, "stop", none()).await;
    let l = started(&b, "stop").await;
    s.skip().await;
    b.cancel(&l.id, "customer left").await.expect("cancel");
    s.check("cancel", "stop", &["cancelled"]).await;

    // The recoverer: a started delivery whose worker went quiet.
    enqueue(&b, "lost", none()).await;
    started(&b, "lost").await;
    s.skip().await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    b.reclaim_idle(&q(), Duration::from_millis(100), 10)
        .await
        .expect("reclaim");
    s.check("reclaim", "lost", &["reclaimed"]).await;
    let l = started(&b, "lost").await;
    complete(&b, l.id).await;
    s.skip().await;

    // An operator's transitions.
    enqueue(&b, "op1", none()).await;
    enqueue(&b, "op2", none()).await;
    s.skip().await;
    b.act(&q(), "op1", TaskAction::Delete)
        .await
        .expect("delete");
    s.check("operator delete", "op1", &["deleted"]).await;
    b.act(&q(), "op2", TaskAction::Archive)
        .await
        .expect("archive");
    s.check("operator archive", "op2", &["archived"]).await;
    b.act(&q(), "op2", TaskAction::RunNow).await.expect("run");
    s.check("operator run", "op2", &["run_now"]).await;
    b.edit(
        &q(),
        "op2",
        &TaskEdit::new().run_in(Duration::from_secs(3600)),
    )
    .await
    .expect("edit");
    s.check("operator edit", "op2", &["edited"]).await;
    b.prioritize(&q(), "op2", Priority::level(1).expect("level"))
        .await
        .expect("prioritize");
    s.check("operator prioritize", "op2", &["prioritized"])
        .await;
    enqueue(&b, "op3", none()).await;
    let l = started(&b, "op3").await;
    s.skip().await;
    b.act(&q(), "op3", TaskAction::Cancel)
        .await
        .expect("cancel");
    s.check("operator cancel", "op3", &["cancel_requested"])
        .await;
    b.cancel(&l.id, "asked").await.expect("cancel");
    s.skip().await;

    // The scheduler's: a trigger fired, and a schedule run now.
    let epoch = b
        .acquire_leadership("t", "me", Duration::from_secs(30), 0)
        .await
        .expect("acquire")
        .expect("leader");
    let trigger = Trigger {
        schedule_id: "nightly".into(),
        at_ms: 1_000,
        task: new_task("nightly:1"),
        forbid_overlap: false,
        prev_task_id: None,
    };
    b.fire(&q(), epoch, vec![trigger], Duration::from_secs(60), 0)
        .await
        .expect("fire");
    s.check("scheduler fire", "nightly:1", &["enqueued"]).await;
    b.run_schedule(&q(), "nightly", "r1", new_task("nightly:now"))
        .await
        .expect("run schedule");
    s.check("schedule run now", "nightly:now", &["enqueued"])
        .await;

    // The flows': a chain's next step, a group's callback.
    b.enqueue_successor(new_task("chain:1"))
        .await
        .expect("successor");
    s.check("chain step", "chain:1", &["enqueued"]).await;
    let info = Client::new(b.clone())
        .enqueue_group(Group::new(&email(9), none()).members([(email(1), none())]))
        .await
        .expect("group");
    s.skip().await;
    b.report_member(&MemberReport {
        queue: info.queue.clone(),
        group: info.id.clone(),
        index: 0,
        succeeded: true,
        value: Vec::new(),
    })
    .await
    .expect("report");
    s.check("group callback", &info.callback_id, &["enqueued"])
        .await;

    assert_eq!(s.checked, 27, "every transition above was checked");
    assert!(
        s.failures.is_empty(),
        "transitions that wrote the wrong events:\n{}",
        s.failures.join("\n")
    );
}
