//! Chains and groups at the broker level, against a real Redis: the successor's enqueue and the
//! group bookkeeping are idempotent, and a group's callback is enqueued exactly once.

mod common;

use std::time::{Duration, Instant};

use chronos_broker::{
    chain_successor, Chain, ChainStatus, Client, Completion, Consume, EnqueueOptions, Flows, Group,
    GroupInfo, Inspect, MemberOutcome, MemberReport, Operate, QueueName, RedisBroker, SettleExt,
    TaskAction, TaskState,
};
use common::{broker, email, take};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

fn report(info: &GroupInfo, index: u64, succeeded: bool, value: &[u8]) -> MemberReport {
    MemberReport {
        queue: info.queue.clone(),
        group: info.id.clone(),
        index,
        succeeded,
        value: value.to_vec(),
    }
}

/// Every delivery waiting in `queue` now (fetched and started, as a worker would).
async fn drain(b: &RedisBroker, queue: &QueueName) -> Vec<chronos_broker::Lease> {
    let mut reader = b.open_reader().await.expect("reader");
    let mut out = Vec::new();
    loop {
        let f = take(b, &mut reader, queue, "w", 1000, Duration::ZERO).await;
        if f.leases.is_empty() {
            return out;
        }
        out.extend(f.leases);
    }
}

#[tokio::test]
async fn member_reports_count_once_and_the_last_fires_the_callback_once() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let group = Group::new(&email(100), EnqueueOptions::new().queue("cb"))
        .members((0..3).map(|i| (email(i), EnqueueOptions::new().queue("members"))))
        .collect_results();
    let info = client.enqueue_group(group).await.expect("enqueue group");
    assert_eq!(info.total, 3);
    assert_eq!(
        b.queue_stats(&q("members")).await.expect("stats").pending,
        3
    );

    let r0 = report(&info, 0, true, b"\x01");
    assert_eq!(
        b.report_member(&r0).await.expect("report"),
        MemberOutcome::Counted { fired: false }
    );
    // The same member again (it ran twice, or the call was re-sent): not counted again.
    assert_eq!(
        b.report_member(&r0).await.expect("report"),
        MemberOutcome::Already
    );
    // A second report with the other outcome does not count either: the first one stands.
    assert_eq!(
        b.report_member(&report(&info, 0, false, b"late failure"))
            .await
            .expect("report"),
        MemberOutcome::Already
    );
    assert_eq!(
        b.report_member(&report(&info, 1, false, b"boom"))
            .await
            .expect("report"),
        MemberOutcome::Counted { fired: false }
    );
    assert!(
        drain(&b, &q("cb")).await.is_empty(),
        "no callback before the last member"
    );

    let last = report(&info, 2, true, b"\x02");
    assert_eq!(
        b.report_member(&last).await.expect("report"),
        MemberOutcome::Counted { fired: true }
    );
    // The last report re-sent: no second callback.
    assert_eq!(
        b.report_member(&last).await.expect("report"),
        MemberOutcome::Already
    );

    let callbacks = drain(&b, &q("cb")).await;
    assert_eq!(callbacks.len(), 1, "the callback is enqueued exactly once");
    let env = callbacks[0].envelope.as_ref().expect("callback decodes");
    assert_eq!(env.id, info.callback_id);
    let cb = env
        .flow
        .as_ref()
        .and_then(|f| f.callback.as_ref())
        .expect("callback flow");
    assert_eq!(cb.counts(), Some((2, 1)));
    assert_eq!(cb.total, 3);
    assert_eq!(
        chronos_broker::decode_args::<common::Email>(&env.payload).expect("callback args"),
        email(100)
    );

    let state = client
        .group_status(&info)
        .await
        .expect("status")
        .expect("record");
    assert_eq!(
        (state.total, state.succeeded, state.failed, state.fired),
        (3, 2, 1, true)
    );

    let page = client.group_results(&info, 0, 100).await.expect("results");
    let mut members = page.members;
    members.sort_by_key(|m| m.index);
    assert_eq!(members.len(), 3);
    assert_eq!(members[0].outcome, Ok(vec![1]));
    assert_eq!(members[1].outcome, Err("boom".to_string()));
    assert_eq!(members[2].outcome, Ok(vec![2]));
}

#[tokio::test]
async fn reports_for_unknown_groups_and_out_of_range_members_write_nothing() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let unknown = GroupInfo {
        id: "nope".into(),
        queue: q("cb"),
        callback_id: "nope:cb".into(),
        total: 1,
    };
    assert_eq!(
        b.report_member(&report(&unknown, 0, true, b""))
            .await
            .expect("report"),
        MemberOutcome::UnknownGroup
    );
    let info = client
        .enqueue_group(
            Group::new(&email(0), EnqueueOptions::new().queue("cb"))
                .member(&email(1), EnqueueOptions::new()),
        )
        .await
        .expect("group");
    assert!(b.report_member(&report(&info, 1, true, b"")).await.is_err());
    let state = client
        .group_status(&info)
        .await
        .expect("status")
        .expect("record");
    assert_eq!((state.succeeded, state.failed, state.fired), (0, 0, false));
}

#[tokio::test]
async fn enqueueing_a_group_again_with_its_id_doubles_nothing() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let make = || {
        Group::new(&email(0), EnqueueOptions::new().queue("cb"))
            .id("g-retry")
            .members((1..=5).map(|i| (email(i), EnqueueOptions::new().queue("m"))))
    };
    let first = client.enqueue_group(make()).await.expect("first");
    let again = client.enqueue_group(make()).await.expect("again");
    assert_eq!(first, again);
    assert_eq!(b.queue_stats(&q("m")).await.expect("stats").pending, 5);
    // Another definition under the same id is refused.
    let other = Group::new(&email(0), EnqueueOptions::new().queue("cb"))
        .id("g-retry")
        .member(&email(9), EnqueueOptions::new().queue("m"));
    assert!(client.enqueue_group(other).await.is_err());
}

#[tokio::test]
async fn a_chain_successor_is_enqueued_once_even_after_it_completed_and_was_deleted() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let chain = Chain::new()
        .then(&email(1), EnqueueOptions::new().queue("s0"))
        .then(&email(2), EnqueueOptions::new().queue("s1"));
    let info = client.enqueue_chain(chain).await.expect("chain");
    assert_eq!(info.steps[0], (q("s0"), format!("{}:0", info.id)));
    assert_eq!(info.steps[1], (q("s1"), format!("{}:1", info.id)));
    assert!(matches!(
        client.chain_status(&info).await.expect("status"),
        ChainStatus::Running {
            step: 0,
            state: TaskState::Pending
        }
    ));

    let step0 = drain(&b, &q("s0")).await;
    assert_eq!(step0.len(), 1);
    let env0 = step0[0].envelope.as_ref().expect("decodes");
    let next = chain_successor(env0, Some(b"\x07"), chronos_broker::now_ms()).expect("successor");
    assert!(b.enqueue_successor(next.clone()).await.expect("first"));
    // Step 0 ran twice (its worker died before the ack): no second successor.
    assert!(!b.enqueue_successor(next.clone()).await.expect("second"));

    let step1 = drain(&b, &q("s1")).await;
    assert_eq!(step1.len(), 1);
    let env1 = step1[0].envelope.as_ref().expect("decodes");
    assert_eq!(env1.id, info.steps[1].1);
    let flow = env1.flow.as_ref().expect("flow");
    assert_eq!(flow.parent, vec![7]);
    assert_eq!(flow.chain.as_ref().map(|c| (c.step, c.total)), Some((1, 2)));
    assert!(
        chain_successor(env1, None, 0).is_none(),
        "the last step has no successor"
    );

    // The successor completes and is deleted; a late re-run of step 0 still enqueues nothing.
    let done = [Completion {
        lease: step1[0].id.clone(),
        retention: Some(Duration::from_secs(60)),
        result: None,
    }];
    assert_eq!(b.complete(&q("s1"), &done).await.expect("ack"), 1);
    let deleted = b
        .act(&q("s1"), &info.steps[1].1, TaskAction::Delete)
        .await
        .expect("delete");
    assert_eq!(deleted, chronos_broker::ActionOutcome::Done);
    assert!(b
        .task(&q("s1"), &info.steps[1].1)
        .await
        .expect("read")
        .is_none());
    assert!(!b.enqueue_successor(next).await.expect("after deletion"));
    assert!(drain(&b, &q("s1")).await.is_empty());
}

#[tokio::test]
async fn chain_status_reads_the_end_record_and_failed_steps() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue_chain(Chain::new().then(&email(1), EnqueueOptions::new().queue("c1").max_retry(0)))
        .await
        .expect("chain");
    let lease = drain(&b, &q("c1")).await.remove(0);
    b.dead_letter(&lease.id, "bad input", true)
        .await
        .expect("dead");
    assert_eq!(
        client.chain_status(&info).await.expect("status"),
        ChainStatus::Failed {
            step: 0,
            error: "bad input".into()
        }
    );

    let info = client
        .enqueue_chain(Chain::new().then(&email(2), EnqueueOptions::new().queue("c1")))
        .await
        .expect("chain");
    let result = rmp_serde::to_vec_named(&42u32).expect("encode");
    b.finish_chain(&q("c1"), &info.id, Some(result), Duration::from_secs(60))
        .await
        .expect("finish");
    let status = client.chain_status(&info).await.expect("status");
    assert_eq!(
        status.result::<u32>().map(|r| r.expect("decodes")),
        Some(42)
    );
}

/// 100k members: enqueued through the client, then every member reported in pipelined batches
/// (as many workers would), then the results read back in pages. Prints the times.
#[tokio::test]
async fn a_group_of_100k_members_fires_once_with_every_count() {
    const N: u64 = 100_000;
    let b = broker().await;
    let client = Client::new(b.clone());
    let started = Instant::now();
    let group = Group::new(&email(0), EnqueueOptions::new().queue("big-cb"))
        .members((0..N).map(|i| (email(i as u32), EnqueueOptions::new().queue("big"))))
        .collect_results();
    let info = client.enqueue_group(group).await.expect("enqueue 100k");
    let enqueued = started.elapsed();
    assert_eq!(
        b.queue_stats(&q("big")).await.expect("stats").pending,
        N,
        "every member enqueued"
    );

    let started = Instant::now();
    let mut fired = 0;
    for batch in (0..N).collect::<Vec<_>>().chunks(2_000) {
        let calls = batch.iter().map(|&i| {
            let r = report(&info, i, i % 10 != 0, &[i as u8]);
            let b = b.clone();
            async move { b.report_member(&r).await }
        });
        for outcome in futures::future::join_all(calls).await {
            if outcome.expect("report") == (MemberOutcome::Counted { fired: true }) {
                fired += 1;
            }
        }
    }
    let reported = started.elapsed();
    assert_eq!(fired, 1, "exactly one report fires the callback");
    assert_eq!(drain(&b, &q("big-cb")).await.len(), 1);
    let state = client
        .group_status(&info)
        .await
        .expect("status")
        .expect("record");
    assert_eq!((state.succeeded, state.failed), (N - N / 10, N / 10));

    let started = Instant::now();
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0;
    loop {
        let page = client
            .group_results(&info, cursor, 5_000)
            .await
            .expect("page");
        seen.extend(page.members.iter().map(|m| m.index));
        match page.next {
            Some(c) => cursor = c,
            None => break,
        }
    }
    let read = started.elapsed();
    assert_eq!(seen.len() as u64, N);
    println!(
        "100k-member group: enqueue {enqueued:?} ({:.0}/s), bookkeeping {reported:?} ({:.0}/s), \
         results read {read:?}",
        N as f64 / enqueued.as_secs_f64(),
        N as f64 / reported.as_secs_f64()
    );
}

/// On Redis Cluster every workflow script touches one slot: members and steps in other queues
/// (other slots) than the callback, no CROSSSLOT anywhere.
#[tokio::test]
async fn chains_and_groups_work_across_slots_on_a_cluster() {
    let b = common::cluster_broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue_group(
            Group::new(&email(0), EnqueueOptions::new().queue("cl-cb"))
                .member(&email(1), EnqueueOptions::new().queue("cl-a"))
                .member(&email(2), EnqueueOptions::new().queue("cl-b"))
                .collect_results(),
        )
        .await
        .expect("group");
    for i in 0..2 {
        b.report_member(&report(&info, i, true, b"\x05"))
            .await
            .expect("report");
    }
    assert_eq!(drain(&b, &q("cl-cb")).await.len(), 1);
    let page = client.group_results(&info, 0, 10).await.expect("results");
    assert_eq!(page.members.len(), 2);

    let chain = client
        .enqueue_chain(
            Chain::new()
                .then(&email(1), EnqueueOptions::new().queue("cl-a"))
                .then(&email(2), EnqueueOptions::new().queue("cl-b")),
        )
        .await
        .expect("chain");
    let lease = drain(&b, &q("cl-a"))
        .await
        .into_iter()
        .find(|l| l.id.task_id == chain.steps[0].1)
        .expect("step 0");
    let env = lease.envelope.as_ref().expect("decodes");
    let next = chain_successor(env, None, chronos_broker::now_ms()).expect("successor");
    assert!(b.enqueue_successor(next).await.expect("successor"));
    b.finish_chain(&q("cl-b"), &chain.id, None, Duration::from_secs(60))
        .await
        .expect("finish");
    assert_eq!(
        client.chain_status(&chain).await.expect("status"),
        ChainStatus::Succeeded { result: None }
    );
}
