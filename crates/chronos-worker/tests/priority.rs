//! Priority levels inside a queue as a running server sees them: the order it runs a backlog
//! in, and an idle server woken by a level the queue never had.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos_broker::{Client, EnqueueOptions, Priority};
use chronos_worker::{Context, Mux, Server, ServerConfig, Task};
use common::{broker, eventually, fast_config, Job};

/// A handler that records the order jobs ran in.
fn recording() -> (Mux, Arc<Mutex<Vec<u32>>>) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut mux = Mux::new();
    let seen = ran.clone();
    mux.handle(move |_: Context, t: Task<Job>| {
        let seen = seen.clone();
        async move {
            seen.lock().expect("lock").push(t.args.n);
            Ok(())
        }
    })
    .expect("register");
    (mux, ran)
}

fn level(n: u8) -> Priority {
    Priority::level(n).expect("level")
}

#[tokio::test]
async fn a_server_runs_a_backlog_most_urgent_level_first() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let levels = [9u8, 0, 5, 3, 7];
    for n in 0..40u32 {
        let l = levels[n as usize % levels.len()];
        client
            .enqueue(
                &Job { n, sleep_ms: 0 },
                EnqueueOptions::new().priority(level(l)),
            )
            .await
            .expect("enqueue");
    }
    let (mux, ran) = recording();
    let config = ServerConfig {
        concurrency: 1,
        ..fast_config()
    };
    let server = Server::new(b.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(20), "40 jobs ran", || async {
        ran.lock().expect("lock").len() == 40
    })
    .await;
    server.shutdown().await;
    let got = ran.lock().expect("lock").clone();
    let mut want: Vec<u32> = (0..40).collect();
    want.sort_by_key(|&n| (levels[n as usize % levels.len()], n));
    assert_eq!(got, want);
}

#[tokio::test]
async fn an_idle_server_runs_the_first_task_of_a_new_level() {
    let b = broker().await;
    let (mux, ran) = recording();
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(b.clone());
    client
        .enqueue(&Job { n: 1, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    eventually(Duration::from_secs(10), "the plain job ran", || async {
        ran.lock().expect("lock").len() == 1
    })
    .await;
    // Idle again: now tasks of levels the queue never had.
    for (n, l) in [(2, 0u8), (3, 8), (4, 0)] {
        client
            .enqueue(
                &Job { n, sleep_ms: 0 },
                EnqueueOptions::new().priority(level(l)),
            )
            .await
            .expect("enqueue");
    }
    eventually(Duration::from_secs(10), "the level jobs ran", || async {
        ran.lock().expect("lock").len() == 4
    })
    .await;
    server.shutdown().await;
    let mut got = ran.lock().expect("lock").clone();
    got.sort_unstable();
    assert_eq!(got, vec![1, 2, 3, 4]);
}
