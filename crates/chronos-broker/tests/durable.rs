//! Durable enqueue (`EnqueueOptions::durable`): the acknowledgement waits for replicas (Redis
//! `WAIT` on the connection that wrote), on a Sentinel deployment and on a cluster, with the
//! replica frozen on purpose to see the typed error; the cost is printed, not asserted.

mod common;

use std::time::{Duration, Instant};

use chronos_broker::{BrokerError, Client, EnqueueOptions, Inspect, QueueName, RedisBroker};
use chronos_testkit::{RedisCluster, RedisSentinel, ReplicationCut};
use common::email;

/// Mean time per enqueue of `n` sequential enqueues with `opts`.
async fn per_enqueue(client: &Client, n: u32, opts: &EnqueueOptions) -> Duration {
    let start = Instant::now();
    for i in 0..n {
        client
            .enqueue(&email(i), opts.clone())
            .await
            .expect("enqueue");
    }
    start.elapsed() / n
}

/// Freezes the replica and checks the typed error, that the task is on the primary anyway, and
/// that durable enqueues succeed again once the replica is back.
async fn replica_frozen(broker: &RedisBroker, primary: u16, replica: u16, queue: &str) {
    let client = Client::new(broker.clone());
    let cut = ReplicationCut::start(primary, &[replica]).expect("freeze the replica");
    let opts = EnqueueOptions::new()
        .queue(queue)
        .task_id("frozen")
        .durable(1, Duration::from_millis(200));
    let start = Instant::now();
    let err = client
        .enqueue(&email(1), opts.clone())
        .await
        .expect_err("no replica could acknowledge");
    let waited = start.elapsed();
    match err {
        BrokerError::NotReplicated {
            ref id,
            acked,
            wanted,
            ..
        } => assert_eq!((id.as_str(), acked, wanted), ("frozen", 0, 1), "{err}"),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    let q = QueueName::new(queue).expect("queue");
    assert!(
        broker.task(&q, "frozen").await.expect("lookup").is_some(),
        "the task is enqueued on the primary all the same"
    );
    drop(cut);
    // The thawed replica reconnects (within a second) and catches up: the same call, retried
    // with the same id, writes nothing twice and now succeeds.
    chronos_testkit::eventually(Duration::from_secs(10), "replica back", || async {
        client.enqueue(&email(1), opts.clone()).await.is_ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_enqueue_waits_for_the_sentinel_replica() {
    let fixture = RedisSentinel::start().expect("sentinel fixture");
    let broker = RedisBroker::builder(fixture.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect through the sentinels");
    let client = Client::new(broker.clone());

    let bad = client
        .enqueue(
            &email(0),
            EnqueueOptions::new().durable(0, Duration::from_secs(1)),
        )
        .await;
    assert!(matches!(bad, Err(BrokerError::InvalidOption(_))), "{bad:?}");
    let too_many = client
        .enqueue(
            &email(0),
            EnqueueOptions::new().durable(2, Duration::from_millis(100)),
        )
        .await;
    assert!(
        matches!(
            too_many,
            Err(BrokerError::NotReplicated {
                acked: 1,
                wanted: 2,
                ..
            })
        ),
        "{too_many:?}"
    );

    let n = 300;
    let plain = per_enqueue(&client, n, &EnqueueOptions::new()).await;
    let durable = per_enqueue(
        &client,
        n,
        &EnqueueOptions::new().durable(1, Duration::from_secs(1)),
    )
    .await;
    eprintln!(
        "[durable/sentinel] {n} sequential enqueues: plain {plain:?} each, durable(1 replica) \
         {durable:?} each"
    );

    let primary = fixture.primary().expect("primary");
    let replicas = fixture.replicas().expect("replicas");
    assert_eq!(replicas.len(), 1);
    replica_frozen(&broker, primary, replicas[0], "default").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_enqueue_on_a_cluster_waits_on_the_node_of_the_queue() {
    let fixture = RedisCluster::with_replicas().expect("cluster with replicas");
    let broker = RedisBroker::builder(fixture.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect cluster");
    let client = Client::new(broker.clone());
    let queue = "orders";
    let opts = EnqueueOptions::new()
        .queue(queue)
        .durable(1, Duration::from_secs(1));
    let n = 300;
    let plain = per_enqueue(&client, n, &EnqueueOptions::new().queue(queue)).await;
    let durable = per_enqueue(&client, n, &opts).await;
    eprintln!(
        "[durable/cluster] {n} sequential enqueues: plain {plain:?} each, durable(1 replica) \
         {durable:?} each"
    );
    // One queue on each primary, and only the replica of that queue's own primary frozen: a
    // WAIT sent to any other node would find its replica and pass.
    let mut primaries = Vec::new();
    for i in 0..100 {
        let q = format!("q{i}");
        let p = fixture.primary_for(&q).expect("primary");
        if !primaries.iter().any(|(port, _)| *port == p) {
            primaries.push((p, q));
        }
    }
    assert_eq!(primaries.len(), 3);
    for (primary, q) in primaries {
        let replicas = fixture.replicas_of(primary).expect("replicas");
        assert_eq!(replicas.len(), 1);
        replica_frozen(&broker, primary, replicas[0], &q).await;
    }
}
