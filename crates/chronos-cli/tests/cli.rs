//! The `chronos` binary run as a process against a real Redis.

use std::process::{Command, Output};
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, RedisBroker, SettleExt, TaskArgs};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Email {
    to: String,
}

impl TaskArgs for Email {
    const KIND: &'static str = "email";
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Invoice {
    customer: String,
}

impl TaskArgs for Invoice {
    const KIND: &'static str = "invoice";
}

struct Env {
    url: String,
    ns: String,
    broker: RedisBroker,
}

async fn env() -> Env {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.as_str())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    Env { url, ns, broker }
}

impl Env {
    /// Runs `chronos <args>` with this test's Redis (from the environment) and namespace.
    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
            .env("CHRONOS_REDIS_URL", &self.url)
            .arg("--namespace")
            .arg(&self.ns)
            .args(args)
            .output()
            .expect("run chronos");
        out
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "chronos {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn json(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        self.ok(&all)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Enqueues one mail to `to` in queue `mail` and fetches it as worker `w1` (not started).
    async fn delivered_mail(&self, to: &str) -> (chronos_broker::TaskInfo, chronos_broker::Lease) {
        use chronos_broker::{Consume, QueueName};
        let info = Client::new(self.broker.clone())
            .enqueue(
                &Email { to: to.into() },
                EnqueueOptions::new().queue("mail"),
            )
            .await
            .expect("enqueue");
        let q = QueueName::new("mail").expect("queue");
        let mut reader = self.broker.open_reader().await.expect("reader");
        let lease = self
            .broker
            .fetch(&mut reader, &q, "w1", &[], 1, Duration::ZERO)
            .await
            .expect("fetch")
            .leases
            .remove(0);
        self.broker.close_reader(reader).await;
        (info, lease)
    }

    async fn fill(&self) -> Vec<String> {
        let client = Client::new(self.broker.clone());
        let mut ids = Vec::new();
        for n in 0..30 {
            let info = client
                .enqueue(
                    &Email {
                        to: format!("user{n}@example.com"),
                    },
                    EnqueueOptions::new().queue("mail"),
                )
                .await
                .expect("enqueue");
            ids.push(info.id);
        }
        for c in ["acme", "globex"] {
            client
                .enqueue(
                    &Invoice { customer: c.into() },
                    EnqueueOptions::new()
                        .queue("billing")
                        .process_in(Duration::from_secs(3600)),
                )
                .await
                .expect("enqueue");
        }
        ids
    }
}

#[tokio::test]
async fn queue_ls_prints_a_table_and_json_lines() {
    let e = env().await;
    e.fill().await;
    let table = e.ok(&["queue", "ls"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("QUEUE"), "{table}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("mail") && l.contains(" 30 ")),
        "{table}"
    );
    let rows = e.json(&["queue", "ls"]);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["name"], "billing");
    assert_eq!(rows[0]["scheduled"], 2);
    assert_eq!(rows[1]["name"], "mail");
    assert_eq!(rows[1]["pending"], 30);
    let stats = e.json(&["stats"]);
    assert_eq!(stats[0]["total"]["pending"], 30);
    assert_eq!(stats[0]["servers"], 0);
}

#[tokio::test]
async fn task_ls_pages_by_cursor_and_filters_by_payload() {
    let e = env().await;
    e.fill().await;
    let page = e.json(&["task", "ls", "mail", "--limit", "20"]);
    assert_eq!(page.len(), 21, "20 tasks then the cursor line");
    let next = page[20]["next"].as_str().expect("cursor").to_string();
    let rest = e.json(&["task", "ls", "mail", "--limit", "20", "--cursor", &next]);
    assert_eq!(rest.len(), 10);
    assert_eq!(rest[0]["payload"]["to"], "user20@example.com");
    let hit = e.json(&["task", "ls", "mail", "--grep", "user7@"]);
    assert_eq!(hit.len(), 1);
    assert_eq!(hit[0]["kind"], "email");
    let table = e.ok(&[
        "task",
        "ls",
        "billing",
        "--state",
        "scheduled",
        "--kind",
        "invoice",
    ]);
    assert!(table.contains(r#"{"customer":"acme"}"#), "{table}");
}

#[tokio::test]
async fn task_actions_on_one_task_and_in_bulk() {
    let e = env().await;
    let ids = e.fill().await;
    let id = ids[0].as_str();
    assert!(e
        .ok(&["task", "archive", "mail", id])
        .contains("archive done"));
    let shown = e.json(&["task", "show", "mail", id]);
    assert_eq!(shown[0]["state"], "archived");
    assert_eq!(e.json(&["task", "run", "mail", id])[0]["changed"], true);
    assert_eq!(e.json(&["task", "show", "mail", id])[0]["state"], "pending");
    assert_eq!(e.json(&["task", "rm", "mail", id])[0]["changed"], true);
    // A second delete (or a mistyped id) is not a success: the task is not there.
    let out = e.run(&["task", "rm", "mail", id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task"));

    // Errors: one line on stderr, status 1.
    let out = e.run(&["task", "show", "mail", id]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no task"), "{err}");
    let out = e.run(&["task", "cancel", "mail", &ids[1]]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is pending: cannot cancel"));

    // Bulk: archive every pending email whose payload mentions user1 (user1, user10..user19).
    let r = e.json(&[
        "task", "archive", "mail", "--all", "--state", "pending", "--kind", "email", "--grep",
        "\"user1",
    ]);
    assert_eq!(r[0]["report"]["done"], 11);
    let r = e.json(&["task", "run", "mail", "--all", "--state", "archived"]);
    assert_eq!(r[0]["report"]["done"], 11);
    let r = e.json(&["task", "rm", "mail", "--all", "--state", "pending"]);
    assert_eq!(r[0]["report"]["done"], 29);
    assert_eq!(e.json(&["queue", "show", "mail"])[0]["queue"]["pending"], 0);
}

#[tokio::test]
async fn queue_pause_resume_history_and_rm() {
    let e = env().await;
    e.fill().await;
    e.ok(&["queue", "pause", "mail"]);
    assert_eq!(
        e.json(&["queue", "show", "mail"])[0]["queue"]["paused"],
        true
    );
    e.ok(&["queue", "resume", "mail"]);
    assert_eq!(
        e.json(&["queue", "show", "mail"])[0]["queue"]["paused"],
        false
    );
    let days = e.json(&["queue", "history", "mail", "--last", "3"]);
    assert_eq!(days.len(), 3);
    let minutes = e.json(&["queue", "history", "mail", "--by", "minute"]);
    assert_eq!(minutes.len(), 60);
    let out = e.run(&["queue", "rm", "mail"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds 30 tasks"));
    let r = e.json(&["queue", "rm", "mail", "--force"]);
    assert_eq!(r[0]["tasks_deleted"], 30);
    let rows = e.json(&["queue", "ls"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "billing");
}

#[tokio::test]
async fn servers_leader_and_schedules_answer_when_there_are_none() {
    let e = env().await;
    assert_eq!(e.json(&["server", "ls"]).len(), 0);
    assert_eq!(e.json(&["schedule", "ls"]).len(), 0);
    assert_eq!(e.json(&["leader"])[0]["leader"], serde_json::Value::Null);
    assert!(e.ok(&["leader"]).contains("no leader"));
    assert!(e.ok(&["schedule", "ls"]).starts_with("ID"));

    // A schedule registered and never fired, and a live server.
    use chronos_broker::{Maintain, ScheduleEntry, Schedules, ServerRecord};
    let entry = ScheduleEntry {
        id: "nightly-report".into(),
        spec: "0 3 * * *".into(),
        zone: "Europe/Berlin".into(),
        queue: "reports".into(),
        kind: "report".into(),
        next_run_ms: Some(chronos_broker::now_ms() + 3_600_000),
        every_ms: None,
        last_fired_ms: None,
        last_task_id: None,
        registered_by: "host-1".into(),
        last_seen_ms: 0,
        stale: false,
        source: chronos_broker::ScheduleSource::Code,
        paused: false,
    };
    assert!(e
        .broker
        .publish_schedules("host-1", std::slice::from_ref(&entry))
        .await
        .expect("publish"));
    let table = e.ok(&["schedule", "ls"]);
    assert!(
        table.contains("nightly-report") && table.contains("never"),
        "{table}"
    );
    let shown = e.json(&["schedule", "show", "nightly-report"]);
    assert_eq!(shown[0]["zone"], "Europe/Berlin");
    assert_eq!(e.run(&["schedule", "show", "nope"]).status.code(), Some(1));
    let record = ServerRecord {
        id: "srv-1".into(),
        host: "host-1".into(),
        pid: 42,
        queues: vec![("default".into(), 1)],
        concurrency: 8,
        started_at_ms: chronos_broker::now_ms(),
        running: 3,
        last_seen_ms: chronos_broker::now_ms(),
        tasks: Vec::new(),
        archive_max: None,
    };
    e.broker
        .publish_server(&record, Duration::from_secs(30))
        .await
        .expect("publish server");
    let servers = e.json(&["server", "ls"]);
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["running"], 3);
    assert!(e.ok(&["server", "ls"]).contains("3/8"));
}

#[tokio::test]
async fn usage_errors_exit_2_and_unreachable_redis_exits_1() {
    let e = env().await;
    for args in [
        vec!["task", "run", "mail"],
        vec!["task", "ls", "mail", "--state", "bogus"],
        vec!["task", "rm", "mail", "--all"],
        vec!["frobnicate"],
    ] {
        assert_eq!(e.run(&args).status.code(), Some(2), "{args:?}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .args(["--redis", "redis://127.0.0.1:1", "queue", "ls"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot connect to redis://127.0.0.1:1: connection refused"),
        "in words, not Rust's debug text: {err}"
    );
    assert!(!err.contains("Os {"), "{err}");
    // Not a Redis URL; a page of no task.
    for args in [
        vec!["--redis", "http://127.0.0.1:1", "queue", "ls"],
        vec!["task", "ls", "mail", "--limit", "0"],
        vec!["task", "ls", "mail", "--limit", "5001"],
    ] {
        let out = e.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("is not a Redis URL") || err.contains("not in 1..=5000"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn runtime_schedules_are_added_listed_paused_run_and_removed() {
    let e = env().await;
    // Added: shown with its source, next run computed from the cron expression.
    let added = e.json(&[
        "schedule",
        "add",
        "nightly",
        "--kind",
        "invoice",
        "--payload",
        r#"{"customer":"acme"}"#,
        "--queue",
        "billing",
        "--cron",
        "0 3 * * *",
        "--zone",
        "Europe/Berlin",
        "--max-retry",
        "3",
    ]);
    assert_eq!(added[0]["changed"], true);
    let again = e.ok(&[
        "schedule",
        "add",
        "nightly",
        "--kind",
        "invoice",
        "--payload",
        r#"{"customer":"acme"}"#,
        "--queue",
        "billing",
        "--cron",
        "0 3 * * *",
        "--zone",
        "Europe/Berlin",
        "--max-retry",
        "3",
    ]);
    assert!(again.contains("nothing changed"), "{again}");
    e.ok(&[
        "schedule", "add", "beat", "--kind", "email", "--every", "30s",
    ]);
    let listed = e.json(&["schedule", "ls"]);
    assert_eq!(listed.len(), 2);
    let nightly = listed
        .iter()
        .find(|s| s["id"] == "nightly")
        .expect("listed");
    assert_eq!(nightly["source"], "runtime");
    assert_eq!(nightly["paused"], false);
    assert_eq!(nightly["queue"], "billing");
    assert!(nightly["next_run_ms"].as_i64().is_some(), "{nightly}");
    let table = e.ok(&["schedule", "ls"]);
    assert!(
        table.contains("SOURCE") && table.contains("runtime"),
        "{table}"
    );
    // The zone once, in its own column.
    assert_eq!(table.matches("Europe/Berlin").count(), 1, "{table}");
    assert!(!table.contains("(Europe/Berlin)"), "{table}");

    // Invalid input is refused and writes nothing.
    for bad in [
        vec![
            "schedule",
            "add",
            "x",
            "--kind",
            "k",
            "--cron",
            "61 * * * *",
        ],
        vec!["schedule", "add", "x", "--kind", "k", "--every", "500ms"],
        vec![
            "schedule",
            "add",
            "x",
            "--kind",
            "k",
            "--cron",
            "0 3 * * *",
            "--zone",
            "Mars/Base",
        ],
        vec![
            "schedule",
            "add",
            "x",
            "--kind",
            "k",
            "--every",
            "1s",
            "--payload",
            "{nope",
        ],
        vec!["schedule", "pause", "ghost"],
    ] {
        let out = e.run(&bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
    }
    // Neither or both specs: a usage error.
    assert_eq!(
        e.run(&["schedule", "add", "x", "--kind", "k"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(e.json(&["schedule", "ls"]).len(), 2);

    // Paused, then shown as paused with no next run.
    assert_eq!(
        e.json(&["schedule", "pause", "nightly"])[0]["changed"],
        true
    );
    let shown = e.json(&["schedule", "show", "nightly"]);
    assert_eq!(shown[0]["paused"], true);
    assert_eq!(shown[0]["next_run_ms"], serde_json::Value::Null);
    assert!(e.ok(&["schedule", "ls"]).contains("paused"));

    // Run now, twice with one request id: one task, carrying the payload.
    let ran = e.json(&["schedule", "run", "nightly", "--request", "r1"]);
    assert_eq!(ran[0]["outcome"], "fired");
    let ran = e.json(&["schedule", "run", "nightly", "--request", "r1"]);
    assert_eq!(ran[0]["outcome"], "duplicate");
    let tasks = e.json(&["task", "ls", "billing"]);
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["id"], "nightly:run:r1");
    assert_eq!(tasks[0]["payload"]["customer"], "acme");

    // Removed: gone from the listing; removing again is an error.
    e.ok(&["schedule", "resume", "nightly"]);
    e.ok(&["schedule", "rm", "nightly"]);
    let listed = e.json(&["schedule", "ls"]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], "beat");
    assert_eq!(e.run(&["schedule", "rm", "nightly"]).status.code(), Some(1));
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hostile {
    note: String,
}

impl TaskArgs for Hostile {
    const KIND: &'static str = "evil\x1b]0;owned\x07\x1b[2J";
}

#[tokio::test]
async fn a_typo_in_a_queue_name_fails_and_names_the_queue_meant() {
    let e = env().await;
    e.fill().await;
    let out = e.run(&["queue", "pause", "mial"]);
    assert_eq!(out.status.code(), Some(1), "a typo is not a success");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no queue \"mial\""), "{err}");
    assert!(err.contains("did you mean \"mail\""), "{err}");
    assert!(err.contains("known queues: billing, mail"), "{err}");
    // Nothing was paused, not even the typo.
    let rows = e.json(&["queue", "ls"]);
    assert!(rows.iter().all(|r| r["paused"] == false), "{rows:?}");
    assert_eq!(rows.len(), 2);
    for args in [
        vec!["queue", "resume", "nosuchqueue"],
        vec!["queue", "show", "nosuchqueue"],
        vec!["queue", "rm", "nosuchqueue", "--force"],
        vec!["queue", "history", "nosuchqueue"],
        vec!["task", "ls", "nosuchqueue"],
        vec!["task", "show", "nosuchqueue", "some-id"],
        vec!["task", "rm", "nosuchqueue", "--all", "--state", "archived"],
    ] {
        let out = e.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no queue \"nosuchqueue\""), "{args:?}: {err}");
    }
}

#[tokio::test]
async fn a_bogus_task_id_fails_for_every_action() {
    let e = env().await;
    e.fill().await;
    for action in ["rm", "run", "archive", "cancel"] {
        let out = e.run(&["task", action, "mail", "bogus-id"]);
        assert_eq!(out.status.code(), Some(1), "task {action}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no task \"bogus-id\""), "task {action}: {err}");
    }
}

#[tokio::test]
async fn a_namespace_without_queues_names_the_namespaces_that_hold_some() {
    let e = env().await;
    e.fill().await;
    let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &e.url)
        .args(["--namespace", &format!("{}-typo", e.ns), "queue", "ls"])
        .output()
        .expect("run chronos");
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no queue"), "{err}");
    assert!(
        err.contains(&e.ns),
        "the namespace with queues is named: {err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &e.url)
        .args([
            "--namespace",
            &format!("{}-typo", e.ns),
            "queue",
            "pause",
            "mail",
        ])
        .output()
        .expect("run chronos");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&e.ns) && err.contains("--namespace"), "{err}");
}

#[tokio::test]
async fn task_action_usage_puts_the_queue_before_the_id_and_kind_says_it_matches_exactly() {
    let e = env().await;
    for action in ["run", "rm", "archive", "cancel"] {
        let help = e.ok(&["task", action, "--help"]);
        let usage = help
            .lines()
            .find(|l| l.starts_with("Usage:"))
            .expect("usage line");
        assert!(
            usage.contains(&format!("task {action} [OPTIONS] <QUEUE> <ID>")),
            "{usage}"
        );
        assert!(!help.contains("<ID|--all> <QUEUE>"), "{help}");
        assert!(help.contains("exactly this kind"), "{help}");
        assert!(help.contains("trailing `*`"), "{help}");
    }
    assert!(e
        .ok(&["task", "ls", "--help"])
        .contains("exactly this kind"));
    // A usage error shows the same order.
    let out = e.run(&["task", "run", "mail"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<QUEUE> <ID>"), "{err}");
}

#[tokio::test]
async fn a_bulk_action_shows_progress_on_stderr_and_keeps_stdout_to_the_result() {
    let e = env().await;
    let client = Client::new(e.broker.clone());
    let all: Vec<Email> = (0..3000)
        .map(|n| Email {
            to: format!("bulk{n}@example.com"),
        })
        .collect();
    let opts = EnqueueOptions::new().queue("bulk");
    for r in client
        .enqueue_batch(all.iter().map(|t| (t, opts.clone())))
        .await
        .expect("enqueue")
    {
        r.expect("enqueued");
    }
    let out = e.run(&[
        "--json", "task", "archive", "bulk", "--all", "--state", "pending",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout holds the result only: {stdout}");
    let r: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    assert_eq!(r["report"]["done"], 3000);
    assert_eq!(r["report"]["finished"], true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("archive: ") && err.contains(" done of about 3000"),
        "progress on stderr: {err}"
    );
}

#[tokio::test]
async fn control_characters_from_tasks_never_reach_the_terminal() {
    let e = env().await;
    let client = Client::new(e.broker.clone());
    client
        .enqueue(
            &Hostile {
                note: "csi\u{9b}31m bidi\u{202e}txt".into(),
            },
            EnqueueOptions::new().queue("hostile"),
        )
        .await
        .expect("enqueue");
    let table = e.ok(&["task", "ls", "hostile"]);
    assert!(table.contains("evil\\u{1b}]0;owned"), "{table}");
    for bad in ['\x1b', '\x07', '\u{9b}', '\u{202e}'] {
        assert!(
            !table.contains(bad),
            "{bad:?} reached the terminal: {table:?}"
        );
    }
    let id = e.json(&["task", "ls", "hostile"])[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let shown = e.ok(&["task", "show", "hostile", &id]);
    for bad in ['\x1b', '\x07', '\u{9b}', '\u{202e}'] {
        assert!(
            !shown.contains(bad),
            "{bad:?} reached the terminal: {shown:?}"
        );
    }
}

#[tokio::test]
async fn a_password_in_the_url_is_never_printed() {
    let out = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .args([
            "--redis",
            "redis://ops:userinfo-secret@127.0.0.1:1/0?password=query-secret&timeout=1",
            "queue",
            "ls",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect to redis://ops:***@127.0.0.1:1/0"),
        "{err}"
    );
    assert!(
        !err.contains("userinfo-secret") && !err.contains("query-secret"),
        "{err}"
    );
}

#[tokio::test]
async fn queue_limits_are_set_listed_lifted_and_unset() {
    let e = env().await;
    e.fill().await;
    // Nothing stored: every field is absent (each server's configuration applies).
    let rows = e.json(&["queue", "limits", "ls"]);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["queue"], "mail");
    assert!(rows[1]["rate"].is_null() && rows[1]["concurrency"].is_null());

    let set = e.json(&[
        "queue",
        "limits",
        "set",
        "mail",
        "--rate",
        "100/1s",
        "--burst",
        "5",
        "--concurrency",
        "10",
        "--per-key-rate",
        "5/1s",
        "--aging",
        "60s",
    ]);
    assert_eq!(set[0]["rate"], "100/1s");
    assert_eq!(set[0]["burst"], "5");
    assert_eq!(set[0]["concurrency"], "10");
    assert_eq!(set[0]["per_key_rate"], "5/1s");
    assert_eq!(set[0]["aging"], "1m");

    // `none` lifts a limit; the table shows it, and `-` for what is not stored.
    e.ok(&["queue", "limits", "set", "mail", "--concurrency", "none"]);
    e.ok(&["queue", "limits", "unset", "mail", "--rate", "--burst"]);
    let table = e.ok(&["queue", "limits", "ls", "mail"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("QUEUE"), "{table}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells,
        ["mail", "-", "-", "none", "5/1s", "1m", "-"],
        "{table}"
    );

    e.ok(&["queue", "limits", "unset", "mail", "--all"]);
    let row = &e.json(&["queue", "limits", "ls", "mail"])[0];
    assert!(["rate", "burst", "concurrency", "per_key_rate", "aging"]
        .iter()
        .all(|f| row[*f].is_null()));

    // Out of range, unparsable, or nothing named: exit 1 with one line, nothing stored.
    for args in [
        vec!["queue", "limits", "set", "mail", "--concurrency", "0"],
        vec!["queue", "limits", "set", "mail", "--aging", "500ms"],
        vec!["queue", "limits", "set", "mail", "--rate", "fast"],
        vec!["queue", "limits", "set", "mail"],
        vec!["queue", "limits", "set", "nosuch", "--burst", "2"],
    ] {
        let out = e.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert!(e.json(&["queue", "limits", "ls", "mail"])[0]["burst"].is_null());
}

#[tokio::test]
async fn task_edit_changes_payload_level_and_run_time_and_refuses_a_started_task() {
    use chronos_broker::{Consume, QueueName};
    let e = env().await;
    let ids = e.fill().await;
    let id = ids[3].as_str();
    let r = e.json(&[
        "task",
        "edit",
        "mail",
        id,
        "--payload-json",
        r#"{"to":"new@example.com"}"#,
        "--level",
        "1",
    ]);
    assert_eq!(r[0]["changed"], true);
    assert_eq!(r[0]["task"]["payload"]["to"], "new@example.com");
    assert_eq!(r[0]["task"]["kind"], Email::KIND);
    let shown = &e.json(&["task", "show", "mail", id])[0];
    assert_eq!(
        (shown["priority"].clone(), shown["state"].clone()),
        (1.into(), "pending".into())
    );
    assert!(e
        .ok(&["task", "edit", "mail", id, "--level", "1"])
        .contains("already was as asked"));
    // Later: scheduled; then a past time makes it due now, still in the scheduled set until
    // the forwarder moves it.
    assert!(e
        .ok(&["task", "edit", "mail", id, "--in", "1h"])
        .contains("now scheduled"));
    let r = e.json(&["task", "edit", "mail", id, "--at", "2000-01-01T00:00:00Z"]);
    assert_eq!(
        (r[0]["changed"].clone(), r[0]["task"]["state"].clone()),
        (true.into(), "scheduled".into())
    );
    // Usage errors: nothing to change, two run times, a bad time; a payload that is not JSON.
    for args in [
        vec!["task", "edit", "mail", id],
        vec![
            "task",
            "edit",
            "mail",
            id,
            "--in",
            "1h",
            "--at",
            "2030-01-01T00:00:00Z",
        ],
        vec!["task", "edit", "mail", id, "--at", "tomorrow"],
    ] {
        assert_eq!(e.run(&args).status.code(), Some(2), "{args:?}");
    }
    let out = e.run(&["task", "edit", "mail", id, "--payload-json", "{nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
    // A task a worker started is refused, and says why.
    let queue = QueueName::new("mail").expect("queue");
    let mut reader = e.broker.open_reader().await.expect("reader");
    let f = e
        .broker
        .fetch(&mut reader, &queue, "w", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    let started = f.leases[0].id.task_id.clone();
    e.broker
        .start(&queue, &[f.leases[0].id.clone()])
        .await
        .expect("start");
    let out = e.run(&["task", "edit", "mail", &started, "--level", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is active: cannot edit"), "{err}");
}

#[tokio::test]
async fn task_prioritize_moves_a_waiting_task_and_queue_show_counts_levels() {
    let e = env().await;
    let ids = e.fill().await;
    let id = ids[7].as_str();
    let r = e.json(&["task", "prioritize", "mail", id, "--level", "high"]);
    assert_eq!(
        (r[0]["level"].clone(), r[0]["changed"].clone()),
        (2.into(), true.into())
    );
    assert!(e
        .ok(&["task", "prioritize", "mail", id, "--level", "2"])
        .contains("already had priority level 2"));
    assert_eq!(e.json(&["task", "show", "mail", id])[0]["priority"], 2);
    assert!(e.ok(&["task", "show", "mail", id]).contains("priority"));
    // The moved task is listed first: the most urgent level comes first.
    let listed = e.json(&["task", "ls", "mail", "--limit", "1"]);
    assert_eq!(listed[0]["id"], id);
    let q = &e.json(&["queue", "show", "mail"])[0]["queue"];
    assert_eq!(q["pending"], 30);
    let levels: Vec<(u64, u64)> = q["levels"]
        .as_array()
        .expect("levels")
        .iter()
        .map(|l| {
            (
                l["level"].as_u64().expect("level"),
                l["pending"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(levels, vec![(2, 1), (5, 29)]);
    assert!(e.ok(&["queue", "show", "mail"]).contains("LEVEL"));
    // A level out of range is a usage error; an unknown task fails and says so.
    assert_eq!(
        e.run(&["task", "prioritize", "mail", id, "--level", "10"])
            .status
            .code(),
        Some(2)
    );
    let out = e.run(&["task", "prioritize", "mail", "nope", "--level", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task"));
    // Retries ahead of the backlog: the queue's stored retry level.
    let row = e.json(&["queue", "limits", "set", "mail", "--retry-level", "high"]);
    assert_eq!(row[0]["retry_level"], "2");
    assert!(e
        .ok(&["queue", "limits", "ls", "mail"])
        .contains("RETRY LEVEL"));
    let out = e.run(&["queue", "limits", "set", "mail", "--retry-level", "12"]);
    assert_eq!(out.status.code(), Some(1));
    let row = e.json(&["queue", "limits", "unset", "mail", "--retry-level"]);
    assert!(row[0]["retry_level"].is_null());
}

/// `n` emails for `tenant` in queue `mail`.
async fn tenant_mail(e: &Env, tenant: &str, n: usize) {
    let all: Vec<Email> = (0..n)
        .map(|i| Email {
            to: format!("{tenant}-{i}@example.com"),
        })
        .collect();
    let opts = EnqueueOptions::new().queue("mail").tenant(tenant);
    for r in Client::new(e.broker.clone())
        .enqueue_batch(all.iter().map(|m| (m, opts.clone())))
        .await
        .expect("enqueue")
    {
        r.expect("enqueued");
    }
}

#[tokio::test]
async fn tenants_are_listed_busiest_first_and_their_settings_changed() {
    let e = env().await;
    tenant_mail(&e, "acme", 5).await;
    tenant_mail(&e, "globex", 3).await;
    tenant_mail(&e, "initech", 1).await;

    let list = &e.json(&["tenant", "ls", "mail"])[0];
    assert_eq!(
        (&list["total"], &list["waiting"], &list["running"]),
        (&3.into(), &9.into(), &0.into()),
        "{list}"
    );
    let rows = list["tenants"].as_array().expect("tenants");
    let names: Vec<&str> = rows.iter().map(|t| t["tenant"].as_str().unwrap()).collect();
    assert_eq!(names, ["acme", "globex", "initech"]);
    assert_eq!(rows[0]["waiting"], 5);
    assert!(rows[0]["oldest_ms"].as_i64().is_some());
    assert_eq!(rows[0]["ready"], true);

    // A tenant's settings and the default's; `none` removes a stored cap.
    let set = &e.json(&[
        "tenant",
        "set",
        "mail",
        "acme",
        "--weight",
        "3",
        "--concurrency",
        "2",
        "--backlog",
        "100",
    ])[0];
    assert_eq!(set["tenant"], "acme");
    assert_eq!(
        (
            &set["settings"]["weight"],
            &set["settings"]["concurrency"],
            &set["settings"]["backlog"]
        ),
        (&3.into(), &2.into(), &100.into())
    );
    e.ok(&["tenant", "set", "mail", "acme", "--concurrency", "none"]);
    e.ok(&["tenant", "set", "mail", "--default", "--backlog", "50"]);
    e.ok(&["tenant", "pause", "mail", "globex"]);

    // The table: busiest first, `-` where nothing is stored, the default and the totals.
    let table = e.ok(&["tenant", "ls", "mail", "--limit", "2"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("TENANT"), "{table}");
    assert!(lines[0].contains("OLDEST") && lines[0].contains("PAUSED"));
    let acme: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(acme[0], "acme", "{table}");
    assert_eq!(&acme[1..3], ["5", "0"], "{table}");
    assert!(acme[3].ends_with('s'), "an age: {table}");
    assert_eq!(&acme[4..], ["yes", "3", "-", "100", "-"], "{table}");
    let globex: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(globex[0], "globex", "{table}");
    assert_eq!(globex[4], "no", "paused, so not ready: {table}");
    assert_eq!(globex[8], "yes", "{table}");
    assert!(
        table.contains("default for all tenants: weight -, concurrency -, backlog 50, paused -"),
        "{table}"
    );
    assert!(
        table.contains("3 tenants: 9 waiting, 0 running; 1 more tenant not listed"),
        "{table}"
    );

    // Resume, unset, and the default's pause, which a tenant's resume overrides.
    e.ok(&["tenant", "resume", "mail", "globex"]);
    e.ok(&["tenant", "unset", "mail", "acme", "--all"]);
    e.ok(&["tenant", "pause", "mail", "--default"]);
    let resumed = &e.json(&["tenant", "resume", "mail", "initech"])[0];
    assert_eq!(resumed["settings"]["paused"], false);
    let list = &e.json(&["tenant", "ls", "mail"])[0];
    assert_eq!(list["default"]["paused"], true);
    assert_eq!(list["default"]["backlog"], 50);
    for t in list["tenants"].as_array().expect("tenants") {
        let paused = t["tenant"] != "initech";
        assert_eq!(t["effective"]["paused"], paused, "{t}");
        assert_eq!(t["ready"], !paused, "{t}");
        if t["tenant"] == "acme" {
            assert!(t["settings"]
                .as_object()
                .expect("settings")
                .values()
                .all(|v| v.is_null()));
        }
    }
    e.ok(&["tenant", "resume", "mail", "--default"]);
    assert!(e.json(&["tenant", "ls", "mail"])[0]["default"]["paused"].is_null());

    // Out of range, unparsable, a bad key, an unknown queue: exit 1 with one line.
    for args in [
        vec!["tenant", "set", "mail", "acme", "--weight", "0"],
        vec!["tenant", "set", "mail", "acme", "--weight", "1001"],
        vec!["tenant", "set", "mail", "acme", "--backlog", "0"],
        vec!["tenant", "set", "mail", "acme", "--concurrency", "many"],
        vec!["tenant", "set", "mail", "two words", "--weight", "2"],
        vec!["tenant", "pause", "nosuch", "acme"],
        vec!["tenant", "ls", "nosuch"],
    ] {
        let out = e.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // Nothing named, or both a tenant and --default: a usage error.
    for args in [
        vec!["tenant", "set", "mail", "acme"],
        vec!["tenant", "set", "mail", "--weight", "2"],
        vec![
            "tenant",
            "set",
            "mail",
            "acme",
            "--default",
            "--weight",
            "2",
        ],
        vec!["tenant", "unset", "mail", "acme"],
    ] {
        assert_eq!(e.run(&args).status.code(), Some(2), "{args:?}");
    }
    assert!(e.json(&["tenant", "ls", "mail"])[0]["tenants"][0]["settings"]["weight"].is_null());
}

#[tokio::test]
async fn a_typo_in_a_tenant_or_queue_name_is_refused_and_names_the_one_meant() {
    let e = env().await;
    tenant_mail(&e, "acme-corp", 2).await;
    let fails = |args: &[&str]| {
        let out = e.run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        err
    };
    for args in [
        vec!["tenant", "pause", "mail", "acme-crop"],
        vec!["tenant", "set", "mail", "acme-crop", "--weight", "2"],
    ] {
        let err = fails(&args);
        assert!(err.contains("no tenant \"acme-crop\""), "{err}");
        assert!(err.contains("did you mean \"acme-corp\"?"), "{err}");
        assert!(err.contains("--new"), "{err}");
    }
    for args in [
        vec!["tenant", "unset", "mail", "acme-crop", "--all"],
        vec!["tenant", "resume", "mail", "acme-crop"],
    ] {
        let err = fails(&args);
        assert!(err.contains("did you mean \"acme-corp\"?"), "{err}");
        assert!(!err.contains("--new"), "{err}");
    }
    // Nothing was stored for the typo.
    let list = &e.json(&["tenant", "ls", "mail"])[0];
    assert_eq!(list["total"], 1, "{list}");
    // A tenant with no task yet, on purpose.
    let paused = &e.json(&["tenant", "pause", "mail", "newco", "--new"])[0];
    assert_eq!(paused["settings"]["paused"], true);
    e.ok(&["tenant", "resume", "mail", "newco"]);
    e.ok(&["tenant", "pause", "mail", "acme-corp"]);

    // Queues: switching events on, lifting a block.
    for args in [
        vec!["events", "on", "mial"],
        vec!["events", "off", "mial"],
        vec!["queue", "unblock", "mial"],
    ] {
        let err = fails(&args);
        assert!(err.contains("no queue \"mial\""), "{err}");
        assert_eq!(err.contains("--new"), args[1] == "on", "{err}");
        assert!(
            err.contains("(did you mean \"mail\"?); known queues"),
            "{err}"
        );
    }
    assert!(!e.ok(&["queue", "ls"]).contains("mial"));

    // The usage lines name the arguments in the order the commands take them.
    let help = e.ok(&["tenant", "set", "--help"]);
    assert!(
        help.contains("Usage: chronos tenant set [OPTIONS] <QUEUE> <TENANT|--default> <--weight"),
        "{help}"
    );
    let help = e.ok(&["tenant", "unset", "--help"]);
    assert!(
        help.contains("Usage: chronos tenant unset [OPTIONS] <QUEUE> <TENANT|--default> <--weight"),
        "{help}"
    );
}

#[tokio::test]
async fn queue_show_lists_handler_blocks_and_unblock_lifts_them() {
    use chronos_broker::{BackoffScope, Consume, QueueName};
    let e = env().await;
    let q = QueueName::new("api").expect("queue");
    Client::new(e.broker.clone())
        .enqueue(
            &Email {
                to: "a@example.com".into(),
            },
            EnqueueOptions::new().queue("api").rate_key("acme"),
        )
        .await
        .expect("enqueue");
    let mut reader = e.broker.open_reader().await.expect("reader");
    let f = e
        .broker
        .fetch(&mut reader, &q, "w", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    let lease = f.leases.into_iter().next().expect("one delivery");
    e.broker
        .start(&q, std::slice::from_ref(&lease.id))
        .await
        .expect("start");
    e.broker
        .back_off(
            &lease.id,
            &BackoffScope::Key("acme".into()),
            Duration::from_secs(600),
        )
        .await
        .expect("back off");
    let shown = e.json(&["queue", "show", "api"]);
    assert_eq!(shown[0]["throttled"]["keys"][0]["key"], "acme");
    assert!(shown[0]["throttled"]["queue_until_ms"].is_null());
    assert_eq!(shown[0]["throttled"]["today"], 1);
    assert!(e.ok(&["queue", "show", "api"]).contains("BLOCKED KEY"));
    let r = e.json(&["queue", "unblock", "api", "--key", "acme"]);
    assert_eq!(r[0]["lifted"], true);
    let r = e.json(&["queue", "unblock", "api"]);
    assert_eq!(r[0]["lifted"], false);
    let shown = e.json(&["queue", "show", "api"]);
    assert_eq!(
        shown[0]["throttled"]["keys"].as_array().map(Vec::len),
        Some(0)
    );
}

#[tokio::test]
async fn dedup_ls_lists_locks_and_rm_releases_one() {
    let e = env().await;
    let client = Client::new(e.broker.clone());
    let opts = || {
        EnqueueOptions::new()
            .queue("mail")
            .dedup(chronos_broker::Dedup::key("digest:42"))
    };
    let held = client
        .enqueue(
            &Email {
                to: "a@example.com".into(),
            },
            opts(),
        )
        .await
        .expect("enqueue");
    let text = e.ok(&["dedup", "ls", "mail"]);
    assert!(text.contains("KEY"), "{text}");
    assert!(
        text.contains("digest:42") && text.contains(&held.id),
        "{text}"
    );
    let rows = e.json(&["dedup", "ls", "mail"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["key"], "digest:42");
    assert_eq!(rows[0]["holder"], held.id.as_str());
    assert_eq!(rows[0]["holder_state"], "pending");
    // Another holder named: nothing released.
    let wrong = e.json(&["dedup", "rm", "mail", "digest:42", "--holder", "nobody"]);
    assert_eq!(wrong[0]["released"], false);
    let done = e.ok(&["dedup", "rm", "mail", "digest:42"]);
    assert!(done.contains("released"), "{done}");
    assert!(e.json(&["dedup", "ls", "mail"]).is_empty());
    let again = client
        .enqueue(
            &Email {
                to: "b@example.com".into(),
            },
            opts(),
        )
        .await
        .expect("enqueue");
    assert_eq!(again.outcome, chronos_broker::EnqueueOutcome::Created);
}

#[tokio::test]
async fn task_show_prints_a_running_tasks_progress() {
    use chronos_broker::{Maintain, ProgressUpdate, QueueName};
    let e = env().await;
    let (info, lease) = e.delivered_mail("a@example.com").await;
    let q = QueueName::new("mail").expect("queue");
    e.broker
        .keep_alive(
            &q,
            "w1",
            std::slice::from_ref(&lease.id.msg_id),
            &[ProgressUpdate {
                msg_id: lease.id.msg_id.clone(),
                task_id: lease.id.task_id.clone(),
                json: br#"{"percent":25,"note":"1 of 4 parts"}"#.to_vec(),
            }],
        )
        .await
        .expect("report");
    let text = e.ok(&["task", "show", "mail", &info.id]);
    assert!(text.contains("25% 1 of 4 parts"), "{text}");
    let shown = e.json(&["task", "show", "mail", &info.id]);
    assert_eq!(shown[0]["progress_percent"], 25.0);
    assert_eq!(shown[0]["progress"]["value"]["note"], "1 of 4 parts");
}

#[tokio::test]
async fn task_watch_follows_a_task_until_it_ends() {
    use chronos_broker::{Completion, Consume, Maintain, ProgressUpdate, QueueName};
    let e = env().await;
    let (info, lease) = e.delivered_mail("b@example.com").await;
    let q = QueueName::new("mail").expect("queue");
    e.broker
        .start(&q, std::slice::from_ref(&lease.id))
        .await
        .expect("start");
    let child = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &e.url)
        .args([
            "--namespace",
            &e.ns,
            "--json",
            "task",
            "watch",
            "mail",
            &info.id,
        ])
        .args(["--every", "100ms", "--timeout", "30s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let ids = [lease.id.msg_id.clone()];
    e.broker
        .keep_alive(
            &q,
            "w1",
            &ids,
            &[ProgressUpdate {
                msg_id: lease.id.msg_id.clone(),
                task_id: lease.id.task_id.clone(),
                json: br#"{"percent":50,"note":"half"}"#.to_vec(),
            }],
        )
        .await
        .expect("report");
    tokio::time::sleep(Duration::from_millis(600)).await;
    e.broker
        .complete(
            &q,
            &[Completion {
                lease: lease.id.clone(),
                retention: None,
                result: None,
            }],
        )
        .await
        .expect("complete");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["state"], "active");
    assert!(lines[0]["progress"].is_null());
    assert_eq!(lines[1]["progress_percent"], 50.0);
    assert_eq!(lines[2]["state"], "gone");
}

#[tokio::test]
async fn task_watch_of_a_plain_task_that_already_completed_exits_0() {
    use chronos_broker::{Completion, QueueName};
    let e = env().await;
    let (info, lease) = e.delivered_mail("done@example.com").await;
    let q = QueueName::new("mail").expect("queue");
    e.broker
        .complete(
            &q,
            &[Completion {
                lease: lease.id.clone(),
                retention: None,
                result: None,
            }],
        )
        .await
        .expect("complete");
    let watched = e.ok(&["task", "watch", "mail", &info.id, "--timeout", "10s"]);
    assert!(watched.contains("no longer stored"), "{watched}");
    // The same with the queue's event stream on (the other way `watch` follows a task).
    e.ok(&["events", "on", "mail"]);
    let watched = e.ok(&["task", "watch", "mail", &info.id, "--timeout", "10s"]);
    assert!(watched.contains("no longer stored"), "{watched}");
    // An id no task ever had still fails.
    for bogus in ["no-such-task", "99999999999999-0"] {
        let out = e.run(&["task", "watch", "mail", bogus, "--timeout", "2s"]);
        assert_eq!(out.status.code(), Some(1), "{bogus}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no task"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn task_logs_prints_each_attempts_lines() {
    use chronos_broker::{AttemptReport, Consume, Settlement};
    let e = env().await;
    let (info, lease) = e.delivered_mail("c@example.com").await;
    let report = AttemptReport {
        ran_ms: None,
        logs: Some("+0ms LOG connecting\n+12ms WARN refused \x1b[2J\r\n".into()),
    };
    let retry = Settlement::retried(lease.id, Duration::from_secs(600), "connection refused");
    e.broker
        .settle(&[retry.with_report(report)])
        .await
        .expect("retry");
    let text = e.ok(&["task", "logs", "mail", &info.id]);
    assert!(text.contains("== attempt 1 retried"), "{text}");
    // One line per log line; the other control characters still escaped.
    assert!(
        text.contains("\n+0ms LOG connecting\n+12ms WARN refused \\u{1b}[2J\n"),
        "{text:?}"
    );
    assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
    let none = e.ok(&["task", "logs", "mail", &info.id, "--attempt", "2"]);
    assert!(none.contains("no attempt kept numbered 2"), "{none}");
    let rows = e.json(&["task", "logs", "mail", &info.id]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["outcome"], "retried");
    assert_eq!(
        rows[0]["logs"],
        "+0ms LOG connecting\n+12ms WARN refused \x1b[2J\r\n"
    );
}

#[tokio::test]
async fn events_are_turned_on_tailed_and_turned_off() {
    let e = env().await;
    let off = e.run(&["events", "tail", "mail", "--from-start", "--limit", "1"]);
    assert!(!off.status.success());
    let err = String::from_utf8_lossy(&off.stderr);
    assert!(err.contains("keeps no events"), "{err}");

    e.ok(&["events", "on", "mail", "--new"]);
    let (info, lease) = e.delivered_mail("d@example.com").await;
    e.broker
        .retry(&lease.id, Duration::from_secs(600), "connection refused")
        .await
        .expect("retry");
    let text = e.ok(&[
        "events",
        "tail",
        "mail",
        "--from-start",
        "--limit",
        "3",
        "--timeout",
        "10s",
    ]);
    // The delivery was never marked started: the retry writes the attempt's `started` first.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("enqueued") && lines[0].contains(&info.id),
        "{text}"
    );
    assert!(lines[1].contains("started"), "{text}");
    assert!(
        lines[2].contains("retried") && lines[2].contains("connection refused"),
        "{text}"
    );
    let rows = e.json(&[
        "events",
        "tail",
        "mail",
        "--from-start",
        "--limit",
        "3",
        "--task",
        &info.id,
        "--kind",
        "email",
    ]);
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0]["type"].as_str(), rows[0]["kind"].as_str()),
        (Some("enqueued"), Some("email"))
    );
    assert_eq!(rows[1]["type"], "started");
    assert_eq!(rows[2]["type"], "retried");
    assert_eq!(rows[2]["error"], "connection refused");
    assert_eq!(rows[2]["attempt"], 1);
    // Another kind matches nothing: the tail ends at its timeout with no line.
    let none = e.ok(&[
        "events",
        "tail",
        "mail",
        "--from-start",
        "--kind",
        "invoice",
        "--timeout",
        "1s",
    ]);
    assert!(none.trim().is_empty(), "{none}");

    e.ok(&["events", "off", "mail"]);
    let again = e.run(&["events", "tail", "mail", "--limit", "1"]);
    assert!(!again.status.success());
}

#[tokio::test]
async fn task_watch_follows_the_events_of_a_queue_that_keeps_them() {
    use chronos_broker::{Completion, Consume, QueueName};
    use std::io::BufRead as _;
    let e = env().await;
    e.ok(&["events", "on", "mail", "--new"]);
    let (info, lease) = e.delivered_mail("w@example.com").await;
    let q = QueueName::new("mail").expect("queue");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &e.url)
        .args([
            "--namespace",
            &e.ns,
            "--json",
            "task",
            "watch",
            "mail",
            &info.id,
        ])
        .args(["--timeout", "30s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // The state line comes after the watch began following the events: from here on nothing
    // the task does is missed.
    let first: serde_json::Value =
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    // Fetched by a worker: active from then on, its start marked or not.
    assert_eq!(first["state"], "active");
    e.broker
        .start(&q, std::slice::from_ref(&lease.id))
        .await
        .expect("start");
    e.broker
        .complete(
            &q,
            &[Completion {
                lease: lease.id.clone(),
                retention: None,
                result: None,
            }],
        )
        .await
        .expect("complete");
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.expect("read")).expect("json"))
        .collect();
    let status = child.wait().expect("wait");
    assert!(status.success());
    let types: Vec<&str> = rest.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(types, ["started", "completed"], "{rest:?}");
    e.ok(&["events", "off", "mail"]);
}

#[tokio::test]
async fn task_watch_ends_when_an_operator_deletes_the_task() {
    use chronos_broker::{Operate, QueueName, TaskAction};
    use std::io::BufRead as _;
    let e = env().await;
    e.ok(&["events", "on", "mail", "--new"]);
    // Waiting, not fetched: an operator's delete of a task a worker holds is refused.
    let info = Client::new(e.broker.clone())
        .enqueue(
            &Email {
                to: "w@example.com".into(),
            },
            EnqueueOptions::new().queue("mail"),
        )
        .await
        .expect("enqueue");
    let q = QueueName::new("mail").expect("queue");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronos"))
        .env("CHRONOS_REDIS_URL", &e.url)
        .args([
            "--namespace",
            &e.ns,
            "--json",
            "task",
            "watch",
            "mail",
            &info.id,
        ])
        .args(["--timeout", "10s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first: serde_json::Value =
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    assert_eq!(first["state"], "pending");
    e.broker
        .act(&q, &info.id, TaskAction::Delete)
        .await
        .expect("delete");
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.expect("read")).expect("json"))
        .collect();
    let status = child.wait().expect("wait");
    assert!(status.success(), "the watch ended with the delete");
    let types: Vec<&str> = rest.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(types, ["deleted"], "{rest:?}");
    e.ok(&["events", "off", "mail"]);
}

#[tokio::test]
async fn schema_export_writes_each_published_kind_to_its_file() {
    let e = env().await;
    assert!(e.ok(&["schema", "ls"]).contains("no schema published"));
    let mut schemas = chronos_broker::Schemas::new();
    let email = serde_json::json!({
        "type": "object",
        "properties": {"to": {"type": "string"}},
        "required": ["to"],
        "x-chronos-kind": "email:send",
    });
    schemas.insert("email:send", email.clone());
    schemas.insert("invoice", serde_json::json!({"type": "object"}));
    e.broker.publish_schemas(&schemas).await.expect("publish");
    let kinds: Vec<String> = e
        .json(&["schema", "ls"])
        .iter()
        .map(|r| r["kind"].as_str().expect("kind").to_string())
        .collect();
    assert_eq!(kinds, ["email:send", "invoice"]);
    // To stdout: one object by kind; to a folder: a file per kind.
    let all: serde_json::Value =
        serde_json::from_str(&e.ok(&["schema", "export", "email:send"])).expect("json");
    assert_eq!(all, serde_json::json!({ "email:send": email }));
    let dir = std::env::temp_dir().join(format!("chronos-schemas-{}", e.ns));
    let dir_arg = dir.display().to_string();
    e.ok(&["schema", "export", "--out", &dir_arg]);
    let text = std::fs::read_to_string(dir.join("email_send.schema.json")).expect("file");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("json"),
        email
    );
    assert!(dir.join("invoice.schema.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
    // A kind nobody published is an error that names it.
    let out = e.run(&["schema", "export", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nope\""));
}
