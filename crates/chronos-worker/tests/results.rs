//! A handler's result, end to end: returned by the handler, kept with the retained task, awaited
//! by the producer, against a real Redis.

mod common;

use std::time::Duration;

use chronos_broker::{BrokerError, Client, EnqueueOptions};
use chronos_worker::{Context, Mux, Server, Task, TaskError};
use common::{broker, fast_config, Job};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Square {
    n: u32,
    square: u64,
}

#[tokio::test]
async fn the_producer_waits_for_the_handlers_result() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let mut mux = Mux::new();
    mux.handle(|_: Context, t: Task<Job>| async move {
        if t.args.n == 13 {
            return Err(TaskError::skip_retry("unlucky"));
        }
        tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
        Ok(Square {
            n: t.args.n,
            square: u64::from(t.args.n) * u64::from(t.args.n),
        })
    })
    .expect("register");
    let keep = EnqueueOptions::new().retention(Duration::from_secs(60));
    let seven = client
        .enqueue(
            &Job {
                n: 7,
                sleep_ms: 300,
            },
            keep.clone(),
        )
        .await
        .expect("enqueue");
    let unlucky = client
        .enqueue(&Job { n: 13, sleep_ms: 0 }, keep)
        .await
        .expect("enqueue");
    let forgotten = client
        .enqueue(&Job { n: 2, sleep_ms: 0 }, EnqueueOptions::new())
        .await
        .expect("enqueue");
    let server = Server::new(b.clone(), mux, fast_config())
        .expect("server")
        .start()
        .await
        .expect("start");

    let got: Square = client
        .wait(&seven.queue, &seven.id, Duration::from_secs(20))
        .await
        .expect("result");
    assert_eq!(got, Square { n: 7, square: 49 });
    assert_eq!(
        client
            .result::<Square>(&seven.queue, &seven.id)
            .await
            .expect("read again"),
        Some(Square { n: 7, square: 49 })
    );
    match client
        .wait::<Square>(&unlucky.queue, &unlucky.id, Duration::from_secs(20))
        .await
    {
        Err(BrokerError::TaskFailed { error, .. }) => assert_eq!(error, "unlucky"),
        other => panic!("expected the failure, got {other:?}"),
    }
    // Without a retention nothing is kept: once the task ran, the wait says so.
    match client
        .wait::<Square>(&forgotten.queue, &forgotten.id, Duration::from_secs(20))
        .await
    {
        Err(BrokerError::TaskNotFound { .. }) => {}
        other => panic!("expected not found, got {other:?}"),
    }
    server.shutdown().await;
}
