//! An operator's archive and delete against running workers (issue 35, 2.17): a task whose
//! handler ran, or runs, is never taken as if it were waiting, whether or not its start mark was
//! written and whether or not its ack has reached Redis yet.

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{
    ActionOutcome, Chain, Client, Dedup, EnqueueOptions, Events, Group, Inspect, Operate, Priority,
    RedisBroker, TaskAction, TaskFilter, TaskState,
};
use chronos_testkit::{RedisServer, TcpProxy};
use chronos_worker::{Context, Mux, QueueLimit, Server, ServerConfig, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

async fn connect(url: &str) -> RedisBroker {
    RedisBroker::builder(url)
        .namespace("operator")
        .connect()
        .await
        .expect("connect")
}

/// The handler ends at once (well within the start mark's delay, so no mark is written); the
/// first run then stalls the worker's connection before it returns, so its acknowledgement
/// (carried to the fetcher's next read, or handed to the settler) cannot reach Redis. For Redis
/// the task is then exactly what a quick task is for a moment after its handler returned:
/// fetched, unmarked, unacked. The archive and the delete must refuse it as running; once the
/// connection flows again the ack lands and the task is completed, having run once.
#[tokio::test]
async fn an_archive_refuses_a_task_whose_handler_ran_while_its_ack_is_on_its_way() {
    let redis = RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = Arc::new(TcpProxy::start(target).await.expect("proxy"));
    let via = connect(&proxy.url()).await;
    let direct = connect(&redis.url()).await;
    let queue = q("default");
    let runs = Arc::new(Mutex::new(Vec::<u32>::new()));
    let mut mux = Mux::new();
    {
        let (runs, proxy) = (runs.clone(), proxy.clone());
        mux.handle(move |_: Context, t: Task<Job>| {
            let (runs, proxy) = (runs.clone(), proxy.clone());
            async move {
                let mut r = runs.lock().expect("lock");
                if r.is_empty() {
                    proxy.stall(true);
                }
                r.push(t.args.n);
                Ok(())
            }
        })
        .expect("register");
    }
    let config = ServerConfig {
        concurrency: 1,
        ..fast_config()
    };
    // More tasks behind it keep the queue busy, so the fetcher reads again and carries the
    // first task's ack with that read.
    let client = Client::new(direct.clone());
    let first = client
        .enqueue(&Job { n: 0, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    for n in 1..4 {
        client
            .enqueue(&Job { n, sleep_ms: 0 }, EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    let server = Server::new(via.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "the first handler ran", || async {
        !runs.lock().expect("lock").is_empty()
    })
    .await;
    assert_eq!(runs.lock().expect("lock").clone(), vec![0]);
    for action in [TaskAction::Archive, TaskAction::Delete] {
        assert_eq!(
            direct.act(&queue, &first.id, action).await.expect("act"),
            ActionOutcome::Refused(Some(TaskState::Active)),
            "{action:?} of a task whose handler ran"
        );
    }
    let stats = direct.queue_stats(&queue).await.expect("stats");
    assert_eq!(stats.archived, 0, "{stats:?}");
    proxy.stall(false);
    eventually(Duration::from_secs(20), "every task completed", || async {
        let s = direct.queue_stats(&queue).await.expect("stats");
        s.pending + s.active == 0 && s.processed == 4
    })
    .await;
    server.shutdown().await;
    let mut ran = runs.lock().expect("lock").clone();
    ran.sort_unstable();
    assert_eq!(ran, vec![0, 1, 2, 3], "each ran once");
    let stats = direct.queue_stats(&queue).await.expect("stats");
    assert_eq!((stats.archived, stats.failed), (0, 0), "{stats:?}");
    assert!(direct
        .task(&queue, &first.id)
        .await
        .expect("task")
        .is_none());
}

/// A bulk archive of every pending task while workers run them (each handler records its run):
/// every task ends either archived or run, never both, and the report counts what it refused.
#[tokio::test]
async fn a_bulk_archive_under_running_workers_archives_no_task_that_ran() {
    const N: u32 = 5_000;
    let b = broker().await;
    let queue = q("default");
    let runs = Arc::new(Mutex::new(Vec::<u32>::new()));
    let mut mux = Mux::new();
    {
        let runs = runs.clone();
        mux.handle(move |_: Context, t: Task<Job>| {
            let runs = runs.clone();
            async move {
                runs.lock().expect("lock").push(t.args.n);
                Ok(())
            }
        })
        .expect("register");
    }
    let mut servers = Vec::new();
    for _ in 0..2 {
        let config = ServerConfig {
            concurrency: 8,
            ..fast_config()
        };
        servers.push(
            Server::new(b.clone(), mux.clone(), config)
                .expect("server")
                .start()
                .await
                .expect("start"),
        );
    }
    let jobs: Vec<Job> = (0..N).map(|n| Job { n, sleep_ms: 0 }).collect();
    let client = Client::new(b.clone());
    let mut ids: HashMap<String, u32> = HashMap::new();
    for part in jobs.chunks(1_000) {
        let infos = client
            .enqueue_batch(part.iter().map(|j| (j, EnqueueOptions::new())))
            .await
            .expect("batch");
        for (j, info) in part.iter().zip(infos) {
            ids.insert(info.expect("enqueued").id, j.n);
        }
    }
    let report = b
        .act_all(
            &queue,
            TaskState::Pending,
            &TaskFilter::default(),
            TaskAction::Archive,
            250,
        )
        .await
        .expect("bulk archive");
    eventually(Duration::from_secs(60), "the workers drained", || async {
        let s = b.queue_stats(&queue).await.expect("stats");
        s.pending + s.active == 0
    })
    .await;
    for s in servers {
        s.shutdown().await;
    }
    let mut archived = BTreeSet::new();
    let mut cursor = None;
    loop {
        let page = b
            .list_page(
                &queue,
                TaskState::Archived,
                &TaskFilter::default(),
                cursor.as_deref(),
                1_000,
            )
            .await
            .expect("list");
        archived.extend(page.tasks.into_iter().map(|t| ids[&t.id]));
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    let ran: BTreeSet<u32> = runs.lock().expect("lock").iter().copied().collect();
    let both: Vec<&u32> = archived.intersection(&ran).collect();
    println!(
        "bulk archive under 2 workers: {} archived, {} ran, {} both, report {report:?}",
        archived.len(),
        ran.len(),
        both.len()
    );
    assert!(
        both.is_empty(),
        "{} tasks archived after their handler ran, first {:?}",
        both.len(),
        &both[..both.len().min(10)]
    );
    assert_eq!(
        runs.lock().expect("lock").len(),
        ran.len(),
        "none ran twice"
    );
    assert_eq!(
        archived.len() + ran.len(),
        N as usize,
        "every task archived or run"
    );
    assert_eq!(report.done, archived.len() as u64, "{report:?}");
    assert_eq!(
        report.matched,
        report.done + report.skipped + report.running + report.failed,
        "{report:?}"
    );
}

/// The keys of `queue` (its prefix `<ns>:{<queue>}:`) that exist now.
async fn keys_of(b: &RedisBroker, queue: &chronos_broker::QueueName) -> Vec<String> {
    use chronos_broker::fred::interfaces::KeysInterface;
    let prefix = b.keyspace().queue(queue).prefix().to_string();
    let mut out = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, page): (String, Vec<String>) = b
            .client()
            .scan_page(cursor, format!("{prefix}*"), Some(1_000), None)
            .await
            .expect("scan");
        out.extend(page.into_iter().filter(|k| k.starts_with(&prefix)));
        if next == "0" {
            break;
        }
        cursor = next;
    }
    out.sort();
    out
}

/// A queue used with every feature a worker and a producer bring (events on, plain, explicit
/// id, unique and deduplicated tasks, delays, levels, a tenant, LIFO, retention, rate keys
/// under per-key and queue limits, retries, snoozes, handler blocks, dead letters, cancels,
/// progress, a chain and a group) is deleted: no key of it is left, so a queue created again
/// under the name starts empty (its events and dedup counters were left behind: issue 35,
/// 2.14).
#[tokio::test]
async fn a_queue_deleted_after_every_feature_was_used_leaves_no_key_behind() {
    let b = broker().await;
    let name = "every";
    let queue = q(name);
    b.set_events(&queue, true).await.expect("events on");
    let seen = Arc::new(Mutex::new(HashSet::<u32>::new()));
    let mut mux = Mux::new();
    {
        let seen = seen.clone();
        mux.handle(move |ctx: Context, t: Task<Job>| {
            let seen = seen.clone();
            async move {
                let first = seen.lock().expect("lock").insert(t.args.n);
                match t.args.n {
                    1 => Err(TaskError::skip_retry("dead on arrival")),
                    2 => Err(TaskError::cancel("not wanted")),
                    3 if first => Err(TaskError::rate_limited(Duration::from_millis(200))),
                    4 if first => Err(TaskError::retry_after(Duration::from_millis(100), "once")),
                    5 if first => Err(TaskError::snooze(Duration::from_millis(100))),
                    6 => Err(TaskError::rate_limited(Duration::from_millis(200)).queue_wide())
                        .or_else(|e| if first { Err(e) } else { Ok(()) }),
                    _ => {
                        ctx.progress(&serde_json::json!({ "n": t.args.n }))
                            .expect("progress");
                        Ok(())
                    }
                }
            }
        })
        .expect("register");
    }
    let config = ServerConfig {
        concurrency: 8,
        queues: vec![(name.to_string(), 1)],
        ..fast_config()
    }
    .limit(
        name,
        QueueLimit::new()
            .rate(1_000, Duration::from_secs(1))
            .concurrency(16)
            .per_key_rate(100, Duration::from_secs(1)),
    );
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let o = || EnqueueOptions::new().queue(name);
    let job = |n| Job { n, sleep_ms: 0 };
    let mut all = vec![
        (job(0), o()),
        (job(1), o()),
        (job(2), o()),
        (job(3), o().rate_key("rk")),
        (job(4), o()),
        (job(5), o()),
        (job(6), o()),
        (job(10), o().task_id("explicit-1")),
        (job(11), o().unique(Duration::from_secs(60))),
        (
            job(12),
            o().dedup(Dedup::key("k").ttl(Duration::from_secs(60))),
        ),
        (
            job(12),
            o().dedup(Dedup::key("k").ttl(Duration::from_secs(60))),
        ),
        (job(13), o().process_in(Duration::from_millis(200))),
        (job(14), o().priority(Priority::level(0).expect("level"))),
        (job(15), o().priority(Priority::level(9).expect("level"))),
        (job(16), o().tenant("acme")),
        (job(17), o().lifo()),
        (job(18), o().retention(Duration::from_secs(60))),
    ];
    for (j, opts) in all.drain(..) {
        client.enqueue(&j, opts).await.expect("enqueue");
    }
    client
        .enqueue_chain(Chain::new().then(&job(20), o()).then(&job(21), o()))
        .await
        .expect("chain");
    client
        .enqueue_group(Group::new(&job(30), o()).member(&job(31), o()))
        .await
        .expect("group");
    eventually(Duration::from_secs(30), "every task settled", || async {
        let s = b.queue_stats(&queue).await.expect("stats");
        s.pending + s.active + s.scheduled + s.retry == 0 && s.processed >= 14
    })
    .await;
    server.shutdown().await;
    let before = keys_of(&b, &queue).await;
    println!("{} keys of the queue before its delete", before.len());
    b.delete_queue(&queue, true).await.expect("delete");
    let left = keys_of(&b, &queue).await;
    assert!(left.is_empty(), "keys left after the delete: {left:?}");
    assert!(!b.events_on(&queue).await.expect("events"));
}
