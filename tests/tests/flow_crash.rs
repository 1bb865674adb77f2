//! Chains and groups survive worker processes killed at chosen points.
//!
//! * A chain step's worker is SIGKILLed while the step runs (it blocks on a key the test
//!   controls), and the next worker aborts right after it enqueued the step's successor, before
//!   its ack: the step runs again and the chain finishes with every step's successor enqueued
//!   once. Had the successor been enqueued after the ack, the step would not run a third time;
//!   had its enqueue not been idempotent, the last step would run twice.
//! * A group member's worker aborts right after the member's report to its group, before its
//!   ack (a chosen member, or whichever report fired the callback): the member runs again, and
//!   the callback runs exactly once with the right counts. Had the report come after the ack,
//!   the member would not run again; had it not been idempotent, the counts would be off or the
//!   callback would run twice.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use chronos::fred::clients::Client as Redis;
use chronos::fred::interfaces::{HashesInterface, KeysInterface};
use chronos::prelude::*;
use chronos::{Chain, ChainStatus, Group, Inspect, QueueName, TaskState};
use chronos_tests::{
    callback_counts_key, callback_runs_key, killed_key, release_key, runs_key, Collect, FlowStep,
    Member,
};

/// A worker process, SIGKILLed when dropped (so a failing test leaves none behind).
struct Proc(Child);

impl Proc {
    fn spawn(url: &str, ns: &str, queues: &str, fault: Option<(&str, &str)>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronos-test-flow-worker"));
        cmd.env("CHRONOS_REDIS_URL", url)
            .env("CHRONOS_NS", ns)
            .env("CHRONOS_QUEUES", queues)
            .stdout(Stdio::null());
        if let Some((k, v)) = fault {
            cmd.env(k, v);
        }
        Self(cmd.spawn().expect("spawn worker"))
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// Waits for the process to exit on its own (a fault it was told to inject).
    async fn exited(&mut self, within: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                start.elapsed() < within,
                "worker did not exit within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Env {
    url: String,
    ns: String,
    broker: RedisBroker,
    redis: Redis,
}

async fn env() -> Env {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    let redis = broker.client().clone();
    Env {
        url,
        ns,
        broker,
        redis,
    }
}

impl Env {
    async fn count(&self, key: &str) -> i64 {
        self.redis
            .get::<Option<i64>, _>(key)
            .await
            .expect("get")
            .unwrap_or(0)
    }

    async fn runs(&self, task_id: &str) -> i64 {
        self.count(&runs_key(&self.ns, task_id)).await
    }

    async fn state(&self, queue: &str, id: &str) -> Option<TaskState> {
        let queue = QueueName::new(queue).expect("queue");
        self.broker
            .task(&queue, id)
            .await
            .expect("task")
            .map(|t| t.state)
    }

    /// The worker's start mark of task `id` is in: its record says active. The task reads
    /// active to an operator as soon as a worker fetched it (an operator must not take it),
    /// before the mark; a kill before the mark costs no attempt.
    async fn marked(&self, queue: &str, id: &str) -> bool {
        let q = QueueName::new(queue).expect("queue");
        let state: Option<String> = self
            .redis
            .hget(
                self.broker.keyspace().queue(&q).task(id),
                chronos_protocol::STATE,
            )
            .await
            .expect("hget");
        state.as_deref() == Some("active")
    }

    /// The task is still held, not acknowledged: pending or active (a quick handler ends
    /// before its start mark is sent, so a delivery in a worker's hands may still read
    /// pending; an acknowledged step would read completed, an acknowledged member be gone).
    async fn unacked(&self, queue: &str, id: &str) -> bool {
        matches!(
            self.state(queue, id).await,
            Some(TaskState::Pending | TaskState::Active)
        )
    }

    async fn killed_on(&self) -> Option<String> {
        self.redis
            .get::<Option<String>, _>(killed_key(&self.ns))
            .await
            .expect("get")
    }
}

#[tokio::test]
async fn a_chain_finishes_once_through_a_worker_killed_mid_step_and_one_dead_before_its_ack() {
    let e = env().await;
    let client = Client::new(e.broker.clone());
    let step = |n, block| FlowStep { n, block };
    let info = client
        .enqueue_chain(
            Chain::new()
                .then(&step(1, false), EnqueueOptions::new())
                .then(&step(2, true), EnqueueOptions::new())
                // The last step's queue is served by the third worker only, so it cannot run
                // in the second one in the moment between its enqueue and the abort.
                .then(&step(3, false), EnqueueOptions::new().queue("last")),
        )
        .await
        .expect("chain");
    let ids: Vec<String> = info.steps.iter().map(|(_, id)| id.clone()).collect();

    // 1. The first worker runs step 0, enqueues step 1 and blocks in it: SIGKILL it there.
    let mut first = Proc::spawn(&e.url, &e.ns, "default", None);
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "step 1 runs and is marked started",
        || async { e.runs(&ids[1]).await == 1 && e.marked("default", &ids[1]).await },
    )
    .await;
    first.kill();
    assert_eq!(e.runs(&ids[0]).await, 1);
    assert_eq!(
        e.state("last", &ids[2]).await,
        None,
        "no successor before step 1 succeeded"
    );

    // 2. The second worker recovers step 1, lets it finish, enqueues step 2 and dies before
    //    acknowledging step 1.
    let _: () = e
        .redis
        .set(release_key(&e.ns, &ids[1]), 1, None, None, false)
        .await
        .expect("release");
    let mut second = Proc::spawn(
        &e.url,
        &e.ns,
        "default",
        Some(("CHRONOS_KILL_AFTER_SUCCESSOR", &ids[2])),
    );
    let status = second.exited(Duration::from_secs(30)).await;
    assert!(!status.success(), "the second worker aborted: {status:?}");
    assert_eq!(e.killed_on().await.as_deref(), Some(ids[2].as_str()));
    assert_eq!(e.runs(&ids[1]).await, 2);
    assert!(
        e.unacked("default", &ids[1]).await,
        "step 1 not acknowledged"
    );
    assert_eq!(e.state("last", &ids[2]).await, Some(TaskState::Pending));

    // 3. The third worker runs step 1 a third time (its successor is not enqueued again) and
    //    then step 2.
    let mut third = Proc::spawn(&e.url, &e.ns, "default,last", None);
    // Step 2 may finish first: step 1 runs again only once its lease was idle for the
    // recoverer's minimum.
    let default = QueueName::new("default").expect("queue");
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "the chain succeeds and step 1 settles",
        || async {
            let s = e.broker.queue_stats(&default).await.expect("stats");
            s.pending + s.active + s.retry == 0
                && matches!(
                    client.chain_status(&info).await.expect("status"),
                    ChainStatus::Succeeded { .. }
                )
        },
    )
    .await;
    let status = client.chain_status(&info).await.expect("status");
    assert_eq!(
        status.result::<u64>().map(|r| r.expect("decodes")),
        Some(123)
    );
    assert_eq!(
        e.runs(&ids[1]).await,
        3,
        "step 1 ran again after the crash before its ack"
    );
    assert_eq!(
        e.runs(&ids[2]).await,
        1,
        "step 2 was enqueued and ran exactly once"
    );
    let last = QueueName::new("last").expect("queue");
    let stats = e.broker.queue_stats(&last).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.processed), (0, 0, 1));
    third.kill();
}

/// Runs a 20-member group (members 4, 9, 14, 19 fail) through a first worker that aborts on
/// `fault` and a second that finishes; returns the id of the member the first died on.
async fn group_through_a_crash(e: &Env, fault: (&str, &str)) -> String {
    let client = Client::new(e.broker.clone());
    let group = Group::new(&Collect, EnqueueOptions::new().queue("cb"))
        .members((0..20).map(|n| (Member { n }, EnqueueOptions::new())));
    let info = client.enqueue_group(group).await.expect("group");

    // The first worker does not serve the callback's queue, so the callback cannot run there
    // in the moment between its enqueue and the abort.
    let mut first = Proc::spawn(&e.url, &e.ns, "default", Some(fault));
    let status = first.exited(Duration::from_secs(30)).await;
    assert!(!status.success(), "the first worker aborted: {status:?}");
    let killed = e.killed_on().await.expect("the worker says where it died");
    assert_eq!(e.runs(&killed).await, 1);
    assert!(
        e.unacked("default", &killed).await,
        "the member was reported but not acknowledged"
    );
    assert_eq!(e.count(&callback_runs_key(&e.ns)).await, 0);

    let mut second = Proc::spawn(&e.url, &e.ns, "default,cb", None);
    let cb = QueueName::new("cb").expect("queue");
    let members = QueueName::new("default").expect("queue");
    chronos_testkit::eventually(Duration::from_secs(30), "every task settled", || async {
        let m = e.broker.queue_stats(&members).await.expect("stats");
        let c = e.broker.queue_stats(&cb).await.expect("stats");
        m.pending + m.active + m.retry == 0 && c.processed == 1 && c.pending + c.active == 0
    })
    .await;
    second.kill();

    assert_eq!(
        e.runs(&killed).await,
        2,
        "the member ran again after the crash before its ack"
    );
    assert_eq!(
        e.count(&callback_runs_key(&e.ns)).await,
        1,
        "the callback ran exactly once"
    );
    let counts: Option<String> = e.redis.get(callback_counts_key(&e.ns)).await.expect("get");
    assert_eq!(counts.as_deref(), Some("16:4"));
    let state = client
        .group_status(&info)
        .await
        .expect("status")
        .expect("record");
    assert_eq!((state.succeeded, state.failed, state.fired), (16, 4, true));
    let stats = e.broker.queue_stats(&members).await.expect("stats");
    assert_eq!(stats.archived, 4);
    killed
}

#[tokio::test]
async fn a_group_callback_runs_once_when_a_worker_dies_between_a_member_report_and_its_ack() {
    let e = env().await;
    let killed = group_through_a_crash(&e, ("CHRONOS_KILL_AFTER_MEMBER", "7")).await;
    assert!(killed.ends_with(":7"));
}

#[tokio::test]
async fn a_group_callback_runs_once_when_the_worker_that_fired_it_dies_before_its_ack() {
    let e = env().await;
    group_through_a_crash(&e, ("CHRONOS_KILL_ON_FIRE", "1")).await;
}

/// A member whose worker is SIGKILLed on its last allowed attempt is dead-lettered by the next
/// worker's recoverer, and counted as failed: the callback still runs, once.
#[tokio::test]
async fn a_member_the_recoverer_dead_letters_counts_as_failed() {
    let e = env().await;
    let client = Client::new(e.broker.clone());
    let group = Group::new(&Collect, EnqueueOptions::new().queue("cb"))
        .member(
            &FlowStep { n: 5, block: true },
            EnqueueOptions::new().max_retry(0),
        )
        .member(&Member { n: 1 }, EnqueueOptions::new());
    let info = client.enqueue_group(group).await.expect("group");
    let blocked = format!("{}:0", info.id);

    let mut first = Proc::spawn(&e.url, &e.ns, "default", None);
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "the member runs and is marked started",
        || async { e.runs(&blocked).await == 1 && e.marked("default", &blocked).await },
    )
    .await;
    first.kill();

    // Never released: the member's only attempt was lost with its worker.
    let mut second = Proc::spawn(&e.url, &e.ns, "default,cb", None);
    chronos_testkit::eventually(Duration::from_secs(30), "the callback runs", || async {
        e.count(&callback_runs_key(&e.ns)).await == 1
    })
    .await;
    second.kill();
    assert_eq!(
        e.runs(&blocked).await,
        1,
        "dead-lettered without another run"
    );
    assert_eq!(
        e.state("default", &blocked).await,
        Some(TaskState::Archived)
    );
    let counts: Option<String> = e.redis.get(callback_counts_key(&e.ns)).await.expect("get");
    assert_eq!(counts.as_deref(), Some("1:1"));
    assert_eq!(e.count(&callback_runs_key(&e.ns)).await, 1);
}
