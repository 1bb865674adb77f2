//! Scheduling and lifecycle of the worker server against a real Redis: weighted fairness, strict
//! priority, graceful shutdown, long tasks, paused queues, a Redis restart, the janitor and
//! middleware.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chronos_broker::{Client, Consume, EnqueueOptions, Inspect, Maintain, QueueName, TaskState};
use chronos_worker::{Context, Middleware, Mux, Next, Server, ServerConfig, Task, TaskError};
use common::{broker, broker_at, eventually, fast_config, q, Job};

/// A mux whose handler records (queue, n) in order and sleeps `sleep_ms`.
/// (queue, n) of every handler call, in start order.
type Log = Arc<Mutex<Vec<(String, u32)>>>;

fn recording_mux() -> (Mux, Log) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let l = l.clone();
        async move {
            l.lock()
                .expect("lock")
                .push((ctx.queue().to_string(), t.args.n));
            if t.args.sleep_ms > 0 {
                tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
            }
            Ok(())
        }
    })
    .expect("register");
    (mux, log)
}

async fn fill(client: &Client, queue: &str, n: u32, sleep_ms: u64) {
    let jobs: Vec<Job> = (0..n).map(|n| Job { n, sleep_ms }).collect();
    let opts = EnqueueOptions::new().queue(queue);
    let r = client
        .enqueue_batch(jobs.iter().map(|j| (j, opts.clone())))
        .await
        .expect("batch");
    assert!(r.iter().all(|r| r.is_ok()));
}

#[tokio::test]
async fn weighted_queues_share_slots_by_weight() {
    let b = broker().await;
    let client = Client::new(b.clone());
    fill(&client, "high", 1000, 0).await;
    fill(&client, "low", 1000, 0).await;
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        concurrency: 2,
        ..fast_config()
    }
    .queues([("high", 3), ("low", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(30), "800 tasks", || async {
        log.lock().expect("lock").len() >= 800
    })
    .await;
    server.shutdown().await;
    let first: Vec<(String, u32)> = log.lock().expect("lock")[..800].to_vec();
    let high = first.iter().filter(|(q, _)| q == "high").count() as f64;
    let low = first.len() as f64 - high;
    let ratio = high / low;
    // Weight 3:1 gives 600:200 on average; 3.5 standard deviations of the draw (about 43 tasks)
    // keep the ratio within 2.3..4.2, while a scheduler that ignored weights would give 1.
    assert!(
        (2.3..=4.2).contains(&ratio),
        "high {high} low {low} ratio {ratio:.2}"
    );
}

#[tokio::test]
async fn strict_priority_runs_lower_queue_only_when_higher_is_empty() {
    let b = broker().await;
    let client = Client::new(b.clone());
    fill(&client, "urgent", 100, 0).await;
    fill(&client, "bulk", 100, 0).await;
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        concurrency: 2,
        strict_priority: true,
        ..fast_config()
    }
    .queues([("urgent", 2), ("bulk", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(20), "all tasks", || async {
        log.lock().expect("lock").len() == 200
    })
    .await;
    server.shutdown().await;
    let order = log.lock().expect("lock").clone();
    let last_urgent = order
        .iter()
        .rposition(|(q, _)| q == "urgent")
        .expect("urgent ran");
    let first_bulk = order
        .iter()
        .position(|(q, _)| q == "bulk")
        .expect("bulk ran");
    assert!(
        last_urgent < first_bulk,
        "bulk started at {first_bulk} before urgent finished at {last_urgent}"
    );
}

#[tokio::test]
async fn graceful_shutdown_loses_nothing_and_spends_no_attempt_on_unstarted_tasks() {
    let b = broker().await;
    let client = Client::new(b.clone());
    fill(&client, "default", 30, 300).await;
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        concurrency: 3,
        ..fast_config()
    };
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "first tasks started", || async {
        !log.lock().expect("lock").is_empty()
    })
    .await;
    server.shutdown().await;
    let started = log.lock().expect("lock").len();
    let stats = b.queue_stats(&q("default")).await.expect("stats");
    eprintln!("started {started} stats {stats:?}");
    for st in [TaskState::Pending, TaskState::Active, TaskState::Retry] {
        for t in b.list_tasks(&q("default"), st, 0, 100).await.expect("list") {
            let e = t.envelope.expect("d");
            eprintln!(
                "{st:?} {} retried {} err {:?}",
                e.id, e.retried, e.last_error
            );
        }
    }
    assert_eq!(
        stats.processed as usize, started,
        "every started task finished within the grace period"
    );
    assert_eq!((stats.active, stats.retry), (0, 0));
    assert_eq!(stats.pending as usize + started, 30, "nothing lost");
    let pending = b
        .list_tasks(&q("default"), TaskState::Pending, 0, 100)
        .await
        .expect("list");
    assert!(
        pending
            .iter()
            .all(|t| t.envelope.as_ref().expect("decodes").retried == 0),
        "no attempt spent"
    );
}

#[tokio::test]
async fn shutdown_past_its_timeout_cancels_and_requeues_without_spending_an_attempt() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let info = client
        .enqueue(
            &Job {
                n: 1,
                sleep_ms: 60_000,
            },
            // Its only attempt: counting the shutdown as a failure would dead-letter it.
            EnqueueOptions::new().max_retry(0),
        )
        .await
        .expect("enqueue");
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        shutdown_timeout: Duration::from_millis(200),
        ..fast_config()
    };
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "task started", || async {
        !log.lock().expect("lock").is_empty()
    })
    .await;
    server.shutdown().await;
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("not lost");
    assert_eq!(rec.state, TaskState::Pending);
    let env = rec.envelope.expect("decodes");
    assert_eq!(env.retried, 0, "a shutdown is not the task's failure");
}

#[tokio::test]
async fn long_task_is_not_reclaimed_while_its_worker_lives() {
    let b = broker().await;
    let client = Client::new(b.clone());
    client
        .enqueue(
            &Job {
                n: 1,
                sleep_ms: 2_500,
            },
            EnqueueOptions::new(),
        )
        .await
        .expect("enqueue");
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        recover_min_idle: Duration::from_millis(600),
        heartbeat_interval: Duration::from_millis(150),
        recover_interval: Duration::from_millis(100),
        ..fast_config()
    };
    // A second server runs only the recoverer's view of the queue: it must not steal the task.
    let (other_mux, other_log) = recording_mux();
    let server = Server::new(b.clone(), mux, cfg.clone())
        .expect("server")
        .start()
        .await
        .expect("start");
    let other = Server::new(b.clone(), other_mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "task done", || async {
        b.queue_stats(&q("default")).await.expect("stats").processed == 1
    })
    .await;
    assert_eq!(
        log.lock().expect("lock").len() + other_log.lock().expect("lock").len(),
        1,
        "ran exactly once"
    );
    server.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn paused_queue_is_honoured_within_a_second() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    b.set_paused(&q("default"), true).await.expect("pause");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // A read already blocking when the pause landed may still deliver one task; after that, none.
    client
        .enqueue(&Job { n: 0, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    fill(&client, "default", 5, 0).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let ran_while_paused = log.lock().expect("lock").len();
    assert!(
        ran_while_paused <= 1,
        "{ran_while_paused} tasks ran while paused"
    );
    b.set_paused(&q("default"), false).await.expect("resume");
    eventually(Duration::from_secs(3), "resumed", || async {
        log.lock().expect("lock").len() == 6
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn server_survives_a_redis_restart() {
    let mut redis = chronos_testkit::RedisServer::start().expect("own redis");
    let b = broker_at(&redis.url()).await;
    let client = Client::new(b.clone());
    let (mux, log) = recording_mux();
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "first task", || async {
        log.lock().expect("lock").len() == 1
    })
    .await;
    redis.restart().expect("restart redis");
    // The client reconnects by itself; the enqueue may need a moment while it does.
    eventually(Duration::from_secs(15), "enqueue after restart", || async {
        client
            .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
            .await
            .is_ok()
    })
    .await;
    eventually(Duration::from_secs(15), "task after restart", || async {
        log.lock().expect("lock").iter().any(|(_, n)| *n == 2)
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn janitor_removes_consumers_of_gone_servers_only_when_they_hold_nothing() {
    let b = broker().await;
    let queue = q("default");
    let client = Client::new(b.clone());
    b.ensure_queue(&queue).await.expect("queue");
    // A consumer of a server that no longer exists, holding nothing.
    let mut reader = b.open_reader().await.expect("reader");
    b.fetch(&mut reader, &queue, "ghost", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    // And one that still holds a task.
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    b.fetch(&mut reader, &queue, "ghost-busy", &[], 1, Duration::ZERO)
        .await
        .expect("fetch");
    let (mux, _log) = recording_mux();
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(5), "ghost removed", || async {
        let c = b.consumers(&queue).await.expect("consumers");
        !c.iter().any(|(n, _, _)| n == "ghost")
    })
    .await;
    // Redis creates a consumer only when a read delivers something: give the server one task,
    // then check its own idle consumer survives its janitor.
    client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "task done", || async {
        b.queue_stats(&queue).await.expect("stats").processed == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let names: Vec<String> = b
        .consumers(&queue)
        .await
        .expect("consumers")
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert!(names.contains(&"ghost-busy".to_string()), "{names:?}");
    assert!(names.contains(&server.id().to_string()), "{names:?}");
    let servers = b.servers().await.expect("servers");
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0].id, server.id());
    server.shutdown().await;
    assert!(
        b.servers().await.expect("servers").is_empty(),
        "record withdrawn on shutdown"
    );
}

struct Counting(Arc<AtomicU32>);

#[async_trait]
impl Middleware for Counting {
    async fn call(&self, ctx: Context, next: Next<'_>) -> Result<(), TaskError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        if ctx.kind() == "job" && ctx.queue() == "blocked" {
            return Err(TaskError::skip_retry("blocked by middleware"));
        }
        next.run(ctx).await
    }
}

#[tokio::test]
async fn middleware_wraps_every_handler_call_and_can_short_circuit() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let (mut mux, log) = recording_mux();
    mux.middleware(Counting(calls.clone()));
    let cfg = fast_config().queues([("default", 1), ("blocked", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    client
        .enqueue(
            &Job { n: 2, sleep_ms: 0 },
            EnqueueOptions::new().queue("blocked"),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "both seen", || async {
        calls.load(Ordering::SeqCst) == 2
    })
    .await;
    eventually(Duration::from_secs(5), "blocked archived", || async {
        b.queue_stats(&QueueName::new("blocked").expect("q"))
            .await
            .expect("stats")
            .archived
            == 1
    })
    .await;
    assert_eq!(
        log.lock().expect("lock").clone(),
        vec![("default".to_string(), 1)]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn paused_top_queue_does_not_stall_strict_priority() {
    let b = broker().await;
    let client = Client::new(b.clone());
    fill(&client, "urgent", 5, 0).await;
    b.set_paused(&q("urgent"), true).await.expect("pause");
    let (mux, log) = recording_mux();
    let cfg = ServerConfig {
        strict_priority: true,
        ..fast_config()
    }
    .queues([("urgent", 2), ("bulk", 1)]);
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    fill(&client, "bulk", 5, 0).await;
    eventually(
        Duration::from_secs(5),
        "bulk runs while urgent is paused",
        || async { log.lock().expect("lock").len() == 5 },
    )
    .await;
    assert!(log.lock().expect("lock").iter().all(|(q, _)| q == "bulk"));
    server.shutdown().await;
}

#[tokio::test]
async fn the_server_record_lists_the_tasks_its_handlers_run_until_they_end() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, _log) = recording_mux();
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let before = chronos_broker::now_ms();
    let slow = client
        .enqueue(
            &Job {
                n: 1,
                sleep_ms: 1_500,
            },
            EnqueueOptions::new(),
        )
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(5), "running task published", || async {
        b.servers()
            .await
            .expect("servers")
            .iter()
            .any(|s| s.tasks.iter().any(|t| t.id == slow.id))
    })
    .await;
    let servers = b.servers().await.expect("servers");
    let t = servers[0]
        .tasks
        .iter()
        .find(|t| t.id == slow.id)
        .expect("listed");
    assert_eq!((t.queue.as_str(), t.kind.as_str()), ("default", "job"));
    assert!(t.started_at_ms >= before && t.started_at_ms <= chronos_broker::now_ms());
    eventually(Duration::from_secs(5), "ended task unlisted", || async {
        b.servers()
            .await
            .expect("servers")
            .iter()
            .all(|s| s.tasks.is_empty())
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn run_times_and_waits_are_counted_per_kind_and_written_with_the_heartbeat() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let (mux, _log) = recording_mux();
    fill(&client, "default", 4, 60).await;
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let queue = q("default");
    let since = chronos_broker::now_ms() - 120_000;
    eventually(Duration::from_secs(10), "timings written", || async {
        b.timings(&queue, since, chronos_broker::now_ms())
            .await
            .expect("timings")
            .iter()
            .filter_map(|m| m.kinds.get("job"))
            .map(|(run, _)| run.total())
            .sum::<u64>()
            == 4
    })
    .await;
    let mut run = chronos_broker::TimingHist::default();
    for m in b
        .timings(&queue, since, chronos_broker::now_ms())
        .await
        .expect("timings")
    {
        if let Some((r, _)) = m.kinds.get("job") {
            run.merge(r);
        }
    }
    let p50 = run.quantile(0.5).expect("p50");
    assert!((60.0..=60.0 * 1.25 * 1.25 + 50.0).contains(&p50), "{p50}");
    server.shutdown().await;
}
