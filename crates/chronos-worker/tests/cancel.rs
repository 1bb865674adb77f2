//! An operator's cancel of a running task, against a real Redis: the handler's `Context` sees
//! it within a second; a handler that ignores it runs on and settles as usual.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronos_broker::{
    ActionOutcome, Client, EnqueueOptions, Inspect, Operate, TaskAction, TaskState,
};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, eventually, fast_config, q, Job};

/// (job n, when its handler saw its context cancelled), as each handler ends.
type Seen = Arc<Mutex<Vec<(u32, Option<Instant>)>>>;

#[tokio::test]
async fn a_cancelled_task_sees_it_through_its_context_within_a_second() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // n = 1 watches its context; n = 2 ignores it and finishes after a while.
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, t: Task<Job>| {
        let s = s.clone();
        async move {
            if t.args.n == 1 {
                tokio::select! {
                    _ = ctx.cancelled() => {
                        s.lock().expect("lock").push((1, Some(Instant::now())));
                        Err(TaskError::skip_retry("cancelled by an operator"))
                    }
                    _ = tokio::time::sleep(Duration::from_secs(20)) => Ok(()),
                }
            } else {
                tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
                s.lock()
                    .expect("lock")
                    .push((2, ctx.cancellation().is_cancelled().then(Instant::now)));
                Ok(())
            }
        }
    })
    .expect("register");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let queue = q("default");
    let watcher = client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let ignorer = client
        .enqueue(
            &Job {
                n: 2,
                sleep_ms: 1500,
            },
            EnqueueOptions::new().retention(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    for id in [&watcher.id, &ignorer.id] {
        eventually(Duration::from_secs(5), "task active", || async {
            b.task(&queue, id).await.expect("task").map(|r| r.state) == Some(TaskState::Active)
        })
        .await;
    }
    let asked = Instant::now();
    for id in [&watcher.id, &ignorer.id] {
        assert_eq!(
            b.act(&queue, id, TaskAction::Cancel).await.expect("cancel"),
            ActionOutcome::Done
        );
    }
    eventually(Duration::from_secs(3), "watcher cancelled", || async {
        seen.lock().expect("lock").iter().any(|(n, _)| *n == 1)
    })
    .await;
    let at = seen
        .lock()
        .expect("lock")
        .iter()
        .find_map(|(n, at)| (*n == 1).then_some(*at))
        .flatten();
    let took = at.expect("seen").duration_since(asked);
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
    // The watcher gave up (its handler's choice): dead-lettered.
    eventually(Duration::from_secs(3), "watcher archived", || async {
        b.task(&queue, &watcher.id)
            .await
            .expect("task")
            .map(|r| r.state)
            == Some(TaskState::Archived)
    })
    .await;
    // The ignorer ran to its end with its context cancelled, and completed as usual.
    eventually(Duration::from_secs(5), "ignorer completed", || async {
        b.task(&queue, &ignorer.id)
            .await
            .expect("task")
            .map(|r| r.state)
            == Some(TaskState::Completed)
    })
    .await;
    let log = seen.lock().expect("lock").clone();
    assert!(log.iter().any(|(n, at)| *n == 2 && at.is_some()), "{log:?}");
    server.shutdown().await;
}
