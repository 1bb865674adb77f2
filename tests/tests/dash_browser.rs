//! The web console in a real browser (Debian's headless Chromium through chromedriver) against a
//! real Redis: what an operator sees and clicks. Each test saves a screenshot (checked not
//! blank) under target/screenshots, or CHRONOS_SCREENSHOT_DIR.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use chronos::prelude::*;
use chronos::{QueueName, TaskState};
use chronos_dash::{Dash, DashConfig};
use chronos_testkit::Browser;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Invoice {
    customer: String,
    cents: u64,
}
impl TaskArgs for Invoice {
    const KIND: &'static str = "invoice:send";
}

#[derive(Serialize, Deserialize)]
struct Cleanup;
impl TaskArgs for Cleanup {
    const KIND: &'static str = "nightly:cleanup";
}

async fn broker() -> Result<RedisBroker> {
    let url = chronos_testkit::shared_url()?;
    Ok(RedisBroker::builder(url.as_str())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await?)
}

/// Serves the console over `broker` on `bind` (port 0); answers its base URL as a browser
/// reaches it (`host` for the address in the URL).
async fn serve(
    broker: &RedisBroker,
    config: DashConfig,
    bind: SocketAddr,
    host: IpAddr,
) -> Result<String> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let port = listener.local_addr()?.port();
    let dash = Dash::new(chronos_admin::Admin::new(broker.clone()), config.addr(bind))?;
    tokio::spawn(dash.serve_on(listener, std::future::pending()));
    Ok(match host {
        IpAddr::V4(ip) => format!("http://{ip}:{port}"),
        IpAddr::V6(ip) => format!("http://[{ip}]:{port}"),
    })
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("address")
}

async fn invoices(
    client: &Client,
    queue: &str,
    n: u64,
    opts: EnqueueOptions,
) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for i in 0..n {
        let args = Invoice {
            customer: format!("customer-{i}"),
            cents: 100 * i,
        };
        ids.push(client.enqueue(&args, opts.clone().queue(queue)).await?.id);
    }
    Ok(ids)
}

/// Reloads `url` until the text of `css` contains `want` (pages refresh counts by script, but a
/// task moving between tabs needs a reload).
async fn reload_until(
    b: &Browser,
    url: &str,
    css: &str,
    want: &str,
    within: Duration,
) -> Result<()> {
    let until = Instant::now() + within;
    loop {
        b.goto(url).await?;
        if let Ok(text) = b.text(css).await {
            if text.contains(want) {
                return Ok(());
            }
        }
        if Instant::now() > until {
            bail!("{css} on {url} never showed {want:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn overview_shows_the_counts_of_a_seeded_queue() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    invoices(&client, "billing", 7, EnqueueOptions::new()).await?;
    let late = EnqueueOptions::new().process_in(Duration::from_secs(3600));
    invoices(&client, "billing", 2, late).await?;
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/")).await?;
    b.wait_for_text(
        "#queues tr[data-q=\"billing\"] td[data-f=\"pending\"]",
        "7",
        Duration::from_secs(10),
    )
    .await?;
    b.wait_for_text(
        "#queues tr[data-q=\"billing\"] td[data-f=\"scheduled\"]",
        "2",
        Duration::from_secs(10),
    )
    .await?;
    // The live poll runs: the header says when it last answered.
    b.wait_for_text("#live", "live ", Duration::from_secs(10))
        .await?;
    // The chart is drawn from the history.
    b.wait_for_text("#chart .legend", "processed", Duration::from_secs(15))
        .await?;

    // A count changes and the open page follows without a reload.
    invoices(&client, "billing", 3, EnqueueOptions::new()).await?;
    b.wait_for_text(
        "#queues tr[data-q=\"billing\"] td[data-f=\"pending\"]",
        "10",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-overview").await?;

    b.click("#queues tr[data-q=\"billing\"] a").await?;
    b.wait_for_text("h1", "billing", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#tasks", "customer-0", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-queue").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn archive_a_task_then_run_it_from_the_archive_and_see_it_complete() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    // Kept after completion, so the completed tab can show it.
    let keep = EnqueueOptions::new().retention(Duration::from_secs(600));
    let ids = invoices(&client, "payments", 3, keep).await?;
    let target = ids[1].clone();
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/payments")).await?;
    b.wait_for_text("#tasks", &target, Duration::from_secs(10))
        .await?;
    b.click(&format!(
        "tr[data-id=\"{target}\"] button[data-action=\"archive\"]"
    ))
    .await?;
    b.wait_for_text(".notice", "archive done", Duration::from_secs(10))
        .await?;
    b.wait_for_text(
        "a[data-state=\"archived\"] .count",
        "1",
        Duration::from_secs(10),
    )
    .await?;
    let q = QueueName::new("payments")?;
    let rec = broker.task(&q, &target).await?.context("archived task")?;
    assert_eq!(rec.state.as_str(), "archived");

    // A worker comes up; the two tasks left pending run, the archived one waits.
    let mut mux = Mux::new();
    mux.handle(|_ctx: Context, _t: Task<Invoice>| async move { Ok(()) })?;
    let config = ServerConfig::default()
        .queues([("payments", 1)])
        .concurrency(4);
    let server = Server::new(broker.clone(), mux, config)?.start().await?;

    b.click("a[data-state=\"archived\"]").await?;
    b.wait_for_text("#tasks", &target, Duration::from_secs(10))
        .await?;
    b.screenshot("dash-archived").await?;
    b.click(&format!(
        "tr[data-id=\"{target}\"] button[data-action=\"run\"]"
    ))
    .await?;
    b.wait_for_text(".notice", "run now done", Duration::from_secs(10))
        .await?;

    reload_until(
        &b,
        &format!("{base}/queues/payments?state=completed"),
        "#tasks",
        &target,
        Duration::from_secs(20),
    )
    .await?;
    b.screenshot("dash-completed").await?;
    let rec = broker.task(&q, &target).await?.context("completed task")?;
    assert_eq!(rec.state.as_str(), "completed");
    b.close().await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_schedules_page_shows_a_schedule_with_its_next_run() -> Result<()> {
    let broker = broker().await?;
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    scheduler.register_cron(
        "30 3 * * *",
        &Cleanup,
        ScheduleOptions::new()
            .id("nightly-cleanup")
            .zone("Europe/Berlin"),
    )?;
    let scheduler = scheduler.start().await?;
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    reload_until(
        &b,
        &format!("{base}/schedules"),
        "#schedules",
        "nightly-cleanup",
        Duration::from_secs(15),
    )
    .await?;
    let row = b.text("#schedules tr[data-id=\"nightly-cleanup\"]").await?;
    assert!(
        row.contains("30 3 * * *") && row.contains("Europe/Berlin"),
        "{row}"
    );
    assert!(row.contains("never"), "not fired yet: {row}");
    let next = b
        .text("#schedules tr[data-id=\"nightly-cleanup\"] td[data-f=\"next\"]")
        .await?;
    assert!(next.starts_with("in "), "next run ahead: {next:?}");
    reload_until(
        &b,
        &format!("{base}/schedules"),
        "#leader",
        "epoch",
        Duration::from_secs(15),
    )
    .await?;
    b.screenshot("dash-schedules").await?;
    b.close().await?;
    scheduler.shutdown().await;
    Ok(())
}

/// An address of this machine other than loopback, when it has one (else loopback: the token
/// rule is the same for a console bound to 0.0.0.0).
fn outside_ip() -> IpAddr {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("10.255.255.254:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified() && !ip.is_loopback())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

#[tokio::test]
async fn a_console_on_all_interfaces_refuses_visitors_without_the_token() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    invoices(&client, "secret-queue", 2, EnqueueOptions::new()).await?;
    let all: SocketAddr = "0.0.0.0:0".parse()?;
    assert!(
        Dash::new(
            chronos_admin::Admin::new(broker.clone()),
            DashConfig::default().addr(all)
        )
        .is_err(),
        "no token, not loopback: refused at start"
    );
    let config = DashConfig::default().token(Some("open-sesame".into()));
    let base = serve(&broker, config, all, outside_ip()).await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/secret-queue")).await?;
    b.wait_for_text("h1", "Log in", Duration::from_secs(10))
        .await?;
    let url = b.current_url().await?;
    assert!(url.contains("/login"), "sent to the login page: {url}");
    let body = b.text("body").await?;
    assert!(!body.contains("customer-0"), "nothing of the queue shown");
    b.fill("input[name=\"token\"]", "wrong").await?;
    b.submit("form#login").await?;
    b.wait_for_text("#login-error", "Wrong token", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-login-refused").await?;

    b.fill("input[name=\"token\"]", "open-sesame").await?;
    b.submit("form#login").await?;
    b.wait_for_text("#tasks", "customer-0", Duration::from_secs(10))
        .await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn the_queue_page_shows_and_changes_the_limits_stored_in_redis() -> Result<()> {
    use chronos::{Settings as _, SettingsChange};
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    invoices(&client, "throttled", 3, EnqueueOptions::new()).await?;
    let q = QueueName::new("throttled")?;
    broker
        .change_queue_settings(
            &q,
            &SettingsChange::new().concurrency(chronos::Setting::On(4)),
        )
        .await?;
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/throttled")).await?;
    b.wait_for("#limits-form", Duration::from_secs(10)).await?;
    let shown = b
        .execute(
            "return document.querySelector('#limit-concurrency').value;",
            &[],
        )
        .await?;
    assert_eq!(
        shown.as_str(),
        Some("4"),
        "the stored concurrency is in the form"
    );

    // Lower the concurrency, lift the rate, store an aging time; leave the rest blank.
    b.fill("#limit-concurrency", "1").await?;
    b.fill("#limit-rate", "none").await?;
    b.fill("#limit-aging", "90s").await?;
    b.screenshot("dash-queue-limits").await?;
    b.submit("#limits-save").await?;
    b.wait_for_text(".notice", "limits saved", Duration::from_secs(10))
        .await?;
    let stored = broker.queue_settings(&q).await?;
    assert_eq!(stored.concurrency, Some(chronos::Setting::On(1)));
    assert_eq!(stored.rate, Some(chronos::Setting::Off));
    assert_eq!(stored.aging, Some(Duration::from_secs(90)));
    assert_eq!((stored.burst, stored.per_key_rate), (None, None));

    // An out-of-range value is refused with its reason, and nothing changes.
    b.goto(&format!("{base}/queues/throttled")).await?;
    b.wait_for("#limits-form", Duration::from_secs(10)).await?;
    b.fill("#limit-concurrency", "0").await?;
    b.submit("#limits-save").await?;
    b.wait_for_text(
        "body",
        "concurrency must be at least 1",
        Duration::from_secs(10),
    )
    .await?;
    assert_eq!(broker.queue_settings(&q).await?, stored);

    // Clearing a field unsets it: each server's configuration applies again.
    b.goto(&format!("{base}/queues/throttled")).await?;
    b.wait_for("#limits-form", Duration::from_secs(10)).await?;
    b.fill("#limit-concurrency", "").await?;
    b.submit("#limits-save").await?;
    b.wait_for_text(".notice", "limits saved", Duration::from_secs(10))
        .await?;
    assert_eq!(broker.queue_settings(&q).await?.concurrency, None);
    b.screenshot("dash-queue-limits-saved").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn an_operator_edits_a_waiting_tasks_payload_level_and_run_time() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    let ids = invoices(&client, "edits", 2, EnqueueOptions::new()).await?;
    let target = ids[1].clone();
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/edits/tasks/{target}"))
        .await?;
    b.wait_for_text("#payload", "customer-1", Duration::from_secs(10))
        .await?;
    b.execute(
        "document.querySelector('#edit-payload').value = '{\"customer\": \"edited-co\", \"cents\": 999}';\
         document.querySelector('#edit-level').value = '1';",
        &[],
    )
    .await?;
    b.click("button[data-action=\"edit\"]").await?;
    b.wait_for_text(".notice", "edited", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#payload", "edited-co", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#task-priority", "level 1", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-task-edit").await?;
    let q = QueueName::new("edits")?;
    let rec = broker.task(&q, &target).await?.expect("task");
    let env = rec.envelope.expect("envelope");
    let got: Invoice = chronos::decode_args(&env.payload)?;
    assert_eq!((got.customer.as_str(), got.cents), ("edited-co", 999));
    assert_eq!(
        (rec.state, rec.priority),
        (TaskState::Pending, Priority::level(1)?)
    );

    // Submitted again untouched but for a delay: the payload is left as it is, the task now
    // waits as scheduled.
    b.fill("#edit-in", "1h").await?;
    b.click("button[data-action=\"edit\"]").await?;
    b.wait_for_text("#task-state", "scheduled", Duration::from_secs(10))
        .await?;
    let rec = broker.task(&q, &target).await?.expect("task");
    assert_eq!(rec.envelope.expect("envelope").payload, env.payload);
    // A task that is not waiting has no edit form.
    b.goto(&format!("{base}/queues/edits/tasks/{}", ids[0]))
        .await?;
    b.wait_for("#edit", Duration::from_secs(10)).await?;
    chronos::Operate::act(&broker, &q, &ids[0], chronos::TaskAction::Archive).await?;
    b.goto(&format!("{base}/queues/edits/tasks/{}", ids[0]))
        .await?;
    b.wait_for_text("#task-state", "archived", Duration::from_secs(10))
        .await?;
    let forms = b
        .execute("return document.querySelectorAll('#edit').length;", &[])
        .await?;
    assert_eq!(forms.as_u64(), Some(0), "{forms:?}");
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn an_operator_moves_a_waiting_task_ahead_by_its_priority_level() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    let ids = invoices(&client, "orders", 3, EnqueueOptions::new()).await?;
    let target = ids[2].clone();
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/orders/tasks/{target}"))
        .await?;
    b.wait_for_text("#task-priority", "level 5", Duration::from_secs(10))
        .await?;
    b.execute(
        "document.querySelector('#priority-level').value = '0';",
        &[],
    )
    .await?;
    b.click("button[data-action=\"prioritize\"]").await?;
    b.wait_for_text(".notice", "priority level 0 set", Duration::from_secs(10))
        .await?;
    b.wait_for_text("#task-priority", "level 0", Duration::from_secs(10))
        .await?;
    b.screenshot("dash-task-priority").await?;
    // Waiting first now: the most urgent level is listed (and fetched) first.
    let q = QueueName::new("orders")?;
    let pending = broker.list_tasks(&q, TaskState::Pending, 0, 10).await?;
    assert_eq!(
        pending.first().map(|r| r.id.as_str()),
        Some(target.as_str())
    );
    assert_eq!(pending[0].priority, Priority::HIGHEST);
    // The queue page counts each level in use.
    b.goto(&format!("{base}/queues/orders")).await?;
    b.wait_for_text(
        "#levels tr[data-level=\"0\"] td[data-l=\"pending\"]",
        "1",
        Duration::from_secs(10),
    )
    .await?;
    b.wait_for_text(
        "#levels tr[data-level=\"5\"] td[data-l=\"pending\"]",
        "2",
        Duration::from_secs(10),
    )
    .await?;
    b.screenshot("dash-queue-levels").await?;
    b.close().await?;
    Ok(())
}

#[tokio::test]
async fn the_queue_page_lists_tenants_and_pauses_one_from_its_row() -> Result<()> {
    let broker = broker().await?;
    let client = Client::new(broker.clone());
    for (tenant, n) in [("acme", 4), ("globex", 2), ("initech", 1)] {
        invoices(&client, "shared", n, EnqueueOptions::new().tenant(tenant)).await?;
    }
    let base = serve(
        &broker,
        DashConfig::default(),
        loopback(),
        [127, 0, 0, 1].into(),
    )
    .await?;
    let admin = chronos_admin::Admin::new(broker.clone());
    let cell = |tenant: &str, field: &str| {
        format!("#tenants tr[data-tenant=\"{tenant}\"] td[data-t=\"{field}\"]")
    };

    let b = Browser::start().await?;
    b.goto(&format!("{base}/queues/shared")).await?;
    b.wait_for("#tenants-table", Duration::from_secs(10))
        .await?;
    // The busiest first, with their counts.
    let order = b
        .execute(
            "return [...document.querySelectorAll('#tenants-table tbody tr')].map(r => r.dataset.tenant);",
            &[],
        )
        .await?;
    let order: Vec<&str> = order
        .as_array()
        .context("a list")?
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert_eq!(order, ["acme", "globex", "initech"]);
    for (tenant, n) in [("acme", "4"), ("globex", "2"), ("initech", "1")] {
        assert_eq!(b.text(&cell(tenant, "waiting")).await?, n, "{tenant}");
        assert_eq!(b.text(&cell(tenant, "ready")).await?, "yes", "{tenant}");
    }
    b.wait_for_text(
        "#tenant-totals",
        "3 tenants: 7 waiting",
        Duration::from_secs(5),
    )
    .await?;

    // Pause globex from its row: it leaves the rotation and says so.
    b.click("#tenants tr[data-tenant=\"globex\"] button[data-tenant-action=\"pause\"]")
        .await?;
    b.wait_for_text(".notice", "tenant globex paused", Duration::from_secs(10))
        .await?;
    b.wait_for_text(&cell("globex", "paused"), "paused", Duration::from_secs(10))
        .await?;
    assert_eq!(b.text(&cell("globex", "ready")).await?, "no");
    assert_eq!(b.text(&cell("acme", "ready")).await?, "yes");
    let list = admin.tenants("shared", 10).await?;
    let globex = list
        .tenants
        .iter()
        .find(|t| t.tenant == "globex")
        .context("globex listed")?;
    assert_eq!(globex.settings.paused, Some(true));
    assert!(!globex.ready);

    // Give acme a weight through the form its row opens.
    b.click("#tenants a[data-tenant-edit=\"acme\"]").await?;
    b.wait_for_text("#tenant-form h3", "acme", Duration::from_secs(10))
        .await?;
    b.fill("#tenant-weight", "3").await?;
    b.submit("#tenant-save").await?;
    b.wait_for_text(
        ".notice",
        "settings of tenant acme saved",
        Duration::from_secs(10),
    )
    .await?;
    b.wait_for_text(&cell("acme", "weight"), "3", Duration::from_secs(10))
        .await?;
    b.execute("document.querySelector('#tenants').scrollIntoView();", &[])
        .await?;
    b.screenshot("dash-queue-tenants").await?;
    let list = admin.tenants("shared", 10).await?;
    assert_eq!(list.tenants[0].settings.weight, Some(3));
    assert_eq!(list.tenants[0].settings.concurrency, None);

    // An out-of-range weight is refused with its reason, and nothing changes.
    b.goto(&format!("{base}/queues/shared?tenant=acme")).await?;
    b.wait_for("#tenant-form", Duration::from_secs(10)).await?;
    b.fill("#tenant-weight", "0").await?;
    b.submit("#tenant-save").await?;
    b.wait_for_text("body", "weight must be 1 to 1000", Duration::from_secs(10))
        .await?;
    assert_eq!(
        admin.tenants("shared", 10).await?.tenants[0]
            .settings
            .weight,
        Some(3)
    );

    // Resume globex: back in the rotation.
    b.goto(&format!("{base}/queues/shared")).await?;
    b.click("#tenants tr[data-tenant=\"globex\"] button[data-tenant-action=\"resume\"]")
        .await?;
    b.wait_for_text(".notice", "tenant globex resumed", Duration::from_secs(10))
        .await?;
    b.wait_for_text(&cell("globex", "ready"), "yes", Duration::from_secs(10))
        .await?;
    b.close().await?;
    Ok(())
}
