//! Operator actions against a real Redis: run now, delete, archive, cancel (one task and in
//! bulk), listing by cursor with filters, queue deletion and history.

mod common;

use std::time::Duration;

use chronos_broker::{
    ActionOutcome, BrokerError, Client, Completion, Consume, EnqueueOptions, HistorySpan, Inspect,
    Maintain, Operate, QueueName, RedisBroker, SettleExt, StartOutcome, TaskAction, TaskArgs,
    TaskFilter, TaskState,
};
use chronos_testkit::{RedisServer, TcpProxy};
use common::{broker, email, take, Email};
use serde::{Deserialize, Serialize};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue")
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Invoice {
    customer: String,
}

impl TaskArgs for Invoice {
    const KIND: &'static str = "invoice";
}

async fn state_of(b: &RedisBroker, queue: &QueueName, id: &str) -> Option<TaskState> {
    b.task(queue, id).await.expect("task").map(|r| r.state)
}

/// Fetches every pending task of `queue` and fails it once, so each lands in the retry set.
async fn fail_all(b: &RedisBroker, queue: &QueueName, delay: Duration) {
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(b, &mut reader, queue, "w1", 100, Duration::ZERO).await;
    for l in &f.leases {
        assert!(b.retry(&l.id, delay, "boom").await.expect("retry"));
    }
}

#[tokio::test]
async fn run_now_moves_scheduled_retry_and_archived_tasks_to_pending() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let later = EnqueueOptions::new().process_in(Duration::from_secs(3600));
    let scheduled = client.enqueue(&email(1), later).await.expect("enqueue");
    let failing = client
        .enqueue(&email(2), EnqueueOptions::new())
        .await
        .expect("enqueue");
    fail_all(&b, &queue, Duration::from_secs(3600)).await;
    assert_eq!(
        state_of(&b, &queue, &failing.id).await,
        Some(TaskState::Retry)
    );

    for id in [&scheduled.id, &failing.id] {
        assert_eq!(
            b.act(&queue, id, TaskAction::RunNow).await.expect("run"),
            ActionOutcome::Done
        );
        assert_eq!(state_of(&b, &queue, id).await, Some(TaskState::Pending));
        // Re-sent (or run twice): nothing moves again.
        assert_eq!(
            b.act(&queue, id, TaskAction::RunNow).await.expect("run"),
            ActionOutcome::Already
        );
    }
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.scheduled, stats.retry), (2, 0, 0));

    // A dead letter run again gets its attempts back and its envelope in the stream.
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 10, Duration::ZERO).await;
    let l = f
        .leases
        .iter()
        .find(|l| l.id.task_id == failing.id)
        .expect("failing task fetched");
    assert_eq!(l.envelope.as_ref().expect("decodes").retried, 1);
    b.dead_letter(&l.id, "gave up", true).await.expect("dead");
    assert_eq!(
        state_of(&b, &queue, &failing.id).await,
        Some(TaskState::Archived)
    );
    assert_eq!(
        b.act(&queue, &failing.id, TaskAction::RunNow)
            .await
            .expect("run"),
        ActionOutcome::Done
    );
    let rec = b
        .task(&queue, &failing.id)
        .await
        .expect("task")
        .expect("kept");
    assert_eq!(rec.state, TaskState::Pending);
    let env = rec.envelope.expect("envelope back in the stream");
    assert_eq!(env.retried, 0);
    assert_eq!(env.kind, "email");

    assert_eq!(
        b.act(&queue, "nope", TaskAction::RunNow)
            .await
            .expect("run"),
        ActionOutcome::NotFound
    );
}

#[tokio::test]
async fn delete_and_archive_release_the_unique_lock_and_refuse_active_tasks() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let unique = EnqueueOptions::new().unique(Duration::from_secs(3600));
    let a = client
        .enqueue(&email(1), unique.clone())
        .await
        .expect("enqueue");
    let bb = client
        .enqueue(
            &email(2),
            unique.clone().process_in(Duration::from_secs(3600)),
        )
        .await
        .expect("enqueue");
    assert!(matches!(
        client.enqueue(&email(1), unique.clone()).await,
        Err(BrokerError::DuplicateTask { .. })
    ));

    // A pending task archived: its lock is free, and its envelope kept for a run-now.
    assert_eq!(
        b.act(&queue, &a.id, TaskAction::Archive)
            .await
            .expect("archive"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.act(&queue, &a.id, TaskAction::Archive)
            .await
            .expect("archive"),
        ActionOutcome::Already
    );
    let rec = b.task(&queue, &a.id).await.expect("task").expect("kept");
    assert_eq!(rec.state, TaskState::Archived);
    assert_eq!(rec.envelope.expect("envelope kept").kind, "email");
    client
        .enqueue(&email(1), unique.clone())
        .await
        .expect("lock released by archive");

    // A scheduled task deleted: gone, lock free.
    assert_eq!(
        b.act(&queue, &bb.id, TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::Done
    );
    assert_eq!(
        b.act(&queue, &bb.id, TaskAction::Delete)
            .await
            .expect("delete"),
        ActionOutcome::NotFound
    );
    assert_eq!(state_of(&b, &queue, &bb.id).await, None);
    client
        .enqueue(&email(2), unique.clone())
        .await
        .expect("lock released by delete");

    // An active task: neither deleted nor archived.
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 10, Duration::ZERO).await;
    let active = &f.leases[0];
    for action in [TaskAction::Delete, TaskAction::Archive] {
        assert_eq!(
            b.act(&queue, &active.id.task_id, action)
                .await
                .expect("act"),
            ActionOutcome::Refused(Some(TaskState::Active))
        );
    }
    assert_eq!(
        state_of(&b, &queue, &active.id.task_id).await,
        Some(TaskState::Active)
    );
}

#[tokio::test]
async fn acting_on_many_ids_answers_each_as_one_act_would_and_releases_their_locks() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let unique = EnqueueOptions::new().unique(Duration::from_secs(3600));
    // More tasks than one call starts with, so the calls adapt and split.
    let mut ids = Vec::new();
    for n in 0..600 {
        let opts = if n < 3 {
            unique.clone()
        } else {
            EnqueueOptions::new()
        };
        ids.push(client.enqueue(&email(n), opts).await.expect("enqueue").id);
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 1, Duration::ZERO).await;
    let active = f.leases[0].id.task_id.clone();
    assert_eq!(active, ids[0], "the oldest is delivered first");
    ids.push("no-such-task".into());
    let out = b
        .act_many(&queue, &ids, TaskAction::Archive)
        .await
        .expect("act many");
    assert_eq!(out.len(), ids.len());
    assert_eq!(out[0], ActionOutcome::Refused(Some(TaskState::Active)));
    assert!(
        out[1..600].iter().all(|o| *o == ActionOutcome::Done),
        "{out:?}"
    );
    assert_eq!(out[600], ActionOutcome::NotFound);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 1, 599));
    // The archived unique tasks' locks are free again; the active one's is held.
    for n in [1, 2] {
        client
            .enqueue(&email(n), unique.clone())
            .await
            .expect("lock released");
    }
    assert!(matches!(
        client.enqueue(&email(0), unique.clone()).await,
        Err(BrokerError::DuplicateTask { .. })
    ));
    // Again: nothing left to do, and a malformed id is refused before anything runs.
    let again = b
        .act_many(&queue, &ids[1..600], TaskAction::Archive)
        .await
        .expect("again");
    assert!(again.iter().all(|o| *o == ActionOutcome::Already));
    assert!(matches!(
        b.act_many(&queue, &["bad id".to_string()], TaskAction::Delete)
            .await,
        Err(BrokerError::InvalidTaskId { .. })
    ));
}

/// A delivery a worker holds is running for an operator, whether or not its start mark was
/// written: a handler that ends within the mark's delay is never marked, and a plain task's
/// completion may wait for its worker's next fetch to be acked. Archiving or deleting it as
/// waiting dead-lettered (or dropped) tasks whose handler had run to the end (issue 35, 2.17).
#[tokio::test]
async fn a_fetched_task_is_running_for_the_operator_whether_or_not_it_was_marked() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let plain = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let hashed = client
        .enqueue(&email(2), EnqueueOptions::new().task_id("with-a-record"))
        .await
        .expect("enqueue");
    let tenant = client
        .enqueue(&email(3), EnqueueOptions::new().tenant("acme"))
        .await
        .expect("enqueue");
    // Delivered to a worker (XREADGROUP), no start mark: what a worker holds between its
    // fetch and its ack when the handler ended within the mark's delay.
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &queue, "w1", &[], 10, Duration::ZERO)
        .await
        .expect("fetch");
    assert_eq!(f.leases.len(), 3, "{:?}", f.leases);
    for id in [&plain.id, &hashed.id, &tenant.id] {
        for action in [TaskAction::Archive, TaskAction::Delete] {
            assert_eq!(
                b.act(&queue, id, action).await.expect("act"),
                ActionOutcome::Refused(Some(TaskState::Active)),
                "{action:?} of {id}"
            );
        }
        assert_eq!(
            b.act(&queue, id, TaskAction::RunNow).await.expect("run"),
            ActionOutcome::Already
        );
        assert_eq!(
            state_of(&b, &queue, id).await,
            Some(TaskState::Active),
            "{id}"
        );
    }
    let ids = vec![plain.id.clone(), hashed.id.clone(), tenant.id.clone()];
    let bulk = b
        .act_many(&queue, &ids, TaskAction::Archive)
        .await
        .expect("bulk");
    assert!(
        bulk.iter()
            .all(|o| *o == ActionOutcome::Refused(Some(TaskState::Active))),
        "{bulk:?}"
    );
    // Listed as the operator's actions see them.
    let listed = |state| {
        let b = b.clone();
        let queue = queue.clone();
        async move {
            let mut ids: Vec<String> = b
                .list_page(&queue, state, &TaskFilter::default(), None, 10)
                .await
                .expect("list")
                .tasks
                .into_iter()
                .map(|t| t.id)
                .collect();
            ids.sort();
            ids
        }
    };
    let mut all = ids.clone();
    all.sort();
    assert_eq!(listed(TaskState::Active).await, all);
    assert!(listed(TaskState::Pending).await.is_empty());
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 3, 0));
    // Nothing was taken from the worker: its deliveries start and complete as usual.
    let leases: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    let started = b.start(&queue, &leases).await.expect("start");
    assert!(
        started
            .iter()
            .all(|o| matches!(o, StartOutcome::Started(_))),
        "{started:?}"
    );
    let done: Vec<Completion> = leases
        .into_iter()
        .map(|lease| Completion {
            lease,
            retention: None,
            result: None,
        })
        .collect();
    assert_eq!(b.complete(&queue, &done).await.expect("ack"), 3);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 0));
}

/// A tenant task waiting for its turn sits in the tenant stream's pending list under the
/// parking consumer: that is waiting, not running, and it is archived as before.
#[tokio::test]
async fn a_tenant_task_waiting_for_its_turn_is_still_archived() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let info = client
        .enqueue(&email(1), EnqueueOptions::new().tenant("acme"))
        .await
        .expect("enqueue");
    assert_eq!(
        state_of(&b, &queue, &info.id).await,
        Some(TaskState::Pending)
    );
    assert_eq!(
        b.act(&queue, &info.id, TaskAction::Archive)
            .await
            .expect("archive"),
        ActionOutcome::Done
    );
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 1));
}

#[tokio::test]
async fn cancel_marks_only_active_deliveries() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    for n in 0..2 {
        client
            .enqueue(&email(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 1, Duration::ZERO).await;
    let active = &f.leases[0].id;
    let pending = b
        .list_page(&queue, TaskState::Pending, &TaskFilter::default(), None, 10)
        .await
        .expect("list")
        .tasks;
    assert_eq!(pending.len(), 1);
    assert_eq!(
        b.act(&queue, &pending[0].id, TaskAction::Cancel)
            .await
            .expect("cancel"),
        ActionOutcome::Refused(Some(TaskState::Pending))
    );
    let asked = b
        .cancel_requested(&queue, std::slice::from_ref(&active.msg_id))
        .await
        .expect("poll");
    assert!(asked.is_empty());
    for _ in 0..2 {
        assert_eq!(
            b.act(&queue, &active.task_id, TaskAction::Cancel)
                .await
                .expect("cancel"),
            ActionOutcome::Done
        );
    }
    let asked = b
        .cancel_requested(&queue, &[active.msg_id.clone(), "1-1".to_string()])
        .await
        .expect("poll");
    assert_eq!(asked, vec![active.msg_id.clone()]);
    // Cancel is a signal only: the task is still active and settles as usual.
    assert_eq!(
        state_of(&b, &queue, &active.task_id).await,
        Some(TaskState::Active)
    );
}

#[tokio::test]
async fn archive_whose_reply_is_lost_archives_once_and_answers_already() {
    let rig = common::rig().await;
    let (proxy, via, direct) = (&rig.proxy, &rig.via, &rig.direct);
    let queue = q("default");
    let info = Client::new(direct.clone())
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    rig.lose_reply_of("admin_archive");
    let out = via
        .act(&queue, &info.id, TaskAction::Archive)
        .await
        .expect("archive re-sent");
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(out, ActionOutcome::Already);
    let stats = direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.archived), (0, 1));
    let rec = direct
        .task(&queue, &info.id)
        .await
        .expect("task")
        .expect("kept");
    assert_eq!(rec.envelope.expect("envelope kept").kind, "email");
}

#[tokio::test]
async fn bulk_archive_of_100k_pending_tasks_runs_in_bounded_chunks() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("big");
    let opts = EnqueueOptions::new().queue("big");
    let jobs: Vec<Email> = (0..100_000).map(email).collect();
    for part in jobs.chunks(10_000) {
        let r = client
            .enqueue_batch(part.iter().map(|j| (j, opts.clone())))
            .await
            .expect("batch");
        assert!(r.iter().all(|r| r.is_ok()));
    }
    let report = b
        .act_all(
            &queue,
            TaskState::Pending,
            &TaskFilter::default(),
            TaskAction::Archive,
            1000,
        )
        .await
        .expect("bulk");
    assert_eq!(report.done, 100_000);
    assert_eq!(report.matched, 100_000);
    // At most 1,000 a call (fewer while calls take longer than the budget).
    assert!(report.calls >= 100, "{report:?}");
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.archived), (0, 100_000));

    // And back: run now on every archived task, then delete them all.
    let report = b
        .act_all(
            &queue,
            TaskState::Archived,
            &TaskFilter::default(),
            TaskAction::RunNow,
            1000,
        )
        .await
        .expect("bulk run");
    assert_eq!(report.done, 100_000);
    let report = b
        .act_all(
            &queue,
            TaskState::Pending,
            &TaskFilter::default(),
            TaskAction::Delete,
            1000,
        )
        .await
        .expect("bulk delete");
    assert_eq!(report.done, 100_000);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.archived), (0, 0));
}

#[tokio::test]
async fn bulk_with_a_filter_touches_only_matching_tasks_in_a_state() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("mixed");
    // Scheduled, all at one run-at (equal scores): the cursor must not skip ties.
    let at = std::time::SystemTime::now() + Duration::from_secs(3600);
    let opts = EnqueueOptions::new().queue("mixed").process_at(at);
    for n in 0..2500 {
        client
            .enqueue(&email(n), opts.clone())
            .await
            .expect("email");
        let customer = if n % 100 == 7 { "acme-corp" } else { "other" };
        client
            .enqueue(
                &Invoice {
                    customer: customer.into(),
                },
                opts.clone(),
            )
            .await
            .expect("invoice");
    }
    let filter = TaskFilter {
        kind: Some("invoice".into()),
        grep: Some("acme".into()),
        error: None,
    };
    let report = b
        .act_all(
            &queue,
            TaskState::Scheduled,
            &filter,
            TaskAction::Archive,
            300,
        )
        .await
        .expect("bulk");
    assert_eq!(report.matched, 25);
    assert_eq!(report.done, 25);
    assert_eq!(report.scanned, 5000);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.scheduled, stats.archived), (4975, 25));
    let kind_only = TaskFilter {
        kind: Some("email".into()),
        grep: None,
        error: None,
    };
    let report = b
        .act_all(
            &queue,
            TaskState::Scheduled,
            &kind_only,
            TaskAction::Delete,
            1000,
        )
        .await
        .expect("bulk");
    assert_eq!(report.done, 2500);
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.scheduled, stats.archived), (2475, 25));
    // A state the action does not take is refused.
    assert!(matches!(
        b.act_all(
            &queue,
            TaskState::Active,
            &kind_only,
            TaskAction::Delete,
            10
        )
        .await,
        Err(BrokerError::InvalidOption(_))
    ));
}

#[tokio::test]
async fn listing_pages_by_cursor_and_filters_by_kind_and_payload() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("list");
    let at = std::time::SystemTime::now() + Duration::from_secs(3600);
    for n in 0..250 {
        let opts = EnqueueOptions::new().queue("list");
        client
            .enqueue(&email(n), opts.clone())
            .await
            .expect("enqueue");
        client
            .enqueue(&email(n), opts.process_at(at))
            .await
            .expect("enqueue");
    }
    for state in [TaskState::Pending, TaskState::Scheduled] {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = b
                .list_page(
                    &queue,
                    state,
                    &TaskFilter::default(),
                    cursor.as_deref(),
                    100,
                )
                .await
                .expect("page");
            pages += 1;
            assert!(page.tasks.len() <= 100);
            seen.extend(page.tasks.iter().map(|t| t.id.clone()));
            assert!(page.tasks.iter().all(|t| t.state == state));
            match page.next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!((seen.len(), unique.len()), (250, 250), "{state:?}");
        assert!(pages >= 3);
    }
    let filter = TaskFilter {
        kind: None,
        grep: Some("user17@".into()),
        error: None,
    };
    let page = b
        .list_page(&queue, TaskState::Pending, &filter, None, 10)
        .await
        .expect("page");
    assert_eq!(page.tasks.len(), 1);
    let env = page.tasks[0].envelope.as_ref().expect("decodes");
    assert_eq!(
        chronos_broker::payload_json(&env.payload),
        r#"{"n":17,"to":"user17@example.com"}"#
    );
    let none = TaskFilter {
        kind: Some("invoice".into()),
        grep: None,
        error: None,
    };
    let page = b
        .list_page(&queue, TaskState::Pending, &none, None, 10)
        .await
        .expect("page");
    assert!(page.tasks.is_empty());
    assert_eq!(page.next, None);
}

#[tokio::test]
async fn ended_tasks_list_newest_first_and_each_listed_task_has_its_states_time() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("ended");
    let mut ids = Vec::new();
    for i in 0..5 {
        let t = client
            .enqueue(&email(i), EnqueueOptions::new().queue("ended"))
            .await
            .expect("enqueue");
        ids.push(t.id);
    }
    let mut archived_at = Vec::new();
    for id in &ids {
        tokio::time::sleep(Duration::from_millis(3)).await;
        b.act(&queue, id, TaskAction::Archive)
            .await
            .expect("archive");
        archived_at.push(chronos_broker::now_ms());
    }
    // Newest first, page by page (2, 2, 1), each with when it was archived.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = b
            .list_page(
                &queue,
                TaskState::Archived,
                &TaskFilter::default(),
                cursor.as_deref(),
                2,
            )
            .await
            .expect("page");
        for t in &page.tasks {
            let at = t.state_time_ms.expect("archived at");
            let i = ids.iter().position(|id| *id == t.id).expect("listed id");
            assert!(at <= archived_at[i] && at >= archived_at[i] - 1_000, "{at}");
            seen.push(t.id.clone());
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);
    // A task deleted between two pages is gone from the next one; the older ones follow in
    // order (the cursor names a score and a member, not a position).
    let first = b
        .list_page(&queue, TaskState::Archived, &TaskFilter::default(), None, 2)
        .await
        .expect("page");
    b.act(&queue, &ids[1], TaskAction::Delete)
        .await
        .expect("delete");
    let rest = b
        .list_page(
            &queue,
            TaskState::Archived,
            &TaskFilter::default(),
            first.next.as_deref(),
            10,
        )
        .await
        .expect("page");
    let rest: Vec<&str> = rest.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(rest, vec![ids[2].as_str(), ids[0].as_str()]);
    // Scheduled: soonest first, each with its run time.
    let now = chronos_broker::now_ms();
    for (i, mins) in [(10, 30u64), (11, 5), (12, 60)] {
        client
            .enqueue(
                &email(i),
                EnqueueOptions::new()
                    .queue("ended")
                    .process_in(Duration::from_secs(mins * 60)),
            )
            .await
            .expect("enqueue");
    }
    let page = b
        .list_page(
            &queue,
            TaskState::Scheduled,
            &TaskFilter::default(),
            None,
            10,
        )
        .await
        .expect("page");
    let due: Vec<i64> = page
        .tasks
        .iter()
        .map(|t| (t.state_time_ms.expect("due") - now + 30_000) / 60_000)
        .collect();
    assert_eq!(due, vec![5, 30, 60]);
    // Pending tasks have no such time.
    client
        .enqueue(&email(20), EnqueueOptions::new().queue("ended"))
        .await
        .expect("enqueue");
    let page = b
        .list_page(&queue, TaskState::Pending, &TaskFilter::default(), None, 10)
        .await
        .expect("page");
    assert!(page.tasks.iter().all(|t| t.state_time_ms.is_none()));
}

#[tokio::test]
async fn a_filter_takes_a_kind_prefix_and_a_text_of_the_last_error() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    for i in 0..3 {
        client
            .enqueue(&email(i), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    client
        .enqueue(
            &Invoice {
                customer: "acme".into(),
            },
            EnqueueOptions::new(),
        )
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 100, Duration::ZERO).await;
    for (i, l) in f.leases.iter().enumerate() {
        let err = if i % 2 == 0 {
            "smtp: timeout"
        } else {
            "bad address"
        };
        assert!(b
            .retry(&l.id, Duration::from_secs(600), err)
            .await
            .expect("retry"));
    }
    let list = |filter: TaskFilter| {
        let b = b.clone();
        let queue = queue.clone();
        async move {
            b.list_page(&queue, TaskState::Retry, &filter, None, 100)
                .await
                .expect("page")
                .tasks
                .len()
        }
    };
    let kind = |k: &str| TaskFilter {
        kind: Some(k.into()),
        ..TaskFilter::default()
    };
    assert_eq!(list(TaskFilter::default()).await, 4);
    assert_eq!(list(kind("em*")).await, 3, "a prefix");
    assert_eq!(
        list(kind("em")).await,
        0,
        "without the star the kind is exact"
    );
    assert_eq!(list(kind("*")).await, 4);
    let error = |e: &str| TaskFilter {
        error: Some(e.into()),
        ..TaskFilter::default()
    };
    assert_eq!(list(error("timeout")).await, 2);
    assert_eq!(list(error("nothing like it")).await, 0);
    assert_eq!(
        list(TaskFilter {
            kind: Some("invoice".into()),
            error: Some("bad address".into()),
            grep: None,
        })
        .await
            + list(TaskFilter {
                kind: Some("invoice".into()),
                error: Some("smtp".into()),
                grep: None,
            })
            .await,
        1,
        "the invoice failed with one of the two errors"
    );
}

#[tokio::test]
async fn active_tasks_are_listed_from_the_pending_entries_list() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    for n in 0..5 {
        client
            .enqueue(&email(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 3, Duration::ZERO).await;
    let page = b
        .list_page(&queue, TaskState::Active, &TaskFilter::default(), None, 2)
        .await
        .expect("page");
    assert_eq!(page.tasks.len(), 2);
    let rest = b
        .list_page(
            &queue,
            TaskState::Active,
            &TaskFilter::default(),
            page.next.as_deref(),
            2,
        )
        .await
        .expect("page");
    assert_eq!(rest.tasks.len(), 1);
    let mut ids: Vec<String> = page
        .tasks
        .iter()
        .chain(&rest.tasks)
        .map(|t| t.id.clone())
        .collect();
    let mut want: Vec<String> = f.leases.iter().map(|l| l.id.task_id.clone()).collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want);
    let pending = b
        .list_page(&queue, TaskState::Pending, &TaskFilter::default(), None, 10)
        .await
        .expect("page");
    assert_eq!(pending.tasks.len(), 2);
}

#[tokio::test]
async fn queue_delete_is_refused_while_it_holds_tasks_unless_forced() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("doomed");
    let opts = EnqueueOptions::new().queue("doomed");
    for n in 0..30 {
        client
            .enqueue(&email(n), opts.clone())
            .await
            .expect("enqueue");
    }
    client
        .enqueue(&email(99), opts.clone().process_in(Duration::from_secs(60)))
        .await
        .expect("enqueue");
    let mut reader = b.open_reader().await.expect("reader");
    let _active = take(&b, &mut reader, &queue, "w1", 2, Duration::ZERO).await;
    b.set_paused(&queue, true).await.expect("pause");
    // An entry without a live task (a foreign writer's) is removed too.
    use chronos_broker::fred::interfaces::StreamsInterface;
    let _: String = b
        .client()
        .xadd(
            b.keyspace().queue(&queue).stream(),
            false,
            None,
            "*",
            vec![("i", "ghost")],
        )
        .await
        .expect("xadd");
    assert!(matches!(
        b.delete_queue(&queue, false).await,
        Err(BrokerError::QueueNotEmpty { tasks: 32, .. })
    ));
    assert_eq!(b.delete_queue(&queue, true).await.expect("forced"), 31);
    assert!(!b.queues().await.expect("queues").contains(&queue));
    assert!(b.paused_queues().await.expect("paused").is_empty());
    let stats = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats, Default::default());
    let empty = q("empty");
    assert_eq!(b.delete_queue(&empty, false).await.expect("empty"), 0);
}

#[tokio::test]
async fn history_counts_processed_and_failed_per_minute_and_day() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("hist");
    let opts = EnqueueOptions::new().queue("hist");
    for n in 0..5 {
        client
            .enqueue(&email(n), opts.clone())
            .await
            .expect("enqueue");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let f = take(&b, &mut reader, &queue, "w1", 5, Duration::ZERO).await;
    let (ok, bad) = f.leases.split_at(3);
    let done: Vec<Completion> = ok
        .iter()
        .map(|l| Completion {
            lease: l.id.clone(),
            retention: None,
            result: None,
        })
        .collect();
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 3);
    // Re-sent: nothing left to do, and counted once.
    assert_eq!(b.complete(&queue, &done).await.expect("complete"), 0);
    assert!(b
        .retry(&bad[0].id, Duration::ZERO, "x")
        .await
        .expect("retry"));
    b.dead_letter(&bad[1].id, "y", true).await.expect("dead");

    let minutes = b
        .history(&queue, HistorySpan::Minutes)
        .await
        .expect("history");
    assert_eq!(minutes.len(), 1440);
    let (p, fl): (u64, u64) = minutes
        .iter()
        .fold((0, 0), |(p, f), m| (p + m.processed, f + m.failed));
    assert_eq!((p, fl), (3, 2));
    let last = minutes.last().expect("points");
    assert!(
        last.start_ms <= chronos_broker::now_ms()
            && chronos_broker::now_ms() - last.start_ms < 61_000
    );
    let days = b.history(&queue, HistorySpan::Days).await.expect("history");
    assert_eq!(days.len(), 90);
    let today = days.last().expect("today");
    assert_eq!((today.processed, today.failed), (3, 2));

    // Every history key has a TTL.
    use chronos_broker::fred::interfaces::KeysInterface;
    let keys = b.keyspace().queue(&queue);
    let day = chronos_broker::now_ms() / 86_400_000;
    for counter in [
        chronos_broker::HistoryCounter::Processed,
        chronos_broker::HistoryCounter::Failed,
    ] {
        for key in [
            keys.history_minutes(counter, day),
            keys.history_day(counter, day),
        ] {
            let ttl: i64 = b.client().pttl(key.as_str()).await.expect("pttl");
            assert!(ttl > 0, "{key} has no ttl");
        }
    }
}

#[tokio::test]
async fn all_queue_stats_lists_every_queue() {
    let b = broker().await;
    let client = Client::new(b.clone());
    for name in ["a", "b", "c"] {
        client
            .enqueue(&email(1), EnqueueOptions::new().queue(name))
            .await
            .expect("enqueue");
    }
    let all = b.all_queue_stats().await.expect("stats");
    let names: Vec<&str> = all.iter().map(|(q, _)| q.as_str()).collect();
    assert_eq!(names, vec!["a", "b", "c"]);
    assert!(all.iter().all(|(_, s)| s.pending == 1));
}

#[tokio::test]
async fn operator_actions_run_on_a_cluster() {
    let b = common::cluster_broker().await;
    let client = Client::new(b.clone());
    let names: Vec<String> = (0..6).map(|i| format!("op{i}")).collect();
    for name in &names {
        for n in 0..20 {
            client
                .enqueue(&email(n), EnqueueOptions::new().queue(name.clone()))
                .await
                .expect("enqueue");
        }
    }
    for name in &names {
        let queue = q(name);
        let all = TaskFilter::default();
        let r = b
            .act_all(&queue, TaskState::Pending, &all, TaskAction::Archive, 7)
            .await
            .expect("bulk archive");
        assert_eq!(r.done, 20);
        let page = b
            .list_page(&queue, TaskState::Archived, &all, None, 5)
            .await
            .expect("page");
        assert_eq!(page.tasks.len(), 5);
        assert_eq!(
            b.act(&queue, &page.tasks[0].id, TaskAction::RunNow)
                .await
                .expect("run"),
            ActionOutcome::Done
        );
        let mut reader = b.open_reader().await.expect("reader");
        let f = take(&b, &mut reader, &queue, "w", 1, Duration::from_millis(100)).await;
        let done = [Completion {
            lease: f.leases[0].id.clone(),
            retention: None,
            result: None,
        }];
        assert_eq!(b.complete(&queue, &done).await.expect("complete"), 1);
        let days = b.history(&queue, HistorySpan::Days).await.expect("history");
        assert_eq!(days.last().map(|d| d.processed), Some(1));
        assert_eq!(b.delete_queue(&queue, true).await.expect("delete"), 19);
    }
    assert!(b.all_queue_stats().await.expect("stats").is_empty());
}

/// A broker through a proxy that drops the reply of the next call of script `name` (the call
/// runs; the client reconnects and re-sends it), the proxy, and a direct broker.
async fn lossy(name: &str) -> (RedisServer, TcpProxy, RedisBroker, RedisBroker) {
    let rig = common::rig().await;
    rig.lose_reply_of(name);
    (rig.redis, rig.proxy, rig.via, rig.direct)
}

#[tokio::test]
async fn run_now_delete_and_cancel_whose_replies_are_lost_act_once() {
    let queue = q("default");
    let later = EnqueueOptions::new().process_in(Duration::from_secs(3600));

    // Run now: one stream entry, not two.
    let (_r, proxy, via, direct) = lossy("admin_run").await;
    let info = Client::new(direct.clone())
        .enqueue(&email(1), later.clone())
        .await
        .expect("enqueue");
    let out = via
        .act(&queue, &info.id, TaskAction::RunNow)
        .await
        .expect("run");
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(out, ActionOutcome::Already);
    use chronos_broker::fred::interfaces::StreamsInterface;
    let len: u64 = direct
        .client()
        .xlen(direct.keyspace().queue(&queue).stream())
        .await
        .expect("xlen");
    assert_eq!(len, 1);
    let stats = direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.pending, stats.scheduled), (1, 0));

    // Delete: gone, and the re-send finds nothing.
    let (_r, proxy, via, direct) = lossy("admin_delete").await;
    let info = Client::new(direct.clone())
        .enqueue(&email(2), later.clone().unique(Duration::from_secs(3600)))
        .await
        .expect("enqueue");
    let out = via
        .act(&queue, &info.id, TaskAction::Delete)
        .await
        .expect("rm");
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(out, ActionOutcome::NotFound);
    assert_eq!(
        direct.queue_stats(&queue).await.expect("stats").scheduled,
        0
    );
    Client::new(direct.clone())
        .enqueue(&email(2), later.clone().unique(Duration::from_secs(3600)))
        .await
        .expect("lock released");

    // Cancel: one request, still answered as requested.
    let (_r, proxy, via, direct) = lossy("admin_cancel").await;
    Client::new(direct.clone())
        .enqueue(&email(3), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = direct.open_reader().await.expect("reader");
    let f = take(&direct, &mut reader, &queue, "w1", 1, Duration::ZERO).await;
    let lease = &f.leases[0].id;
    let out = via
        .act(&queue, &lease.task_id, TaskAction::Cancel)
        .await
        .expect("cancel");
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(out, ActionOutcome::Done);
    let asked = direct
        .cancel_requested(&queue, std::slice::from_ref(&lease.msg_id))
        .await
        .expect("poll");
    assert_eq!(asked, vec![lease.msg_id.clone()]);
}
