//! Bulk actions in a real browser (Debian's headless Chromium through chromedriver) against a
//! real Redis: confirm with the count, watch the progress page, cancel. Screenshots (checked not
//! blank) go to target/screenshots, or CHRONOS_SCREENSHOT_DIR.

use std::time::Duration;

use anyhow::Result;
use chronos_admin::Admin;
use chronos_broker::{Client, EnqueueOptions, Inspect, QueueName, RedisBroker, TaskArgs};
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
