//! The operations library against a real Redis: unknown queues and tasks are errors that say
//! what exists, and bulk runs report progress, stop when cancelled and miss no task.

use chronos_admin::{Admin, AdminError, BulkJob, CancelToken};
use chronos_broker::{
    Client, EnqueueOptions, Inspect, RedisBroker, TaskAction, TaskArgs, TaskFilter, TaskState,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Mail {
    n: u64,
}
impl TaskArgs for Mail {
    const KIND: &'static str = "mail:send";
}

#[derive(Serialize, Deserialize)]
struct Sms {
    n: u64,
}
impl TaskArgs for Sms {
    const KIND: &'static str = "sms:send";
}

async fn broker_in(ns: &str) -> RedisBroker {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    RedisBroker::builder(url.as_str())
        .namespace(ns)
        .connect()
        .await
        .expect("connect")
}

async fn admin() -> Admin<RedisBroker> {
    Admin::new(broker_in(&chronos_testkit::namespace()).await)
}

/// `n` pending mails (and, with `sms`, as many pending SMS) in `queue`.
async fn seed(admin: &Admin<RedisBroker>, queue: &str, n: u64, sms: bool) {
    let client = Client::new(admin.broker().clone());
    let mails: Vec<Mail> = (0..n).map(|n| Mail { n }).collect();
    let opts = EnqueueOptions::new().queue(queue);
    for r in client
        .enqueue_batch(mails.iter().map(|m| (m, opts.clone())))
        .await
        .expect("enqueue")
    {
        r.expect("enqueued");
    }
    if sms {
        let all: Vec<Sms> = (0..n).map(|n| Sms { n }).collect();
        for r in client
            .enqueue_batch(all.iter().map(|m| (m, opts.clone())))
            .await
            .expect("enqueue")
        {
            r.expect("enqueued");
        }
    }
}

async fn count(admin: &Admin<RedisBroker>, queue: &str, state: TaskState) -> u64 {
    let row = admin.queue(queue).await.expect("queue");
    match state {
        TaskState::Pending => row.pending,
        TaskState::Archived => row.archived,
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn a_mistyped_queue_is_an_error_naming_the_queue_meant() {
    let admin = admin().await;
    seed(&admin, "critical", 1, false).await;
    seed(&admin, "default", 1, false).await;
    let err = admin
        .set_paused("critcal", true)
        .await
        .expect_err("no such queue");
    let AdminError::QueueNotFound(e) = &err else {
        panic!("expected QueueNotFound, got {err:?}");
    };
    assert_eq!(e.suggestion.as_deref(), Some("critical"));
    assert_eq!(e.known, ["critical", "default"]);
    let msg = err.to_string();
    assert!(msg.contains("did you mean \"critical\""), "{msg}");
    // Nothing was written for the typo.
    assert!(admin
        .broker()
        .paused_queues()
        .await
        .expect("paused")
        .is_empty());
    for r in [
        admin.queue("nosuchqueue").await.map(|_| ()),
        admin.delete_queue("nosuchqueue", true).await.map(|_| ()),
        admin
            .tasks(
                "nosuchqueue",
                TaskState::Pending,
                &TaskFilter::default(),
                None,
                10,
            )
            .await
            .map(|_| ()),
        admin
            .act("nosuchqueue", "some-id", TaskAction::Delete)
            .await
            .map(|_| ()),
    ] {
        assert!(matches!(r, Err(AdminError::QueueNotFound(_))), "{r:?}");
    }
}

#[tokio::test]
async fn a_queue_missing_from_the_namespace_names_the_namespaces_that_hold_queues() {
    let ns = chronos_testkit::namespace();
    let there = Admin::new(broker_in(&ns).await);
    seed(&there, "mail", 1, false).await;
    let elsewhere = Admin::new(broker_in(&format!("{ns}-empty")).await);
    let err = elsewhere
        .queue("mail")
        .await
        .expect_err("another namespace");
    let AdminError::QueueNotFound(e) = &err else {
        panic!("expected QueueNotFound, got {err:?}");
    };
    assert!(e.known.is_empty());
    assert!(e.other_namespaces.contains(&ns), "{e:?}");
    assert!(elsewhere.other_namespaces().await.contains(&ns));
}

#[tokio::test]
async fn deleting_a_task_that_is_not_there_is_an_error() {
    let admin = admin().await;
    seed(&admin, "mail", 1, false).await;
    let r = admin.act("mail", "bogus-id", TaskAction::Delete).await;
    assert!(
        matches!(&r, Err(AdminError::TaskNotFound { id, .. }) if id == "bogus-id"),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_bulk_run_reports_its_progress_step_by_step() {
    let admin = admin().await;
    seed(&admin, "mail", 1500, true).await;
    let only_mail = TaskFilter {
        kind: Some("mail:send".into()),
        grep: None,
        error: None,
    };
    let job = BulkJob::new("mail", TaskState::Pending, only_mail, TaskAction::Archive).chunk(200);
    let mut seen = Vec::new();
    let end = admin
        .run_bulk(&job, &CancelToken::new(), |s| seen.push(s.clone()))
        .await
        .expect("run");
    assert!(
        end.finished && !end.cancelled && end.error.is_none(),
        "{end:?}"
    );
    assert_eq!((end.matched, end.done, end.skipped), (1500, 1500, 0));
    assert_eq!(end.scanned, 3000);
    assert!(seen.len() >= 8, "a report per step: {}", seen.len());
    assert!(
        seen.windows(2)
            .all(|w| w[0].done <= w[1].done && w[0].scanned <= w[1].scanned),
        "counts only grow"
    );
    assert!(seen
        .iter()
        .any(|s| s.running() && s.done > 0 && s.done < 1500));
    assert_eq!(count(&admin, "mail", TaskState::Archived).await, 1500);
    assert_eq!(count(&admin, "mail", TaskState::Pending).await, 1500);
}

#[tokio::test]
async fn a_cancelled_bulk_run_stops_within_a_step_and_says_what_it_did() {
    let admin = admin().await;
    seed(&admin, "mail", 3000, false).await;
    let job = BulkJob::new(
        "mail",
        TaskState::Pending,
        TaskFilter::default(),
        TaskAction::Delete,
    )
    .chunk(250);
    let cancel = CancelToken::new();
    let stop = cancel.clone();
    let end = admin
        .run_bulk(&job, &cancel, move |s| {
            if s.done >= 500 {
                stop.cancel();
            }
        })
        .await
        .expect("run");
    assert!(end.cancelled && !end.finished, "{end:?}");
    assert!(end.done >= 500 && end.done <= 750, "{end:?}");
    assert_eq!(
        count(&admin, "mail", TaskState::Pending).await,
        3000 - end.done,
        "what it says it did is what it did"
    );
}

#[tokio::test]
async fn a_bulk_run_misses_no_task_of_a_sorted_set_whose_tasks_share_a_score() {
    let admin = admin().await;
    seed(&admin, "mail", 2000, false).await;
    // One bulk archive gives the tasks of each script call one died-at score.
    admin
        .act_all(
            "mail",
            TaskState::Pending,
            &TaskFilter::default(),
            TaskAction::Archive,
        )
        .await
        .expect("archive");
    assert_eq!(count(&admin, "mail", TaskState::Archived).await, 2000);
    let job = BulkJob::new(
        "mail",
        TaskState::Archived,
        TaskFilter::default(),
        TaskAction::Delete,
    )
    .chunk(100);
    let end = admin
        .run_bulk(&job, &CancelToken::new(), |_| {})
        .await
        .expect("run");
    assert_eq!((end.done, end.finished), (2000, true), "{end:?}");
    assert_eq!(count(&admin, "mail", TaskState::Archived).await, 0);
}

#[tokio::test]
async fn a_count_that_stops_early_is_a_range() {
    let admin = admin().await;
    seed(&admin, "mail", 1500, true).await;
    let sms = TaskFilter {
        kind: Some("sms:send".into()),
        grep: None,
        error: None,
    };
    let c = admin
        .count_matching("mail", TaskState::Pending, &sms, 1000)
        .await
        .expect("count");
    assert!(!c.exact);
    assert_eq!(c.in_state, 3000);
    assert!(c.matched < 1500 && c.at_most >= 1500, "{c:?}");
    let all = admin
        .count_matching("mail", TaskState::Pending, &sms, 10_000)
        .await
        .expect("count");
    assert!(all.exact);
    assert_eq!((all.matched, all.at_most), (1500, 1500));
}

#[tokio::test]
async fn tenants_are_listed_with_totals_and_resumed_past_a_paused_default() {
    use chronos_broker::TenantChange;
    let admin = admin().await;
    let client = Client::new(admin.broker().clone());
    for (tenant, n) in [("a", 3u64), ("b", 2), ("c", 1)] {
        let mails: Vec<Mail> = (0..n).map(|n| Mail { n }).collect();
        let opts = EnqueueOptions::new().queue("shared").tenant(tenant);
        for r in client
            .enqueue_batch(mails.iter().map(|m| (m, opts.clone())))
            .await
            .expect("enqueue")
        {
            r.expect("enqueued");
        }
    }
    let list = admin.tenants("shared", 2).await.expect("tenants");
    assert_eq!((list.total, list.waiting, list.running), (3, 6, 0));
    assert_eq!(list.more(), 1);
    let names: Vec<&str> = list.tenants.iter().map(|t| t.tenant.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(list.tenants[0]
        .oldest_age_ms(chronos_broker::now_ms())
        .is_some());

    // The default pauses everyone; resuming one tenant stores "not paused" for it.
    admin.pause_tenant("shared", None).await.expect("pause all");
    let done = admin
        .resume_tenant("shared", Some("b"))
        .await
        .expect("resume");
    assert_eq!(done.settings.paused, Some(false));
    let list = admin.tenants("shared", 10).await.expect("tenants");
    let ready: Vec<(&str, bool, bool)> = list
        .tenants
        .iter()
        .map(|t| (t.tenant.as_str(), t.ready, t.paused()))
        .collect();
    assert_eq!(
        ready,
        [("a", false, true), ("b", true, false), ("c", false, true)]
    );
    // Without a paused default, a resume removes the tenant's own pause.
    admin
        .resume_tenant("shared", None)
        .await
        .expect("resume all");
    admin
        .pause_tenant("shared", Some("a"))
        .await
        .expect("pause");
    let done = admin
        .resume_tenant("shared", Some("a"))
        .await
        .expect("resume");
    assert_eq!(done.settings.paused, None);

    // Nothing to change, an unknown queue, a bad key: refused, nothing stored.
    assert!(matches!(
        admin
            .change_tenant("shared", Some("a"), &TenantChange::new())
            .await,
        Err(AdminError::Invalid(_))
    ));
    assert!(matches!(
        admin.pause_tenant("nosuch", Some("a")).await,
        Err(AdminError::QueueNotFound(_))
    ));
    assert!(matches!(
        admin.tenants("nosuch", 10).await,
        Err(AdminError::QueueNotFound(_))
    ));
    assert!(admin
        .change_tenant("shared", Some("a b"), &TenantChange::new().weight(Some(2)))
        .await
        .is_err());
    assert!(admin
        .tenant_settings("shared", Some("a"))
        .await
        .expect("settings")
        .is_empty());
}

#[tokio::test]
async fn an_edit_changes_a_waiting_task_and_a_started_one_is_refused_by_a_typed_error() {
    use chronos_admin::TaskEdit;
    use chronos_broker::{json_payload, Consume, QueueName};
    let admin = admin().await;
    let client = Client::new(admin.broker().clone());
    let opts = EnqueueOptions::new().queue("mail");
    let id = client
        .enqueue(&Mail { n: 1 }, opts.clone().task_id("m1"))
        .await
        .expect("enqueue")
        .id;
    let edit = TaskEdit::new().payload(json_payload(r#"{"n":42}"#).expect("json"));
    assert!(admin.edit("mail", &id, &edit).await.expect("edit"));
    assert!(!admin.edit("mail", &id, &edit).await.expect("again"));
    let row = admin.task("mail", &id).await.expect("task");
    assert_eq!(row.payload, serde_json::json!({"n": 42}));
    assert_eq!(row.kind, Mail::KIND);

    // Started by a worker: refused, named by state and action.
    let b = admin.broker();
    let queue = QueueName::new("mail").expect("queue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(&mut reader, &queue, "w", &[], 1, std::time::Duration::ZERO)
        .await
        .expect("fetch");
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    b.start(&queue, &ids).await.expect("start");
    let err = admin
        .edit("mail", &id, &TaskEdit::new().payload(vec![0xc0]))
        .await
        .expect_err("active");
    assert!(
        matches!(&err, AdminError::Refused { state, action: "edit", .. } if state == "active"),
        "{err:?}"
    );
    assert!(matches!(
        admin.edit("mail", "nope", &edit).await,
        Err(AdminError::TaskNotFound { .. })
    ));
    assert_eq!(
        admin.task("mail", &id).await.expect("task").payload,
        serde_json::json!({"n": 42})
    );
}
