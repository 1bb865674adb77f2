//! `chronos task run|rm|archive Q --all` as a process against a real Redis (issue 35, 3.1 and
//! 3.2): every matching task is reached, what was not is said with a non-zero exit, and an
//! archive names what the archive's cap will delete.

use std::process::{Command, Output};
use std::time::Duration;

use chronos_broker::fred::interfaces::{HashesInterface, SortedSetsInterface};
use chronos_broker::fred::types::sorted_sets::Ordering as ZOrdering;
use chronos_broker::fred::types::SetOptions;
use chronos_broker::{
    Client, EnqueueOptions, Inspect, Maintain, Operate, QueueName, RedisBroker, ServerRecord,
    TaskAction, TaskArgs, TaskFilter, TaskState,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Email {
    n: u64,
}

impl TaskArgs for Email {
    const KIND: &'static str = "email";
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
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_chronos"))
            .env("CHRONOS_REDIS_URL", &self.url)
            .arg("--namespace")
            .arg(&self.ns)
            .args(args)
            .output()
            .expect("run chronos")
    }

    fn stdout(out: &Output) -> String {
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    async fn mail(&self, n: u64) -> Vec<String> {
        let client = Client::new(self.broker.clone());
        let all: Vec<Email> = (0..n).map(|n| Email { n }).collect();
        let opts = EnqueueOptions::new().queue("mail");
        let mut ids = Vec::new();
        for part in all.chunks(1_000) {
            for r in client
                .enqueue_batch(part.iter().map(|m| (m, opts.clone())))
                .await
                .expect("enqueue")
            {
                ids.push(r.expect("enqueued").id);
            }
        }
        ids
    }

    /// Archives every pending mail, then gives all archived tasks one died-at score: dead
    /// letters settled in one millisecond.
    async fn dead_letters_of_one_score(&self) {
        let q = QueueName::new("mail").expect("queue");
        self.broker
            .act_all(
                &q,
                TaskState::Pending,
                &TaskFilter::default(),
                TaskAction::Archive,
                1_000,
            )
            .await
            .expect("archive");
        let z = self.broker.keyspace().queue(&q).archived();
        let members: Vec<String> = self
            .broker
            .client()
            .zrange(&z, 0, -1, None, false, None, false)
            .await
            .expect("zrange");
        let score = chronos_broker::now_ms() as f64;
        let _: i64 = self
            .broker
            .client()
            .zadd(
                &z,
                Some(SetOptions::XX),
                None::<ZOrdering>,
                false,
                false,
                members
                    .into_iter()
                    .map(|m| (score, m))
                    .collect::<Vec<(f64, String)>>(),
            )
            .await
            .expect("one score");
    }

    async fn stats(&self) -> chronos_broker::QueueStats {
        self.broker
            .queue_stats(&QueueName::new("mail").expect("queue"))
            .await
            .expect("stats")
    }
}

#[tokio::test]
async fn running_3000_dead_letters_of_one_millisecond_runs_every_one() {
    let e = env().await;
    e.mail(3_000).await;
    e.dead_letters_of_one_score().await;
    assert_eq!(e.stats().await.archived, 3_000);
    let out = e.run(&[
        "--json", "task", "run", "mail", "--all", "--state", "archived",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value =
        serde_json::from_str(Env::stdout(&out).trim()).expect("a JSON line");
    let report = &line["report"];
    println!("task run --all --state archived: {report}");
    assert_eq!(
        (report["done"].as_u64(), report["matched"].as_u64()),
        (Some(3_000), Some(3_000)),
        "{line}"
    );
    let s = e.stats().await;
    assert_eq!((s.archived, s.pending), (0, 3_000));
}

#[tokio::test]
async fn a_bulk_run_that_leaves_matching_tasks_unreached_exits_non_zero_and_says_how_many() {
    let e = env().await;
    let ids = e.mail(10).await;
    e.dead_letters_of_one_score().await;
    // One dead letter lost its envelope: run-now refuses it as corrupt.
    let q = QueueName::new("mail").expect("queue");
    let key = e.broker.keyspace().queue(&q).task(&ids[3]);
    let _: i64 = e.broker.client().hdel(&key, "e").await.expect("hdel");
    let out = e.run(&["task", "run", "mail", "--all", "--state", "archived"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        Env::stdout(&out).contains("9 of 10 matching tasks"),
        "{out:?}"
    );
    assert!(
        stderr.contains("1 matching tasks were not reached"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_archive_over_the_cap_says_how_many_archived_tasks_the_janitor_will_delete() {
    let e = env().await;
    let ids = e.mail(8).await;
    // Without a live server of the queue the default cap is named, as the default.
    let out = e.run(&["task", "archive", "mail", &ids[0]]);
    assert!(out.status.success());
    let text = Env::stdout(&out);
    assert!(
        text.contains("holds 1 of at most 10000 tasks (the default archive_max"),
        "{text}"
    );
    // A server of the queue keeps at most 5.
    let record = ServerRecord {
        id: "srv-1".into(),
        host: "host-1".into(),
        pid: 42,
        queues: vec![("mail".into(), 1)],
        concurrency: 8,
        started_at_ms: chronos_broker::now_ms(),
        running: 0,
        last_seen_ms: chronos_broker::now_ms(),
        tasks: Vec::new(),
        archive_max: Some(5),
    };
    e.broker
        .publish_server(&record, Duration::from_secs(30))
        .await
        .expect("publish server");
    let out = e.run(&["task", "archive", "mail", "--all", "--state", "pending"]);
    assert!(out.status.success());
    let text = Env::stdout(&out);
    assert!(text.contains("7 of 7 matching tasks"), "{text}");
    assert!(
        text.contains("holds 8 tasks, over its cap of 5 (the archive_max of its servers)")
            && text.contains("deletes the oldest 3 within a minute, dead letters among them"),
        "{text}"
    );
    let out = e.run(&[
        "--json", "task", "archive", "mail", "--all", "--state", "pending",
    ]);
    let line: serde_json::Value =
        serde_json::from_str(Env::stdout(&out).trim()).expect("a JSON line");
    assert_eq!(line["archive_cap_deletes"], 3, "{line}");
    assert_eq!(line["archive"]["max"], 5, "{line}");
}
