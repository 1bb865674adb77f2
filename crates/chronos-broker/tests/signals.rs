//! Idle-cost mechanisms of the Redis broker: the due time a forward pass reports, the pushes
//! that wake a sleeping forwarder or announce a pause, and one blocking read over many queues.

mod common;

use std::time::Duration;

use chronos_broker::{
    Client, Consume, EnqueueOptions, Inspect, Maintain, QueueName, Signal, Signals,
};
use common::{broker, email, until_subscribed};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

async fn next_signal(s: &mut Signals) -> Option<Signal> {
    tokio::time::timeout(Duration::from_secs(2), s.recv())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn forward_pass_tells_when_the_next_task_is_due() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("default");
    let f = b.forward_due_next(&queue, 100).await.expect("forward");
    assert_eq!((f.moved, f.next), (0, None), "empty sets: nothing is next");
    client
        .enqueue(
            &email(1),
            EnqueueOptions::new().process_in(Duration::from_secs(60)),
        )
        .await
        .expect("enqueue");
    let f = b.forward_due_next(&queue, 100).await.expect("forward");
    assert_eq!(f.moved, 0);
    let next = f.next.expect("a task is scheduled");
    assert!(
        next > Duration::from_secs(55) && next <= Duration::from_secs(60),
        "{next:?}"
    );
}

#[tokio::test]
async fn earlier_due_times_and_pauses_are_pushed() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let mut signals = b.signals().await.expect("subscribe").expect("redis pushes");
    until_subscribed(&b, &b.keyspace().signal()).await;
    let late = EnqueueOptions::new().process_in(Duration::from_secs(60));
    client
        .enqueue(&email(1), late.clone())
        .await
        .expect("first");
    match next_signal(&mut signals).await {
        Some(Signal::Due { queue, after }) => {
            assert_eq!(queue, q("default"));
            assert!(after > Duration::from_secs(55), "{after:?}");
        }
        other => panic!("expected a due push, got {other:?}"),
    }
    // Not earlier than what the set holds: no push.
    client.enqueue(&email(2), late).await.expect("later");
    let sooner = EnqueueOptions::new().process_in(Duration::from_secs(1));
    client.enqueue(&email(3), sooner).await.expect("sooner");
    match next_signal(&mut signals).await {
        Some(Signal::Due { after, .. }) => assert!(after <= Duration::from_secs(1), "{after:?}"),
        other => panic!("expected the earlier due push, got {other:?}"),
    }
    b.set_paused(&q("default"), true).await.expect("pause");
    assert_eq!(next_signal(&mut signals).await, Some(Signal::Paused));
}

#[tokio::test]
async fn one_watch_reads_new_tasks_of_any_queue() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queues = [q("w1"), q("w2"), q("w3")];
    for queue in &queues {
        b.ensure_queue(queue).await.expect("register");
    }
    let mut reader = b.open_reader().await.expect("reader");
    let probe = b
        .watch(&mut reader, &[], "c1", 1, Duration::ZERO)
        .await
        .expect("probe");
    assert_eq!(
        probe.map(|v| v.len()),
        Some(0),
        "standalone Redis can watch"
    );
    client
        .enqueue(&email(1), EnqueueOptions::new().queue("w3"))
        .await
        .expect("enqueue");
    let got = b
        .watch(&mut reader, &queues, "c1", 10, Duration::from_millis(500))
        .await
        .expect("watch")
        .expect("supported");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 2, "the index of w3");
    assert_eq!(got[0].1.leases.len(), 1);
    assert_eq!(got[0].1.leases[0].id.queue, q("w3"));
    b.close_reader(reader).await;
}
