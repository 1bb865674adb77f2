//! A queue's events as a running server writes them: every attempt has its `started` event
//! before the event that ends it, also for handlers that return at once (the worker then
//! settles without ever sending the start mark) and for retried attempts.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, EventKind, Events};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

#[tokio::test]
async fn every_attempt_of_a_quick_handler_starts_before_it_ends() {
    let b = broker().await;
    b.set_events(&q("default"), true).await.expect("events on");
    let mut mux = Mux::new();
    // Returns at once; the tasks numbered 1000 and up fail their first attempt.
    mux.handle(|ctx: Context, task: Task<Job>| async move {
        if task.args.n >= 1000 && ctx.attempt() == 1 {
            return Err(TaskError::retry("first attempt fails"));
        }
        Ok(())
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    let mut ids = Vec::new();
    for n in (0..60).chain(1000..1030) {
        // Plain tasks, and tasks with a record (an explicit id).
        let opts = if n % 2 == 0 {
            EnqueueOptions::new()
        } else {
            EnqueueOptions::new().task_id(format!("t{n}"))
        };
        let info = client
            .enqueue(&Job { n, sleep_ms: 0 }, opts)
            .await
            .expect("enqueue");
        ids.push((info.id, n >= 1000));
    }
    eventually(Duration::from_secs(20), "every task done", || async {
        server.stats().succeeded == 90
    })
    .await;
    server.shutdown().await;

    let mut reader = b.open_event_reader().await.expect("reader");
    let events = b
        .read_events(&mut reader, &q("default"), "0-0", 10_000, Duration::ZERO)
        .await
        .expect("read");
    let mut by_task: BTreeMap<&str, Vec<&EventKind>> = BTreeMap::new();
    for e in &events {
        by_task.entry(&e.task_id).or_default().push(&e.event);
    }
    let mut wrong = Vec::new();
    for (id, retried) in &ids {
        let got: Vec<&str> = by_task
            .get(id.as_str())
            .map(|es| es.iter().map(|e| e.name()).collect())
            .unwrap_or_default();
        let want: &[&str] = if *retried {
            &[
                "enqueued",
                "started",
                "retried",
                "forwarded",
                "started",
                "completed",
            ]
        } else {
            &["enqueued", "started", "completed"]
        };
        if got != want {
            wrong.push(format!("{id}: {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} tasks without their events in order:\n{}",
        wrong.len(),
        ids.len(),
        wrong.join("\n")
    );
    // The started event names its attempt and its worker.
    let (retried_id, _) = ids.iter().find(|(_, r)| *r).expect("a retried task");
    let starts: Vec<(u32, bool)> = by_task[retried_id.as_str()]
        .iter()
        .filter_map(|e| match e {
            EventKind::Started { attempt, worker } => Some((*attempt, !worker.is_empty())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(1, true), (2, true)]);
}
