//! Chains and groups run by a real server against a real Redis.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{
    Chain, ChainStatus, Client, Consume, EnqueueOptions, Group, Inspect, Maintain, TaskArgs,
};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Done;

impl TaskArgs for Done {
    const KIND: &'static str = "done";
}

fn job(n: u32) -> Job {
    Job { n, sleep_ms: 0 }
}

#[tokio::test]
async fn a_three_step_chain_passes_results_along_and_its_last_result_is_readable() {
    let b = broker().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    let s = seen.clone();
    mux.handle(move |ctx: Context, task: Task<Job>| {
        let s = s.clone();
        async move {
            let before: u64 = ctx.parent_result()?.unwrap_or(0);
            let at = ctx.chain().expect("a chain step");
            s.lock()
                .expect("lock")
                .push((at.step, at.total, before, ctx.task_id().to_string()));
            Ok(before * 10 + u64::from(task.args.n))
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config().queues([("a", 1), ("b", 1)]))
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let info = client
        .enqueue_chain(
            Chain::new()
                .then(&job(1), EnqueueOptions::new().queue("a"))
                .then(&job(2), EnqueueOptions::new().queue("b"))
                .then(&job(3), EnqueueOptions::new().queue("a")),
        )
        .await
        .expect("chain");
    eventually(Duration::from_secs(10), "the chain succeeds", || async {
        matches!(
            client.chain_status(&info).await.expect("status"),
            ChainStatus::Succeeded { .. }
        )
    })
    .await;
    let status = client.chain_status(&info).await.expect("status");
    assert_eq!(
        status.result::<u64>().map(|r| r.expect("decodes")),
        Some(123)
    );
    let seen = seen.lock().expect("lock").clone();
    let id = &info.id;
    assert_eq!(
        seen,
        vec![
            (0, 3, 0, format!("{id}:0")),
            (1, 3, 1, format!("{id}:1")),
            (2, 3, 12, format!("{id}:2")),
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_dead_lettered_step_stops_the_chain_and_its_status_says_where() {
    let b = broker().await;
    let runs = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let r = runs.clone();
    mux.handle(move |_ctx: Context, task: Task<Job>| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            if task.args.n == 2 {
                return Err(TaskError::skip_retry("step two refuses"));
            }
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let info = client
        .enqueue_chain(
            Chain::new()
                .then(&job(1), EnqueueOptions::new())
                .then(&job(2), EnqueueOptions::new())
                .then(&job(3), EnqueueOptions::new()),
        )
        .await
        .expect("chain");
    eventually(Duration::from_secs(10), "the chain fails", || async {
        matches!(
            client.chain_status(&info).await.expect("status"),
            ChainStatus::Failed { .. }
        )
    })
    .await;
    assert_eq!(
        client.chain_status(&info).await.expect("status"),
        ChainStatus::Failed {
            step: 1,
            error: "step two refuses".into()
        }
    );
    server.shutdown().await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the third step never ran");
    let (queue, third) = &info.steps[2];
    assert!(b.task(queue, third).await.expect("read").is_none());
}

#[tokio::test]
async fn a_group_with_failing_members_runs_its_callback_once_with_counts_and_results() {
    const N: u32 = 50;
    let b = broker().await;
    let client = Client::new(b.clone());
    let callbacks = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    mux.handle(|ctx: Context, task: Task<Job>| async move {
        assert!(ctx.group_member().is_some());
        if task.args.n % 10 == 3 {
            return Err(TaskError::skip_retry(format!(
                "member {} fails",
                task.args.n
            )));
        }
        Ok(task.args.n * 2)
    })
    .expect("register");
    let (c, reader) = (callbacks.clone(), client.clone());
    mux.handle(move |ctx: Context, _task: Task<Done>| {
        let (c, reader) = (c.clone(), reader.clone());
        async move {
            let group = ctx.group().expect("a group callback");
            let info = group.info()?;
            let mut sum = 0u64;
            let mut failed = Vec::new();
            let mut cursor = 0;
            loop {
                let page = reader.group_results(&info, cursor, 7).await?;
                for m in page.members {
                    match &m.outcome {
                        Ok(_) => sum += u64::from(m.decode::<u32>().expect("collected")?),
                        Err(e) => failed.push(e.clone()),
                    }
                }
                match page.next {
                    Some(n) => cursor = n,
                    None => break,
                }
            }
            failed.sort();
            c.lock().expect("lock").push((group, sum, failed));
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(
        b.clone(),
        mux,
        fast_config().queues([("members", 1), ("cb", 1)]),
    )
    .expect("server")
    .start()
    .await
    .expect("start");
    let group = Group::new(&Done, EnqueueOptions::new().queue("cb"))
        .members((0..N).map(|n| (job(n), EnqueueOptions::new().queue("members"))))
        .collect_results();
    let info = client.enqueue_group(group).await.expect("group");
    eventually(Duration::from_secs(15), "the callback runs", || async {
        !callbacks.lock().expect("lock").is_empty()
    })
    .await;
    server.shutdown().await;

    let callbacks = callbacks.lock().expect("lock").clone();
    assert_eq!(callbacks.len(), 1, "the callback ran exactly once");
    let (group, sum, failed) = &callbacks[0];
    assert_eq!(group.id, info.id);
    assert_eq!((group.total, group.succeeded, group.failed), (50, 45, 5));
    let expected: u64 = (0..N)
        .filter(|n| n % 10 != 3)
        .map(|n| u64::from(n) * 2)
        .sum();
    assert_eq!(*sum, expected);
    assert_eq!(failed.len(), 5);
    assert!(failed.iter().all(|e| e.starts_with("member ")));
    let stats = b.queue_stats(&q("members")).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 5));
}

#[tokio::test]
async fn a_test_context_gives_chain_steps_and_group_callbacks_their_workflow() {
    use chronos_worker::testing::TestContext;
    let ctx = TestContext::new().chain_step("c1", 1, 3, &41u64).build();
    assert_eq!(ctx.parent_result::<u64>().expect("decodes"), Some(41));
    let at = ctx.chain().expect("a chain step");
    assert_eq!((at.id.as_str(), at.step, at.total), ("c1", 1, 3));
    assert!(ctx.group().is_none());

    let ctx = TestContext::new().group_callback("g1", 7, 2).build();
    let g = ctx.group().expect("a group callback");
    assert_eq!(
        (g.id.as_str(), g.total, g.succeeded, g.failed),
        ("g1", 9, 7, 2)
    );
    assert_eq!(ctx.parent_result::<u64>().expect("decodes"), None);
}

#[tokio::test]
async fn a_member_the_recoverer_dead_lettered_is_counted_even_when_it_died_before_reporting() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let group = Group::new(&Done, EnqueueOptions::new().queue("lostcb"))
        .member(&job(1), EnqueueOptions::new().queue("lostm").max_retry(0));
    let info = client.enqueue_group(group).await.expect("group");

    // A worker takes the member, starts it and is lost: no heartbeat, no settle.
    let members = q("lostm");
    b.ensure_queue(&members).await.expect("queue");
    let mut reader = b.open_reader().await.expect("reader");
    let f = b
        .fetch(
            &mut reader,
            &members,
            "ghost",
            &[],
            1,
            Duration::from_millis(100),
        )
        .await
        .expect("fetch");
    b.close_reader(reader).await;
    let leases: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    assert_eq!(leases.len(), 1);
    b.start(&members, &leases).await.expect("start");

    // A recoverer dead-letters it and dies before reporting it to its group.
    let idle = Duration::from_millis(30);
    let dead = Arc::new(Mutex::new(Vec::new()));
    eventually(
        Duration::from_secs(10),
        "the member is dead-lettered",
        || {
            let (b, members, dead) = (b.clone(), members.clone(), dead.clone());
            async move {
                let r = b.reclaim_idle(&members, idle, 10).await.expect("reclaim");
                dead.lock().expect("lock").extend(r.dead);
                !dead.lock().expect("lock").is_empty()
            }
        },
    )
    .await;
    assert_eq!(dead.lock().expect("lock").len(), 1);
    let state = client
        .group_status(&info)
        .await
        .expect("status")
        .expect("group");
    assert_eq!(
        (state.failed, state.fired),
        (0, false),
        "nobody reported yet"
    );

    // A server's recoverer finds the dead letter in the outbox and counts it.
    let callbacks = Arc::new(Mutex::new(Vec::new()));
    let member_runs = Arc::new(AtomicU32::new(0));
    let mut mux = Mux::new();
    let runs = member_runs.clone();
    mux.handle(move |_ctx: Context, _task: Task<Job>| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    let c = callbacks.clone();
    mux.handle(move |ctx: Context, _task: Task<Done>| {
        let c = c.clone();
        async move {
            c.lock()
                .expect("lock")
                .push(ctx.group().expect("a group callback"));
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(
        b.clone(),
        mux,
        fast_config().queues([("lostm", 1), ("lostcb", 1)]),
    )
    .expect("server")
    .start()
    .await
    .expect("start");
    eventually(Duration::from_secs(15), "the callback runs", || async {
        !callbacks.lock().expect("lock").is_empty()
    })
    .await;
    eventually(Duration::from_secs(10), "the outbox is drained", || async {
        b.reclaimed_dead(&members, 100)
            .await
            .expect("outbox")
            .is_empty()
    })
    .await;
    server.shutdown().await;

    let callbacks = callbacks.lock().expect("lock").clone();
    assert_eq!(callbacks.len(), 1, "the callback ran exactly once");
    let g = &callbacks[0];
    assert_eq!((g.total, g.succeeded, g.failed), (1, 0, 1));
    assert_eq!(
        member_runs.load(Ordering::SeqCst),
        0,
        "the member stays dead"
    );
    let stats = b.queue_stats(&members).await.expect("stats");
    assert_eq!((stats.pending, stats.active, stats.archived), (0, 0, 1));
}
