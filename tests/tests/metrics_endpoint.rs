//! The Prometheus page a worker serves with one line of config: scraped over HTTP before and
//! after work, its counters, histograms (with buckets, not quantiles) and the sampled queue
//! gauges move. One test in its own binary: the metrics recorder is global to the process.

use std::net::SocketAddr;
use std::time::Duration;

use chronos::prelude::*;
use chronos::{Inspect, QueueName};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Serialize, Deserialize)]
struct Ok1;
impl TaskArgs for Ok1 {
    const KIND: &'static str = "metrics:ok";
}

#[derive(Serialize, Deserialize)]
struct Doomed;
impl TaskArgs for Doomed {
    const KIND: &'static str = "metrics:doomed";
}

#[derive(Serialize, Deserialize)]
struct Tick;
impl TaskArgs for Tick {
    const KIND: &'static str = "metrics:tick";
}

/// The whole answer to `GET <path>`.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
        .await
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}

async fn scrape(addr: SocketAddr) -> String {
    let out = get(addr, "/metrics").await;
    assert!(
        out.starts_with("HTTP/1.1 200 OK\r\n"),
        "bad response: {out}"
    );
    out
}

/// Checks what `promtool check metrics` checks first: every family of the page has one
/// `# HELP` and one `# TYPE` line, before its samples. Ours have real descriptions.
fn every_family_has_help_and_type(page: &str) {
    use std::collections::HashMap;
    let body = page.split_once("\r\n\r\n").map_or(page, |(_, b)| b);
    let mut help: HashMap<&str, &str> = HashMap::new();
    let mut kind: HashMap<&str, &str> = HashMap::new();
    let mut families = 0;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').expect("a HELP line has a text");
            assert!(
                help.insert(name, text).is_none(),
                "two HELP lines for {name}"
            );
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, t) = rest.split_once(' ').expect("a TYPE line has a type");
            assert!(
                help.contains_key(name),
                "TYPE before HELP for {name}: {body}"
            );
            assert!(kind.insert(name, t).is_none(), "two TYPE lines for {name}");
            families += 1;
        } else if !line.is_empty() {
            let sample = line.split(['{', ' ']).next().unwrap_or_default();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    sample
                        .strip_suffix(s)
                        .filter(|f| kind.get(f) == Some(&"histogram"))
                })
                .unwrap_or(sample);
            assert!(kind.contains_key(family), "{sample} has no TYPE: {body}");
        }
    }
    assert!(families >= 10, "{body}");
    for (name, text) in &help {
        if name.starts_with("chronos_") {
            assert!(
                !text.contains("no description registered"),
                "{name} is not described"
            );
        }
    }
}

/// The value of the first sample of `name` whose labels include every `labels` pair.
fn value(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn scraped_metrics_move_with_the_work() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    let client = Client::new(broker.clone());
    let q = "work";
    // A queue no server serves: its pending tasks wait, so its gauges have something to show.
    let idle = "idle";
    for _ in 0..2 {
        client
            .enqueue(&Ok1, EnqueueOptions::new().queue(idle))
            .await
            .expect("enqueue");
    }
    for _ in 0..3 {
        client
            .enqueue(
                &Ok1,
                EnqueueOptions::new()
                    .queue(idle)
                    .process_in(Duration::from_secs(3600)),
            )
            .await
            .expect("enqueue");
    }
    // And one of priority level 1: the sampler reports levels for this queue.
    client
        .enqueue(
            &Ok1,
            EnqueueOptions::new()
                .queue(idle)
                .priority(chronos::Priority::HIGH),
        )
        .await
        .expect("enqueue");
    broker
        .set_paused(&QueueName::new(idle).expect("name"), true)
        .await
        .expect("pause");
    // And a queue no server serves shared by twelve tenants, tNN with NN + 1 tasks: the ten
    // busiest are named, the other two summed as `other`.
    let shared = "shared";
    for t in 0..12u32 {
        let opts = EnqueueOptions::new()
            .queue(shared)
            .tenant(format!("t{t:02}"));
        for _ in 0..=t {
            client.enqueue(&Ok1, opts.clone()).await.expect("enqueue");
        }
    }

    let mut mux = Mux::new();
    mux.handle(|_: Context, _: Task<Ok1>| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(())
    })
    .expect("register");
    mux.handle(|_: Context, _: Task<Doomed>| async {
        Err::<(), _>(TaskError::skip_retry("never works"))
    })
    .expect("register");
    mux.handle(|_: Context, _: Task<Tick>| async { Ok(()) })
        .expect("register");
    let config = ServerConfig::default()
        .queues([(q, 1)])
        .metrics_addr(([127, 0, 0, 1], 0).into())
        .sample_queues(Duration::from_millis(200));
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let addr = server.metrics_addr().expect("metrics address");

    // Before any work: the sampler reports the idle queue, nothing was processed yet.
    chronos_testkit::eventually(Duration::from_secs(10), "idle queue sampled", || async {
        let page = scrape(addr).await;
        value(
            &page,
            "chronos_queue_tasks",
            &[("queue", idle), ("state", "pending")],
        ) == Some(3.0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = scrape(addr).await;
    assert_eq!(
        value(
            &before,
            "chronos_queue_tasks",
            &[("queue", idle), ("state", "scheduled")]
        ),
        Some(3.0),
        "{before}"
    );
    assert_eq!(
        value(&before, "chronos_queue_paused", &[("queue", idle)]),
        Some(1.0)
    );
    let age = value(
        &before,
        "chronos_queue_oldest_pending_age_seconds",
        &[("queue", idle)],
    )
    .expect("oldest pending age");
    assert!(
        age >= 0.5,
        "the oldest pending task has waited since before the sleep: {age}"
    );
    for (level, n) in [("2", 1.0), ("5", 2.0)] {
        assert_eq!(
            value(
                &before,
                "chronos_queue_level_tasks",
                &[("queue", idle), ("level", level), ("state", "pending")]
            ),
            Some(n),
            "{before}"
        );
        let age = value(
            &before,
            "chronos_queue_level_oldest_pending_age_seconds",
            &[("queue", idle), ("level", level)],
        )
        .expect("oldest pending age of the level");
        assert!(age >= 0.5, "level {level}: {age}");
    }
    chronos_testkit::eventually(Duration::from_secs(10), "tenants sampled", || async {
        let page = scrape(addr).await;
        value(
            &page,
            "chronos_queue_tenant_tasks",
            &[("queue", shared), ("tenant", "other"), ("state", "waiting")],
        ) == Some(3.0)
    })
    .await;
    let page = scrape(addr).await;
    let tenant = |t: &str, state: &str| {
        value(
            &page,
            "chronos_queue_tenant_tasks",
            &[("queue", shared), ("tenant", t), ("state", state)],
        )
    };
    assert_eq!(tenant("t11", "waiting"), Some(12.0), "{page}");
    assert_eq!(tenant("t02", "waiting"), Some(3.0), "{page}");
    assert_eq!(tenant("t11", "running"), Some(0.0), "{page}");
    assert_eq!(tenant("t01", "waiting"), None, "summed in other: {page}");
    let labels: std::collections::HashSet<&str> = page
        .lines()
        .filter(|l| l.starts_with("chronos_queue_tenant_tasks{") && l.contains("queue=\"shared\""))
        .filter_map(|l| l.split("tenant=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(labels.len(), 11, "ten tenants and other: {labels:?}");
    let age = value(
        &page,
        "chronos_queue_tenant_oldest_pending_age_seconds",
        &[("queue", shared), ("tenant", "t00")],
    );
    assert_eq!(age, None, "{page}");
    for t in ["t11", "other"] {
        let age = value(
            &page,
            "chronos_queue_tenant_oldest_pending_age_seconds",
            &[("queue", shared), ("tenant", t)],
        )
        .expect("oldest waiting age of the tenant");
        assert!(age >= 0.5, "{t}: {age}");
    }
    let ok = [("queue", q), ("kind", Ok1::KIND), ("outcome", "succeeded")];
    assert_eq!(value(&before, "chronos_tasks_processed_total", &ok), None);

    // Work: five successes and one task that dead-letters at once.
    for _ in 0..5 {
        client
            .enqueue(&Ok1, EnqueueOptions::new().queue(q))
            .await
            .expect("enqueue");
    }
    client
        .enqueue(&Doomed, EnqueueOptions::new().queue(q))
        .await
        .expect("enqueue");
    // And a scheduler on the same process, whose triggers land in the served queue.
    let mut scheduler = Scheduler::new(
        broker.clone(),
        SchedulerConfig {
            leader_ttl: Duration::from_secs(1),
            ..SchedulerConfig::default()
        },
    );
    scheduler
        .register_interval(
            Duration::from_secs(1),
            &Tick,
            ScheduleOptions::new().queue(q),
        )
        .expect("schedule");
    let scheduler = scheduler.start().await.expect("scheduler");

    chronos_testkit::eventually(Duration::from_secs(15), "work counted", || async {
        let page = scrape(addr).await;
        value(&page, "chronos_tasks_processed_total", &ok) == Some(5.0)
            && value(
                &page,
                "chronos_tasks_dead_lettered_total",
                &[("queue", q), ("kind", Doomed::KIND), ("action", "archived")],
            ) == Some(1.0)
            && value(
                &page,
                "chronos_scheduler_triggers_fired_total",
                &[("queue", q)],
            )
            .is_some_and(|n| n >= 1.0)
            && value(
                &page,
                "chronos_tasks_processed_total",
                &[("queue", q), ("kind", Tick::KIND), ("outcome", "succeeded")],
            )
            .is_some_and(|n| n >= 1.0)
    })
    .await;
    let after = scrape(addr).await;
    let doomed = [("queue", q), ("kind", Doomed::KIND)];
    assert_eq!(
        value(
            &after,
            "chronos_tasks_processed_total",
            &[
                ("queue", q),
                ("kind", Doomed::KIND),
                ("outcome", "dead_lettered")
            ]
        ),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        value(&after, "chronos_tasks_failed_total", &doomed),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "chronos_tasks_failed_total", &ok[..2]),
        Some(0.0)
    );
    // Histograms with explicit buckets: five runs of about 20 ms each.
    let durations = [("queue", q), ("kind", Ok1::KIND)];
    assert_eq!(
        value(&after, "chronos_task_duration_seconds_count", &durations),
        Some(5.0)
    );
    assert_eq!(
        value(
            &after,
            "chronos_task_duration_seconds_bucket",
            &[("queue", q), ("kind", Ok1::KIND), ("le", "0.01")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &after,
            "chronos_task_duration_seconds_bucket",
            &[("queue", q), ("kind", Ok1::KIND), ("le", "+Inf")]
        ),
        Some(5.0)
    );
    assert!(
        !after.contains("quantile="),
        "a summary slipped in: {after}"
    );
    assert!(
        value(
            &after,
            "chronos_scheduler_trigger_lateness_seconds_bucket",
            &[("queue", q), ("le", "+Inf")]
        )
        .is_some_and(|n| n >= 1.0),
        "{after}"
    );
    assert_eq!(value(&after, "chronos_scheduler_leader", &[]), Some(1.0));
    every_family_has_help_and_type(&after);
    // Only /metrics is the page; /healthz is a probe of its own; every other path is a 404, so
    // a probe on a wrong path does not read as healthy.
    for path in ["/nope", "/", "/metrics/extra"] {
        let answer = get(addr, path).await;
        assert!(answer.starts_with("HTTP/1.1 404 "), "{path}: {answer}");
        assert!(!answer.contains("chronos_"), "{path}: {answer}");
    }
    let health = get(addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    assert!(health.ends_with("\r\n\r\nok\n"), "{health}");
    assert!(scrape(addr).await.contains("chronos_tasks_processed_total"));
    let with_query = get(addr, "/metrics?x=1").await;
    assert!(
        with_query.starts_with("HTTP/1.1 200 OK\r\n"),
        "{with_query}"
    );
    // The served queue's gauges are sampled too, and it ends empty.
    chronos_testkit::eventually(Duration::from_secs(10), "work queue drained", || async {
        let page = scrape(addr).await;
        value(
            &page,
            "chronos_queue_tasks",
            &[("queue", q), ("state", "archived")],
        ) == Some(1.0)
            && value(
                &page,
                "chronos_queue_tasks",
                &[("queue", q), ("state", "pending")],
            ) == Some(0.0)
    })
    .await;

    scheduler.shutdown().await;
    server.shutdown().await;
    // The page goes away with the server.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
