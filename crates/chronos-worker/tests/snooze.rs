//! `TaskError::snooze` against a real Redis: the task runs again later on the same attempt, no
//! error is recorded, and `max_snoozes` dead-letters a task that would snooze for ever.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, Inspect, TaskState};
use chronos_worker::{dead_letter_hook, Context, DeadLetterEvent, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

#[tokio::test]
async fn a_snoozing_handler_runs_again_on_the_same_attempt_without_an_error() {
    let b = broker().await;
    // Attempt numbers the handler saw, one per run; it snoozes on its first two runs.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Job>| {
        let s = s.clone();
        async move {
            let runs = {
                let mut s = s.lock().expect("lock");
                s.push(ctx.attempt());
                s.len()
            };
            if runs <= 2 {
                return Err(TaskError::snooze(Duration::from_millis(100)));
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
    // max_retry 0: a snooze that spent an attempt would dead-letter the task at once.
    let info = Client::new(b.clone())
        .enqueue(
            &Job { n: 1, sleep_ms: 0 },
            EnqueueOptions::new()
                .max_retry(0)
                .retention(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(10),
        "the third run succeeded",
        || async { server.stats().succeeded == 1 },
    )
    .await;
    assert_eq!(seen.lock().expect("lock").clone(), vec![1, 1, 1]);
    let stats = server.stats();
    assert_eq!((stats.snoozed, stats.failed, stats.dead), (2, 0, 0));
    eventually(Duration::from_secs(5), "completed", || async {
        b.task(&q("default"), &info.id)
            .await
            .expect("task")
            .is_some_and(|r| r.state == TaskState::Completed)
    })
    .await;
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("kept");
    assert_eq!(rec.snoozes, 2);
    let env = rec.envelope.expect("envelope");
    assert_eq!((env.retried, env.last_error), (0, None));
    server.shutdown().await;
}

#[tokio::test]
async fn a_task_that_snoozes_past_max_snoozes_is_dead_lettered_with_the_reason() {
    let b = broker().await;
    let mut mux = Mux::new();
    mux.handle(|_c: Context, _t: Task<Job>| async {
        Err::<(), _>(TaskError::snooze(Duration::from_millis(20)))
    })
    .expect("register");
    let dead = Arc::new(Mutex::new(Vec::new()));
    let sink = dead.clone();
    let mut cfg = fast_config().max_snoozes(3);
    cfg.on_dead_letter = Some(dead_letter_hook(move |e: DeadLetterEvent| {
        sink.lock().expect("lock").push(e);
        async {}
    }));
    let server = Server::new(b.clone(), mux, cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    let info = Client::new(b.clone())
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "dead-lettered", || async {
        server.stats().dead == 1
    })
    .await;
    assert_eq!(
        server.stats().snoozed,
        3,
        "three snoozes, the fourth refused"
    );
    let events = dead.lock().expect("lock").clone();
    assert_eq!(events.len(), 1);
    assert!(
        events[0].reason.contains("max_snoozes"),
        "{}",
        events[0].reason
    );
    let rec = b
        .task(&q("default"), &info.id)
        .await
        .expect("task")
        .expect("archived");
    assert_eq!((rec.state, rec.snoozes), (TaskState::Archived, 3));
    server.shutdown().await;
}
