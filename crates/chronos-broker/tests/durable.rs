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

/// `redis-cli -p <port> info <section>`.
fn info(port: u16, section: &str) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", section])
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fault behind a durable enqueue acknowledged and then lost in a Sentinel failover: the
/// connection breaks after the script wrote the task and while its `WAIT` blocks, and the client
/// re-sends the `WAIT` on a new connection to another server (the promoted replica, here a
/// second primary that never had the task, with a replica of its own in sync). That `WAIT`
/// counts the new server's replicas for writes it never saw: the enqueue must not be
/// acknowledged on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_resent_to_another_server_after_a_reconnect_does_not_acknowledge() {
    let old = chronos_testkit::RedisServer::start().expect("old primary");
    let new = chronos_testkit::RedisServer::start().expect("new primary");
    let new_port = new.port().to_string();
    let _replica =
        chronos_testkit::RedisServer::start_with(&["--replicaof", "127.0.0.1", &new_port])
            .expect("replica of the new primary");
    chronos_testkit::eventually(Duration::from_secs(10), "replica in sync", || async {
        info(new.port(), "replication").contains("state=online")
    })
    .await;
    let addr = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let proxy = chronos_testkit::TcpProxy::start(addr(old.port()))
        .await
        .expect("proxy");
    let broker = RedisBroker::builder(proxy.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let client = Client::new(broker.clone());

    // The old primary has no replica: its WAIT blocks for the whole wait.
    let enqueue = tokio::spawn(async move {
        client
            .enqueue(
                &email(1),
                EnqueueOptions::new()
                    .task_id("moved")
                    .durable(1, Duration::from_secs(3)),
            )
            .await
    });
    chronos_testkit::eventually(Duration::from_secs(5), "WAIT blocked", || async {
        info(old.port(), "clients").contains("blocked_clients:1")
    })
    .await;
    proxy.retarget(addr(new.port()));
    proxy.cut();
    let answer = enqueue.await.expect("join");
    let q = QueueName::new("default").expect("queue");
    let on_new = broker
        .task(&q, "moved")
        .await
        .expect("lookup on the new server");
    assert!(
        on_new.is_none(),
        "the task was written on the old server only"
    );
    match answer {
        Err(BrokerError::NotReplicated { acked: 0, .. }) => {}
        other => panic!("a WAIT answered by another server counted: {other:?}"),
    }
}
