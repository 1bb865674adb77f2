//! Producer contract v1 (`crates/chronos-protocol/contract/CONTRACT.md`) across languages: the
//! Rust producer, the Python producer (`crates/chronos-py`) and the TypeScript producer
//! (`crates/chronos-ts`) each run every case of `contract/v1/enqueue.json` in a namespace of
//! their own; one checker reads what each left in Redis against the case's expectations, and a
//! Rust worker then runs every task each of them enqueued, decoding the JSON payloads into
//! typed arguments. The foreign producers' own test suites (envelope vectors byte for byte, a
//! lost reply re-sent through a proxy that drops it) run here too, against the same Redis.
//!
//! Needs a Python with redis-py, `CHRONOS_PYTHON` (`cargo xtask test` makes a virtual
//! environment under the target directory and sets it) or else `python3`, and `node` with
//! `npm`; the TypeScript producer is built with `npm ci && npm run build` on first use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chronos::fred::interfaces::{HashesInterface, KeysInterface, SortedSetsInterface};
use chronos::prelude::*;
use chronos::{
    BrokerError, Enqueue, NewTask, QueueName, TaskState, Timestamp, CODEC_HEADER, PRODUCER_HEADER,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The kind every vector enqueues.
#[derive(Debug, Clone, Serialize, Deserialize, chronos::schemars::JsonSchema)]
#[schemars(crate = "chronos::schemars")]
struct Echo {
    n: u32,
    s: Option<String>,
}

impl TaskArgs for Echo {
    const KIND: &'static str = "contract:echo";
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    since.as_millis() as i64
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn vectors_path() -> PathBuf {
    repo().join("crates/chronos-protocol/contract/v1/enqueue.json")
}

fn vectors() -> Value {
    let text = std::fs::read_to_string(vectors_path()).expect("read enqueue.json");
    serde_json::from_str(&text).expect("enqueue.json parses")
}

/// Runs `cmd`, failing the test with its output when it fails; its stdout.
fn output(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start ({e}); see README's prerequisites"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hint = if stderr.contains("No module named 'redis'") {
        "\n(a Python without redis-py: run `cargo xtask test`, which makes a virtual \
         environment for these tests, or set CHRONOS_PYTHON to a python3 that has redis-py)"
    } else {
        ""
    };
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}{hint}",
        out.status,
    );
    stdout
}

/// `<digits>-<digits>`: the id of a stream entry, which a plain task's id is.
fn is_entry_id(id: &str) -> bool {
    id.split_once('-').is_some_and(|(ms, seq)| {
        !ms.is_empty()
            && !seq.is_empty()
            && ms.bytes().all(|b| b.is_ascii_digit())
            && seq.bytes().all(|b| b.is_ascii_digit())
    })
}

fn ts_dir() -> PathBuf {
    repo().join("crates/chronos-ts")
}

/// Builds the TypeScript producer once per test process.
fn ts_built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = ts_dir();
        if !dir.join("node_modules").exists() {
            let mut c = Command::new("npm");
            c.args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir);
            output(c, "npm ci in crates/chronos-ts");
        }
        let mut c = Command::new("npm");
        c.args(["run", "build"]).current_dir(&dir);
        output(c, "npm run build in crates/chronos-ts");
        dir
    })
}

/// The Python that runs the Python producer: `CHRONOS_PYTHON` (a virtual environment with
/// redis-py, as `cargo xtask test` makes), else `python3` from `PATH`.
fn python(url: &str) -> Command {
    let program = std::env::var_os("CHRONOS_PYTHON").unwrap_or_else(|| "python3".into());
    let mut c = Command::new(program);
    c.env("CHRONOS_REDIS_URL", url).current_dir(repo());
    c
}

fn node(url: &str) -> Command {
    ts_built();
    let mut c = Command::new("node");
    c.env("CHRONOS_REDIS_URL", url).current_dir(repo());
    c
}

/// What one producer reports: per case, per task, `{id, state, outcome}` or `{error}`.
type Report = Vec<Vec<Value>>;

fn parse_report(stdout: &str, who: &str) -> Report {
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{who} printed no report ({e}): {stdout}"));
    let cases = v["cases"].as_array().expect("cases");
    let vectors = vectors();
    let names: Vec<&str> = vectors["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(cases.len(), names.len(), "{who}: one report per case");
    cases
        .iter()
        .zip(names)
        .map(|(c, name)| {
            assert_eq!(c["name"], name, "{who}: cases in order");
            c["results"].as_array().expect("results").clone()
        })
        .collect()
}

fn opts_of(o: &Value) -> EnqueueOptions {
    let mut opts = EnqueueOptions::new();
    let ms = |k: &str| o[k].as_u64().map(Duration::from_millis);
    if let Some(d) = ms("process_in_ms") {
        opts = opts.process_in(d);
    }
    if let Some(at) = o["process_at_ms"].as_i64() {
        opts = opts.process_at(Timestamp::from_unix_ms(at));
    }
    if let Some(n) = o["max_retry"].as_u64() {
        opts = opts.max_retry(n as u32);
    }
    if o["discard"].as_bool() == Some(true) {
        opts = opts.discard_on_dead_letter();
    }
    if let Some(d) = ms("timeout_ms") {
        opts = opts.timeout(d);
    }
    if let Some(at) = o["deadline_ms"].as_i64() {
        opts = opts.deadline(Timestamp::from_unix_ms(at));
    }
    if let Some(d) = ms("retention_ms") {
        opts = opts.retention(d);
    }
    if let Some(d) = ms("unique_ttl_ms") {
        opts = opts.unique(d);
    }
    if let Some(id) = o["id"].as_str() {
        opts = opts.task_id(id);
    }
    if let Some(h) = o["headers"].as_object() {
        for (k, v) in h {
            opts = opts.header(k, v.as_str().expect("header value"));
        }
    }
    opts
}

/// The Rust producer on the same vectors, with JSON payloads as the foreign producers send.
async fn rust_report(broker: &RedisBroker) -> Report {
    let v = vectors();
    let (queue, kind) = (
        v["queue"].as_str().expect("queue"),
        v["kind"].as_str().expect("kind"),
    );
    let mut report = Vec::new();
    for case in v["cases"].as_array().expect("cases") {
        let tasks: Vec<NewTask> = case["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| {
                let payload = serde_json::to_vec(&t["payload"]).expect("json");
                let opts = opts_of(&t["options"])
                    .queue(queue)
                    .header(CODEC_HEADER, "json")
                    .header(PRODUCER_HEADER, "chronos-rs");
                NewTask::build(kind, payload, opts, now_ms()).expect("valid task")
            })
            .collect();
        let results = broker.enqueue(tasks).await.expect("enqueue");
        report.push(
            results
                .into_iter()
                .map(|r| match r {
                    Ok(info) => json!({
                        "id": info.id,
                        "state": info.state.as_str(),
                        // The Rust client answers an idempotent re-enqueue as created (its
                        // outcome has no "existing"); the checker accepts either for it.
                        "outcome": "created",
                    }),
                    Err(BrokerError::DuplicateTask { .. }) => json!({"error": "duplicate"}),
                    Err(BrokerError::TaskIdConflict { .. }) => json!({"error": "id_conflict"}),
                    Err(e) => json!({"error": "other", "message": e.to_string()}),
                })
                .collect(),
        );
    }
    report
}

/// Checks what `report`'s tasks left in namespace `ns` against the vectors; the ids of the
/// tasks enqueued, with the `n` of each.
async fn check(
    broker: &RedisBroker,
    ns: &str,
    who: &str,
    report: &Report,
    t0: i64,
) -> BTreeMap<String, u32> {
    let v = vectors();
    let queue = QueueName::new(v["queue"].as_str().expect("queue")).expect("queue name");
    let prefix = format!("{ns}:{{{queue}}}:");
    let redis = broker.client();
    let mut ran = BTreeMap::new();
    for (case, results) in v["cases"].as_array().expect("cases").iter().zip(report) {
        let name = case["name"].as_str().expect("name");
        let tasks = case["tasks"].as_array().expect("tasks");
        let expects = case["expect"].as_array().expect("expect");
        assert_eq!(
            results.len(),
            expects.len(),
            "{who} / {name}: one result per task"
        );
        for ((task, want), got) in tasks.iter().zip(expects).zip(results) {
            let at = format!("{who} / {name}");
            if let Some(err) = want.get("error") {
                assert_eq!(got["error"], *err, "{at}: {got}");
                continue;
            }
            let id = got["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no id in {got}"));
            match want["outcome"].as_str() {
                Some("existing") if who == "rust" => {}
                Some(o) => assert_eq!(got["outcome"], o, "{at}"),
                None => {}
            }
            if let Some(s) = want["state"].as_str() {
                assert_eq!(got["state"], s, "{at}: reported state");
            }
            if let Some(want_id) = want["id"].as_str() {
                assert_eq!(id, want_id, "{at}");
            }
            if want["plain_id"].as_bool() == Some(true) {
                assert!(is_entry_id(id), "{at}: {id} is an entry id");
            }
            let record: i64 = redis
                .exists(format!("{prefix}t:{id}"))
                .await
                .expect("exists");
            assert_eq!(
                record == 1,
                want["record"].as_bool().expect("record"),
                "{at}: record"
            );
            let rec = broker
                .task(&queue, id)
                .await
                .expect("read task")
                .unwrap_or_else(|| panic!("{at}: task {id} not found"));
            if let Some(s) = want["state"].as_str() {
                assert_eq!(rec.state.as_str(), s, "{at}: stored state");
            }
            let env = rec
                .envelope
                .unwrap_or_else(|e| panic!("{at}: envelope: {e}"));
            assert_eq!(env.id, id);
            assert_eq!(env.kind, v["kind"].as_str().expect("kind"), "{at}");
            assert_eq!(env.queue, queue.as_str(), "{at}");
            assert_eq!(
                env.headers.get(CODEC_HEADER).map(String::as_str),
                Some("json"),
                "{at}"
            );
            assert!(
                env.headers.contains_key(PRODUCER_HEADER),
                "{at}: producer header"
            );
            let payload: Value = serde_json::from_slice(&env.payload).expect("JSON payload");
            assert_eq!(payload, task["payload"], "{at}: payload");
            let opts = &task["options"];
            let max_retry = want["max_retry"]
                .as_u64()
                .or(opts["max_retry"].as_u64())
                .unwrap_or(25);
            assert_eq!(u64::from(env.max_retry), max_retry, "{at}: max retry");
            let discard =
                want["dead_letter"].as_str() == Some("discard") || opts["discard"] == true;
            assert_eq!(
                env.dead_letter == chronos::DeadLetter::Discard,
                discard,
                "{at}"
            );
            assert_eq!(env.timeout_ms, opts["timeout_ms"].as_u64(), "{at}: timeout");
            assert_eq!(
                env.deadline_ms,
                opts["deadline_ms"].as_i64(),
                "{at}: deadline"
            );
            assert_eq!(
                env.retention_ms,
                opts["retention_ms"].as_u64(),
                "{at}: retention"
            );
            if let Some(h) = want["headers"].as_object() {
                for (k, val) in h {
                    assert_eq!(
                        env.headers.get(k).map(String::as_str),
                        val.as_str(),
                        "{at}: {k}"
                    );
                }
            }
            if want["unique"].as_bool() == Some(true) {
                let key = env.unique_key.clone().expect("a unique key");
                let holder: Option<String> =
                    redis.get(format!("{prefix}u:{key}")).await.expect("get");
                assert_eq!(holder.as_deref(), Some(id), "{at}: the lock names the task");
            } else {
                assert_eq!(env.unique_key, None, "{at}");
            }
            if let Some(after) = want["run_at_after_ms"].as_i64() {
                let score: Option<f64> = redis
                    .zscore(format!("{prefix}scheduled"), id)
                    .await
                    .expect("zscore");
                let score = score.unwrap_or_else(|| panic!("{at}: not in the scheduled set"));
                assert!(
                    score as i64 >= t0 + after,
                    "{at}: runs at {score}, enqueued at {t0}"
                );
            }
            ran.insert(id.to_string(), payload["n"].as_u64().expect("n") as u32);
        }
    }
    ran
}

/// Runs a worker on namespace `ns` until every task of `want` ran once; what ran, by id.
async fn run_all(url: &str, ns: &str, want: &BTreeMap<String, u32>) {
    let broker = connect(url, ns).await;
    let seen: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let mut mux = Mux::new();
    let record = seen.clone();
    mux.handle(move |ctx: Context, task: Task<Echo>| {
        let record = record.clone();
        async move {
            record
                .lock()
                .expect("lock")
                .insert(ctx.task_id().to_string(), task.args.n);
            Ok(())
        }
    })
    .expect("register");
    let config = ServerConfig {
        queues: vec![("contract".into(), 1)],
        forward_interval: Duration::from_millis(50),
        ..ServerConfig::default()
    };
    let server = Server::new(broker, mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    chronos_testkit::eventually(Duration::from_secs(15), "every task ran", || {
        let done = seen.lock().expect("lock").len() >= want.len();
        async move { done }
    })
    .await;
    server.shutdown().await;
    assert_eq!(
        *seen.lock().expect("lock"),
        *want,
        "each task ran with its own arguments"
    );
}

async fn connect(url: &str, ns: &str) -> RedisBroker {
    RedisBroker::builder(url)
        .namespace(ns)
        .connect()
        .await
        .expect("connect")
}

async fn one_producer(who: &str, run: impl FnOnce(&str, &str) -> Option<Command>) {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    let t0 = now_ms();
    let report = match run(&url, &ns) {
        Some(cmd) => parse_report(&output(cmd, who), who),
        None => rust_report(&broker).await,
    };
    let ids = check(&broker, &ns, who, &report, t0).await;
    assert_eq!(ids.len(), 13, "{who}: the vectors enqueue 13 tasks");
    let ns_set: BTreeSet<u32> = ids.values().copied().collect();
    assert_eq!(ns_set.len(), 13, "{who}: 13 distinct tasks");
    run_all(&url, &ns, &ids).await;
}

fn conformance_args(c: &mut Command, url: &str, ns: &str) {
    c.arg("--redis")
        .arg(url)
        .arg("--namespace")
        .arg(ns)
        .arg("--vectors")
        .arg(vectors_path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_producer_meets_the_vectors() {
    one_producer("rust", |_, _| None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_producer_meets_the_vectors_and_a_rust_worker_runs_its_tasks() {
    one_producer("python", |url, ns| {
        let mut c = python(url);
        c.arg("crates/chronos-py/conformance.py");
        conformance_args(&mut c, url, ns);
        Some(c)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_producer_meets_the_vectors_and_a_rust_worker_runs_its_tasks() {
    one_producer("typescript", |url, ns| {
        let mut c = node(url);
        c.arg("crates/chronos-ts/dist/src/conformance.js");
        conformance_args(&mut c, url, ns);
        Some(c)
    })
    .await;
}

#[test]
fn the_python_producers_own_tests_pass() {
    let url = chronos_testkit::shared_url().expect("redis");
    let mut c = python(&url);
    c.args([
        "-m",
        "unittest",
        "discover",
        "-s",
        "crates/chronos-py/tests",
        "-t",
        "crates/chronos-py",
    ]);
    output(c, "the Python producer's tests");
}

#[test]
fn the_typescript_producers_own_tests_pass() {
    let url = chronos_testkit::shared_url().expect("redis");
    ts_built();
    let mut c = Command::new("npm");
    c.args(["test"])
        .env("CHRONOS_REDIS_URL", &url)
        .current_dir(ts_dir());
    output(c, "the TypeScript producer's tests");
}

/// A payload that does not fit its kind's arguments is dead-lettered, not retried, with a
/// reason that says so and names the producer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_payload_that_does_not_fit_is_dead_lettered_naming_its_producer() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let script = format!(
        "import sys, redis\nsys.path.insert(0, 'crates/chronos-py')\n\
         from chronos_producer import Producer\n\
         p = Producer(redis.Redis.from_url({url:?}), namespace={ns:?})\n\
         print(p.enqueue('contract:echo', {{'n': 'seven'}}, queue='contract', max_retry=5).id)\n"
    );
    let mut c = python(&url);
    c.args(["-c", &script]);
    let id = output(c, "python enqueue").trim().to_string();
    let broker = connect(&url, &ns).await;
    let mut mux = Mux::new();
    mux.handle(|_c: Context, _t: Task<Echo>| async { Ok(()) })
        .expect("register");
    let config = ServerConfig {
        queues: vec![("contract".into(), 1)],
        ..ServerConfig::default()
    };
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let q = QueueName::new("contract").expect("queue");
    chronos_testkit::eventually(Duration::from_secs(10), "dead-lettered", || {
        let (broker, q, id) = (broker.clone(), q.clone(), id.clone());
        async move {
            matches!(broker.task(&q, &id).await, Ok(Some(r)) if r.state == TaskState::Archived)
        }
    })
    .await;
    server.shutdown().await;
    let rec = broker.task(&q, &id).await.expect("read").expect("archived");
    let env = rec.envelope.expect("envelope");
    let err = env.last_error.expect("a reason");
    assert!(
        err.contains("schema mismatch (producer chronos-py/"),
        "the reason names the mismatch and the producer: {err}"
    );
    assert_eq!(env.retried, 0, "not retried: it can never fit");
}

/// A worker's published schema reads back as it was derived, for `chronos schema export`.
#[tokio::test]
async fn published_schemas_read_back_by_kind() {
    let url = chronos_testkit::shared_url().expect("redis");
    let broker = connect(&url, &chronos_testkit::namespace()).await;
    assert!(broker.schemas().await.expect("none yet").is_empty());
    let schemas = chronos::Schemas::new().kind::<Echo>();
    broker.publish_schemas(&schemas).await.expect("publish");
    let back = broker.schemas().await.expect("read");
    assert_eq!(back, schemas);
    let echo = back.get("contract:echo").expect("echo");
    assert_eq!(echo["required"], json!(["n"]));
    assert_eq!(echo["x-chronos-kind"], "contract:echo");
}

/// One HTTP/1.1 request to `addr`; the status and the body.
async fn http_post(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The issue's end-to-end case: tasks enqueued through HTTP, Python and TypeScript into one
/// queue are all run by one Rust worker, each with its own typed arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_python_and_typescript_tasks_in_one_queue_are_all_run_by_a_rust_worker() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    // HTTP: the ingest router on a loopback port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let ingest = tokio::spawn(chronos_ingest::serve_on(
        listener,
        Client::new(broker.clone()),
        chronos_ingest::IngestConfig::new(),
        async move {
            let _ = stopped.await;
        },
    ));
    let mut want = BTreeMap::new();
    let (status, body) = http_post(
        addr,
        "/queues/contract/tasks",
        &[("Idempotency-Key", "http-100")],
        r#"{"kind": "contract:echo", "payload": {"n": 100, "s": "http"}}"#,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    want.insert(body["id"].as_str().expect("id").to_string(), 100);
    // The same key again answers the same task.
    let (again, body2) = http_post(
        addr,
        "/queues/contract/tasks",
        &[("Idempotency-Key", "http-100")],
        r#"{"kind": "contract:echo", "payload": {"n": 100, "s": "http"}}"#,
    )
    .await;
    assert_eq!((again, &body2["id"]), (200, &body["id"]), "{body2}");
    // Python and TypeScript, through their libraries.
    let py = format!(
        "import sys, redis\nsys.path.insert(0, 'crates/chronos-py')\n\
         from chronos_producer import Producer\n\
         p = Producer(redis.Redis.from_url({url:?}), namespace={ns:?})\n\
         print(p.enqueue('contract:echo', {{'n': 101, 's': 'python'}}, queue='contract').id)\n\
         print(p.enqueue('contract:echo', {{'n': 102}}, queue='contract', id='py-102').id)\n"
    );
    let mut c = python(&url);
    c.args(["-c", &py]);
    for (line, n) in output(c, "python enqueue").lines().zip([101, 102]) {
        want.insert(line.to_string(), n);
    }
    let js = format!(
        "const Redis = require('ioredis');\n\
         const {{ Producer }} = require('./crates/chronos-ts/dist/src/index.js');\n\
         (async () => {{\n\
           const c = new Redis({url:?});\n\
           const p = new Producer(c, {{ namespace: {ns:?} }});\n\
           console.log((await p.enqueue('contract:echo', {{ n: 103, s: 'ts' }}, {{ queue: 'contract' }})).id);\n\
           console.log((await p.enqueue('contract:echo', {{ n: 104 }}, {{ queue: 'contract', processInMs: 300 }})).id);\n\
           await c.quit();\n\
         }})().catch((e) => {{ console.error(e); process.exit(1); }});\n"
    );
    let mut c = node(&url);
    c.env("NODE_PATH", ts_dir().join("node_modules"))
        .args(["-e", &js]);
    for (line, n) in output(c, "node enqueue").lines().zip([103, 104]) {
        want.insert(line.to_string(), n);
    }
    assert_eq!(want.len(), 5, "five tasks: {want:?}");
    run_all(&url, &ns, &want).await;
    let _ = stop.send(());
    ingest.await.expect("join").expect("ingest served");
}

/// A stored schema that is not JSON is an error naming its kind, not skipped.
#[tokio::test]
async fn a_corrupt_stored_schema_is_an_error_naming_its_kind() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = connect(&url, &ns).await;
    let _: i64 = broker
        .client()
        .hset(format!("{ns}:schemas"), ("contract:echo", "{not json"))
        .await
        .expect("hset");
    let err = broker.schemas().await.expect_err("corrupt");
    assert!(err.to_string().contains("\"contract:echo\""), "{err}");
}
