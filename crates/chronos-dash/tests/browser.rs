//! Bulk actions in a real browser (Debian's headless Chromium through chromedriver) against a
//! real Redis: confirm with the count, watch the progress page, cancel. Screenshots (checked not
//! blank) go to target/screenshots, or CHRONOS_SCREENSHOT_DIR.

use std::time::Duration;

use anyhow::Result;
use chronos_admin::Admin;
use chronos_broker::{
    Client, EnqueueOptions, Inspect, QueueName, RedisBroker, SettleExt, TaskArgs,
};
use chronos_dash::{Dash, DashConfig};
use chronos_testkit::Browser;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Refund {
    order: u64,
}
impl TaskArgs for Refund {
    const KIND: &'static str = "refund:issue";
}

/// A console over a fresh namespace, pacing bulk steps so that a person (and this test) can
/// watch and cancel; answers its base URL and the broker.
async fn console(pause: Duration) -> Result<(String, RedisBroker)> {
    let url = chronos_testkit::shared_url()?;
    let broker = RedisBroker::builder(url.as_str())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = DashConfig::default()
        .addr(addr)
        .redis_label(&url)
        .bulk_pace(100, pause);
    let dash = Dash::new(Admin::new(broker.clone()), config)?;
    tokio::spawn(dash.serve_on(listener, std::future::pending()));
    Ok((format!("http://{addr}"), broker))
}

async fn refunds(broker: &RedisBroker, queue: &str, n: u64) -> Result<()> {
    let all: Vec<Refund> = (0..n).map(|order| Refund { order }).collect();
    let opts = EnqueueOptions::new().queue(queue);
    for r in Client::new(broker.clone())
        .enqueue_batch(all.iter().map(|t| (t, opts.clone())))
        .await?
    {
        r?;
    }
    Ok(())
}

#[tokio::test]
async fn a_bulk_archive_is_confirmed_then_followed_on_its_progress_page() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    refunds(&broker, "refunds", 2000).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds?state=pending"))
        .await?;
    b.click("button[data-bulk=\"archive\"]").await?;
    b.wait_for_text("#confirm-count", "2,000", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-bulk-confirm").await?;
    b.click("#confirm").await?;
    b.wait_for_text("#job-state", "running", Duration::from_secs(10))
        .await?;
    // The counts move while the page stays open.
    b.wait_for("#job-bar", Duration::from_secs(5)).await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    b.screenshot("dash-bulk-progress").await?;
    b.wait_for_text("#job-state", "finished", Duration::from_secs(60))
        .await?;
    b.wait_for_text("#job-status", "2,000", Duration::from_secs(5))
        .await?;
    b.screenshot("dash-bulk-finished").await?;
    let q = QueueName::new("refunds")?;
    assert_eq!(broker.queue_stats(&q).await?.archived, 2000);
    b.click("#job-back").await?;
    b.wait_for_text("h1", "refunds", Duration::from_secs(10))
        .await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_running_bulk_action_is_cancelled_from_its_progress_page() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(150)).await?;
    refunds(&broker, "slow", 3000).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/slow?state=pending")).await?;
    b.click("button[data-bulk=\"archive\"]").await?;
    b.wait_for_text("#confirm-count", "3,000", Duration::from_secs(10))
        .await?;
    b.click("#confirm").await?;
    b.wait_for_text("#job-state", "running", Duration::from_secs(10))
        .await?;
    b.click("#job-cancel").await?;
    b.wait_for_text("#job-state", "cancelled", Duration::from_secs(30))
        .await?;
    b.wait_for("#job-cancelled", Duration::from_secs(5)).await?;
    b.screenshot("dash-bulk-cancelled").await?;
    let s = broker.queue_stats(&QueueName::new("slow")?).await?;
    assert!(s.archived < 3000, "stopped early: {s:?}");
    assert_eq!(s.archived + s.pending, 3000);
    b.close().await?;
    Ok(())
}

/// Starts one task of `queue` (optionally keyed) as a worker would and answers it rate
/// limited: its key's block, or the queue's.
async fn rate_limited(
    broker: &RedisBroker,
    queue: &str,
    scope: chronos_broker::BackoffScope,
) -> Result<()> {
    use chronos_broker::Consume;
    let opts = match &scope {
        chronos_broker::BackoffScope::Key(k) => EnqueueOptions::new().queue(queue).rate_key(k),
        _ => EnqueueOptions::new().queue(queue),
    };
    Client::new(broker.clone())
        .enqueue(&Refund { order: 1 }, opts)
        .await?;
    let q = QueueName::new(queue)?;
    let mut reader = broker.open_reader().await?;
    let f = broker
        .fetch(&mut reader, &q, "w", &[], 1, Duration::ZERO)
        .await?;
    let lease = f.leases.into_iter().next().expect("one delivery");
    broker.start(&q, std::slice::from_ref(&lease.id)).await?;
    broker
        .back_off(&lease.id, &scope, Duration::from_secs(600))
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_throttled_queue_says_until_when_and_its_blocks_can_be_lifted() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    // The key first: a blocked queue hands out nothing to block with.
    rate_limited(
        &broker,
        "api",
        chronos_broker::BackoffScope::Key("acme".into()),
    )
    .await?;
    rate_limited(&broker, "api", chronos_broker::BackoffScope::Queue).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/api")).await?;
    b.wait_for_text("#throttled", "throttled until", Duration::from_secs(10))
        .await?;
    b.wait_for_text(
        "#blocks tr[data-block=\"acme\"]",
        "throttled until",
        Duration::from_secs(5),
    )
    .await?;
    b.wait_for_text("#throttled-today", "2", Duration::from_secs(5))
        .await?;
    b.screenshot("dash-queue-throttled").await?;
    // Lift the queue's own block: the badge goes, the key's block stays.
    b.click("#blocks tr[data-block=\"\"] button").await?;
    b.wait_for_text("p.notice", "lifted", Duration::from_secs(10))
        .await?;
    let q = QueueName::new("api")?;
    let blocks = broker.queue_blocks(&q, 10).await?;
    assert_eq!(blocks.queue_until_ms, None);
    assert_eq!(blocks.keys.len(), 1);
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_queues_locks_are_listed_on_their_tab_and_released_with_a_click() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    let client = Client::new(broker.clone());
    for order in [7, 8] {
        client
            .enqueue(
                &Refund { order },
                EnqueueOptions::new()
                    .queue("refunds")
                    .dedup(chronos_broker::Dedup::key(format!("order:{order}"))),
            )
            .await?;
    }
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds")).await?;
    b.click("#locks-tab").await?;
    b.wait_for_text(
        "#locks tr[data-key=\"order:7\"]",
        "pending",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-queue-locks").await?;
    b.click("#locks tr[data-key=\"order:7\"] button").await?;
    b.wait_for_text("p.notice", "released", Duration::from_secs(10))
        .await?;
    let locks = broker.dedup_locks(&QueueName::new("refunds")?, 10).await?;
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].key, "order:8");
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_running_tasks_progress_bar_follows_its_reports_live() -> Result<()> {
    use chronos_broker::{Consume, Maintain, ProgressUpdate};
    let (base, broker) = console(Duration::from_millis(40)).await?;
    let info = Client::new(broker.clone())
        .enqueue(&Refund { order: 9 }, EnqueueOptions::new().queue("refunds"))
        .await?;
    let q = QueueName::new("refunds")?;
    let mut reader = broker.open_reader().await?;
    let lease = broker
        .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
        .await?
        .leases
        .remove(0);
    broker.close_reader(reader).await;
    broker.start(&q, std::slice::from_ref(&lease.id)).await?;
    let report = |percent: u32, note: &str| ProgressUpdate {
        msg_id: lease.id.msg_id.clone(),
        task_id: lease.id.task_id.clone(),
        json: serde_json::to_vec(&serde_json::json!({ "percent": percent, "note": note }))
            .expect("json"),
    };
    let ids = [lease.id.msg_id.clone()];
    broker
        .keep_alive(&q, "w1", &ids, &[report(30, "resizing")])
        .await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds/tasks/{}", info.id))
        .await?;
    b.wait_for_text("#progress-percent", "30%", Duration::from_secs(10))
        .await?;
    // A later report shows without a reload: the page polls the task.
    broker
        .keep_alive(&q, "w1", &ids, &[report(80, "uploading")])
        .await?;
    b.wait_for_text("#progress-note", "uploading", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#progress-percent", "80%", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-task-progress").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_queues_events_are_turned_on_and_follow_live() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    let client = Client::new(broker.clone());
    client
        .enqueue(&Refund { order: 1 }, EnqueueOptions::new().queue("refunds"))
        .await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds")).await?;
    b.click("#events-tab").await?;
    b.wait_for_text("#events-off", "keeps no events", Duration::from_secs(10))
        .await?;
    b.click("#events-on").await?;
    b.wait_for_text("p.notice", "events on", Duration::from_secs(10))
        .await?;
    // Written after the page loaded: the page adds them by itself.
    let info = client
        .enqueue(
            &Refund { order: 2 },
            EnqueueOptions::new().queue("refunds").task_id("refund-2"),
        )
        .await?;
    client
        .enqueue(
            &Refund { order: 3 },
            EnqueueOptions::new()
                .queue("refunds")
                .task_id("refund-3")
                .process_in(Duration::from_secs(600)),
        )
        .await?;
    b.wait_for_text(
        "#events tbody tr:first-child",
        "refund-3",
        Duration::from_secs(10),
    )
    .await?;
    b.wait_for_text(
        &format!(
            "#events tr[data-type=\"enqueued\"] a[href$=\"{}\"]",
            info.id
        ),
        "refund-2",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-queue-events").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_runtime_schedule_is_run_now_and_edited_from_its_page() -> Result<()> {
    use chronos_scheduler::{NewSchedule, RuntimeSchedules, ScheduleOptions, Spec};
    let (base, broker) = console(Duration::from_millis(40)).await?;
    let rt = RuntimeSchedules::new(broker.clone());
    rt.add(NewSchedule::raw(
        "refund-sweep",
        Refund::KIND,
        &serde_json::json!({"order": 0}),
        Spec::interval(Duration::from_secs(900))?,
        ScheduleOptions::new().queue("refunds"),
    )?)
    .await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/schedules")).await?;
    b.click("#schedules tr[data-id=\"refund-sweep\"] a[href=\"/schedules/refund-sweep\"]")
        .await?;
    b.wait_for_text("#schedule-id", "refund-sweep", Duration::from_secs(10))
        .await?;
    b.click("button[data-action=\"run\"]").await?;
    b.wait_for_text("p.notice", "ran now", Duration::from_secs(10))
        .await?;
    b.wait_for_text(
        "#fires tr[data-outcome=\"run now\"] td[data-f=\"task-state\"]",
        "pending",
        Duration::from_secs(10),
    )
    .await?;
    b.fill("#edit-every", "").await?;
    b.fill("#edit-cron", "0 6 * * 1-5").await?;
    b.fill("#edit-zone", "America/New_York").await?;
    b.submit("#schedule-edit").await?;
    b.wait_for_text("p.notice", "saved", Duration::from_secs(10))
        .await?;
    b.wait_for_text(
        "dd.mono",
        "0 6 * * 1-5 (America/New_York)",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-schedule").await?;
    b.close().await?;
    let stored = rt.get("refund-sweep").await?.expect("stored");
    assert_eq!(stored.describe, "0 6 * * 1-5 (America/New_York)");
    Ok(())
}

#[tokio::test]
async fn dead_letters_grouped_by_error_lead_to_the_filtered_archive() -> Result<()> {
    use chronos_broker::Consume;
    let (base, broker) = console(Duration::from_millis(40)).await?;
    refunds(&broker, "refunds", 9).await?;
    let q = QueueName::new("refunds")?;
    let mut reader = broker.open_reader().await?;
    let got = broker
        .fetch(&mut reader, &q, "w1", &[], 9, Duration::ZERO)
        .await?;
    broker.close_reader(reader).await;
    let ids: Vec<_> = got.leases.iter().map(|l| l.id.clone()).collect();
    broker.start(&q, &ids).await?;
    for (i, id) in ids.iter().enumerate() {
        let err = match i % 3 {
            0 => "payment gateway: 503 Service Unavailable",
            1 => "payment gateway: 503 Service Unavailable",
            _ => "card declined: insufficient funds",
        };
        broker.dead_letter(id, err, true).await?;
    }
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds")).await?;
    b.click("#dead-tab").await?;
    b.wait_for_text(
        "#dead-read",
        "9 dead letters in 2 groups",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-dead-by-error").await?;
    b.click("#groups a[data-list=\"card declined: insufficient funds\"]")
        .await?;
    b.wait_for("#tasks", Duration::from_secs(10)).await?;
    let rows = b
        .execute(
            "return document.querySelectorAll('#tasks tbody tr').length",
            &[],
        )
        .await?;
    assert_eq!(rows, serde_json::json!(3));
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_task_is_enqueued_from_the_queue_page_and_duplicated_from_its_own() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    refunds(&broker, "refunds", 1).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds")).await?;
    b.click("#enqueue-link").await?;
    b.wait_for("#enqueue", Duration::from_secs(10)).await?;
    b.fill("#enqueue-kind", Refund::KIND).await?;
    b.fill("#enqueue-payload", r#"{"order": 4711}"#).await?;
    b.fill("#enqueue-in", "15m").await?;
    b.fill("#enqueue-retry", "3").await?;
    b.screenshot("dash-enqueue").await?;
    b.submit("#enqueue").await?;
    b.wait_for_text("#task-state", "scheduled", Duration::from_secs(10))
        .await?;
    b.wait_for_text("p.notice", "enqueued", Duration::from_secs(10))
        .await?;
    b.click("#duplicate").await?;
    b.wait_for("#enqueue", Duration::from_secs(10)).await?;
    b.submit("#enqueue").await?;
    b.wait_for_text("p.notice", "a copy of", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#task-state", "pending", Duration::from_secs(10))
        .await?;
    let q = QueueName::new("refunds")?;
    let stats = broker.queue_stats(&q).await?;
    assert_eq!((stats.pending, stats.scheduled), (2, 1));
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn the_timing_tab_charts_each_kinds_run_time_and_wait() -> Result<()> {
    use chronos_broker::{Maintain, TimingDelta, TimingHist};
    let (base, broker) = console(Duration::from_millis(40)).await?;
    refunds(&broker, "refunds", 1).await?;
    let q = QueueName::new("refunds")?;
    let now = chronos_broker::now_ms();
    let minute = now - now.rem_euclid(60_000);
    let mut deltas = Vec::new();
    for i in 0..60i64 {
        for (kind, base_ms) in [("refund:issue", 40u64), ("refund:notify", 6)] {
            let mut run = TimingHist::default();
            let mut wait = TimingHist::default();
            // A slow spell a quarter of an hour ago.
            let slow = if (12..18).contains(&i) { 8 } else { 1 };
            for j in 0..200u64 {
                let tail = if j % 50 == 0 {
                    12
                } else if j % 10 == 0 {
                    3
                } else {
                    1
                };
                run.record(base_ms * slow * tail + j % 7);
                wait.record((2 + j % 5) * slow);
            }
            deltas.push(TimingDelta {
                minute_ms: minute - i * 60_000,
                kind: kind.into(),
                run,
                wait,
            });
        }
    }
    broker.record_timings(&q, &deltas).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds")).await?;
    b.click("#timing-tab").await?;
    b.wait_for(
        "#kinds tr[data-kind=\"refund:notify\"]",
        Duration::from_secs(10),
    )
    .await?;
    let lines = b
        .execute(
            "return document.querySelectorAll('section.kind-timing polyline').length",
            &[],
        )
        .await?;
    assert_eq!(lines, serde_json::json!(12), "2 kinds x 2 charts x 3 lines");
    b.screenshot("dash-timing").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_members_task_page_leads_to_its_groups_page() -> Result<()> {
    use chronos_broker::{Flows, Group, MemberReport};
    let (base, broker) = console(Duration::from_millis(40)).await?;
    let client = Client::new(broker.clone());
    let group = client
        .enqueue_group(
            Group::new(&Refund { order: 0 }, EnqueueOptions::new().queue("settle")).members(
                (1..=8).map(|order| (Refund { order }, EnqueueOptions::new().queue("refunds"))),
            ),
        )
        .await?;
    let cb = QueueName::new("settle")?;
    for index in 0..5u64 {
        broker
            .report_member(&MemberReport {
                queue: cb.clone(),
                group: group.id.clone(),
                index,
                succeeded: index != 3,
                value: if index == 3 {
                    b"card declined".to_vec()
                } else {
                    Vec::new()
                },
            })
            .await?;
    }
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds/tasks/{}%3A6", group.id))
        .await?;
    b.wait_for_text(
        "#group-counts",
        "5 of 8 members done",
        Duration::from_secs(10),
    )
    .await?;
    b.click("#group-link").await?;
    b.wait_for("#members tr[data-member=\"3\"]", Duration::from_secs(10))
        .await?;
    let link = b
        .execute(
            "return document.querySelector('#members tr[data-member=\"3\"] a').getAttribute('href')",
            &[],
        )
        .await?;
    assert_eq!(
        link,
        serde_json::json!(format!("/queues/refunds/tasks/{}%3A3", group.id)),
        "members link to the queue they were enqueued to"
    );
    b.screenshot("dash-group").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn rows_older_than_the_live_counts_say_so_and_the_chart_spans_a_day() -> Result<()> {
    let (base, broker) = console(Duration::from_millis(40)).await?;
    refunds(&broker, "refunds", 3).await?;
    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/refunds?state=pending"))
        .await?;
    b.wait_for("#tasks", Duration::from_secs(10)).await?;
    let hidden = b
        .execute("return document.getElementById('stale-rows').hidden", &[])
        .await?;
    assert_eq!(
        hidden,
        serde_json::json!(true),
        "counts and rows agree at first"
    );
    refunds(&broker, "refunds", 2).await?;
    b.wait_for_text("#stale-rows", "it holds 5 now", Duration::from_secs(10))
        .await?;
    let text = b.text("#stale-rows").await?;
    assert!(text.contains("pending held 3"), "{text}");
    // The chart: a day in steps of 15 minutes, the step under way said apart.
    b.click("#chart-spans button[data-span=\"day\"]").await?;
    b.wait_for_text(
        "#chart-partial",
        "these 15 minutes so far",
        Duration::from_secs(10),
    )
    .await?;
    let step = b
        .execute("return document.getElementById('chart').dataset.step", &[])
        .await?;
    assert_eq!(step, serde_json::json!("900000"));
    b.close().await?;
    Ok(())
}
