//! A queue's event stream (`Events`): off by default and then written by nobody; once on, every
//! transition script appends its typed event in the same call (a worker's here, in order; every
//! kind of transition in transition_events.rs), read back in order, alone or by a consumer group
//! that takes over what a dead consumer left unacked.

mod common;

use std::time::Duration;

use chronos_broker::{
    BrokerError, Client, Completion, Consume, EnqueueOptions, EventCursor, EventKind, Events,
    Lease, Maintain, ProgressUpdate, QueueName, RedisBroker, SettleExt, TaskEvent,
};
use common::{broker, email, take};

fn q() -> QueueName {
    QueueName::new("default").expect("queue")
}

async fn next(b: &RedisBroker, consumer: &str) -> Lease {
    b.forward_due(&q(), 100).await.expect("forward");
    let mut reader = b.open_reader().await.expect("reader");
    take(b, &mut reader, &q(), consumer, 1, Duration::ZERO)
        .await
        .leases
        .pop()
        .expect("a delivery")
}

/// Completes `l` without a retention, as a worker does after its handler succeeded.
async fn done(b: &RedisBroker, l: Lease) {
    b.complete(
        &q(),
        &[Completion {
            lease: l.id,
            retention: None,
            result: None,
        }],
    )
    .await
    .expect("complete");
}

/// Every event the stream keeps, oldest first.
async fn all(b: &RedisBroker) -> Vec<TaskEvent> {
    let mut reader = b.open_event_reader().await.expect("reader");
    b.read_events(&mut reader, &q(), "0-0", 1000, Duration::ZERO)
        .await
        .expect("read")
}

/// The events of task `id`, as (type, kind) pairs.
fn of(events: &[TaskEvent], id: &str) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.task_id == id)
        .map(|e| (e.event.name().to_string(), e.kind.clone()))
        .collect()
}

#[tokio::test]
async fn a_queue_without_its_stream_on_gets_no_events() {
    let b = broker().await;
    let client = Client::new(b.clone());
    client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = next(&b, "w1").await;
    done(&b, l).await;
    assert!(!b.events_on(&q()).await.expect("on?"));
    assert!(matches!(
        b.last_event_id(&q()).await,
        Err(BrokerError::EventsOff { .. })
    ));
    assert!(matches!(
        client.events("default", EventCursor::Oldest).await,
        Err(BrokerError::EventsOff { .. })
    ));
}

#[tokio::test]
async fn every_transition_writes_its_event_in_order() {
    let b = broker().await;
    let client = Client::new(b.clone());
    b.set_events(&q(), true).await.expect("on");
    b.set_events(&q(), true).await.expect("on again keeps it");
    assert!(b.events_on(&q()).await.expect("on?"));
    assert_eq!(b.last_event_id(&q()).await.expect("last"), "0-0");

    // A plain task: enqueued, started, completed.
    let plain = client
        .enqueue(&email(1), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let l = next(&b, "w1").await;
    done(&b, l).await;

    // A task with an id and a lock: a duplicate of it, progress, a retry, a snooze, then a
    // retained completion with a result.
    let opts = EnqueueOptions::new()
        .task_id("t1")
        .unique(Duration::from_secs(60));
    client
        .enqueue(&email(2), opts.clone())
        .await
        .expect("enqueue");
    let dup = client
        .enqueue(
            &email(2),
            EnqueueOptions::new().unique(Duration::from_secs(60)),
        )
        .await;
    assert!(
        matches!(dup, Err(BrokerError::DuplicateTask { .. })),
        "{dup:?}"
    );
    let l = next(&b, "w1").await;
    b.keep_alive(
        &q(),
        "w1",
        std::slice::from_ref(&l.id.msg_id),
        &[ProgressUpdate {
            msg_id: l.id.msg_id.clone(),
            task_id: "t1".into(),
            json: br#"{"percent":50}"#.to_vec(),
        }],
    )
    .await
    .expect("progress");
    assert!(b
        .retry(&l.id, Duration::ZERO, "smtp timeout")
        .await
        .expect("retry"));
    let l = next(&b, "w2").await;
    b.snooze(&l.id, Duration::ZERO, 10).await.expect("snooze");
    let l = next(&b, "w1").await;
    b.complete(
        &q(),
        &[Completion {
            lease: l.id,
            retention: Some(Duration::from_secs(60)),
            result: Some(b"42".to_vec()),
        }],
    )
    .await
    .expect("complete");

    // A dead letter, a cancel and a scheduled task.
    client
        .enqueue(&email(3), EnqueueOptions::new().task_id("t2"))
        .await
        .expect("enqueue");
    let l = next(&b, "w1").await;
    b.dead_letter(&l.id, "bad address", true)
        .await
        .expect("dead");
    client
        .enqueue(&email(4), EnqueueOptions::new().task_id("t3"))
        .await
        .expect("enqueue");
    let l = next(&b, "w1").await;
    b.cancel(&l.id, "customer left").await.expect("cancel");
    let later = client
        .enqueue(
            &email(5),
            EnqueueOptions::new()
                .task_id("t4")
                .process_in(Duration::from_secs(3600)),
        )
        .await
        .expect("enqueue");

    let events = all(&b).await;
    let e = |t: &str| (t.to_string(), "email".to_string());
    assert_eq!(
        of(&events, &plain.id),
        vec![e("enqueued"), e("started"), e("completed")]
    );
    assert_eq!(
        of(&events, "t1"),
        vec![
            e("enqueued"),
            e("started"),
            e("progress"),
            e("retried"),
            e("forwarded"),
            e("started"),
            e("snoozed"),
            e("forwarded"),
            e("started"),
            e("completed"),
        ]
    );
    assert_eq!(
        of(&events, "t2"),
        vec![e("enqueued"), e("started"), e("dead")]
    );
    assert_eq!(
        of(&events, "t3"),
        vec![e("enqueued"), e("started"), e("cancelled")]
    );
    let t1: Vec<&EventKind> = events
        .iter()
        .filter(|e| e.task_id == "t1")
        .map(|e| &e.event)
        .collect();
    assert!(matches!(t1[1], EventKind::Started { attempt: 1, worker } if worker == "w1"));
    assert_eq!(
        *t1[2],
        EventKind::Progress {
            value: serde_json::json!({"percent": 50})
        }
    );
    assert!(
        matches!(t1[3], EventKind::Retried { attempt: 1, error, next_at_ms } if error == "smtp timeout" && *next_at_ms > 0)
    );
    assert_eq!(*t1[4], EventKind::Forwarded);
    assert!(matches!(t1[5], EventKind::Started { attempt: 2, worker } if worker == "w2"));
    assert_eq!(*t1[9], EventKind::Completed { result: true });
    let dup_event = events
        .iter()
        .find(|e| matches!(e.event, EventKind::Deduplicated { .. }))
        .expect("a deduplicated event");
    assert_eq!(
        dup_event.event,
        EventKind::Deduplicated {
            holder: "t1".into()
        }
    );
    let scheduled = events
        .iter()
        .find(|e| e.task_id == later.id)
        .expect("the scheduled task's event");
    assert_eq!(
        scheduled.event,
        EventKind::Enqueued {
            run_at_ms: Some(later.run_at_ms)
        }
    );
    assert!(events.iter().any(
        |e| matches!(&e.event, EventKind::DeadLettered { reason } if reason == "bad address")
    ));
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, EventKind::Cancelled { reason } if reason == "customer left")));
    // Ids rise, and the last one is where a new reader starts.
    assert!(events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    let last = events.last().expect("events").id.clone();
    assert_eq!(b.last_event_id(&q()).await.expect("last"), last);

    b.set_events(&q(), false).await.expect("off");
    client
        .enqueue(&email(6), EnqueueOptions::new())
        .await
        .expect("enqueue");
    assert!(
        !b.events_on(&q()).await.expect("on?"),
        "an enqueue did not turn it back on"
    );
}

#[tokio::test]
async fn a_stream_reads_on_from_its_position_and_a_watch_ends_with_its_task() {
    let b = broker().await;
    let client = Client::new(b.clone());
    b.set_events(&q(), true).await.expect("on");
    client
        .enqueue(
            &email(1),
            EnqueueOptions::new()
                .task_id("before")
                .process_in(Duration::from_secs(3600)),
        )
        .await
        .expect("enqueue");
    let mut stream = client
        .events("default", EventCursor::New)
        .await
        .expect("stream");
    let mut watch = client.watch("default", "w").await.expect("watch");
    client
        .enqueue(&email(2), EnqueueOptions::new().task_id("w"))
        .await
        .expect("enqueue");
    let first = stream.next().await.expect("an event").expect("read");
    assert_eq!(
        first.task_id, "w",
        "only events written after the stream was made"
    );
    let position = stream.position().to_string();
    let l = next(&b, "w1").await;
    done(&b, l).await;
    let mut seen = Vec::new();
    while let Some(e) = watch.next().await {
        seen.push(e.expect("read").event.name().to_string());
    }
    assert_eq!(seen, ["enqueued", "started", "completed"]);
    // A new stream made at the first one's position reads what follows it, no more.
    let mut again = client
        .events("default", EventCursor::After(position))
        .await
        .expect("stream");
    let e = again.next().await.expect("event").expect("read");
    assert_eq!((e.task_id.as_str(), e.event.name()), ("w", "started"));
}

#[tokio::test]
async fn a_group_member_takes_over_what_a_dead_one_left_unacked() {
    let b = broker().await;
    let client = Client::new(b.clone());
    b.set_events(&q(), true).await.expect("on");
    let idle = Duration::from_millis(300);
    let mut first = client
        .event_group("default", "relay", "r1", idle)
        .await
        .expect("group");
    for n in 0..4 {
        client
            .enqueue(&email(n), EnqueueOptions::new().task_id(format!("g{n}")))
            .await
            .expect("enqueue");
    }
    // r1 handles two and dies holding the other two, unacked.
    for _ in 0..2 {
        let e = first.next().await.expect("event").expect("read");
        first.ack(&e).await.expect("ack");
    }
    let held = [
        first.next().await.expect("event").expect("read"),
        first.next().await.expect("event").expect("read"),
    ];
    drop(first);
    let mut second = client
        .event_group("default", "relay", "r2", idle)
        .await
        .expect("group");
    let mut taken = Vec::new();
    for _ in 0..2 {
        let e = second.next().await.expect("event").expect("read");
        second.ack(&e).await.expect("ack");
        taken.push(e.task_id);
    }
    assert_eq!(taken, [held[0].task_id.clone(), held[1].task_id.clone()]);
    // r1 back under its name finds nothing of its own left.
    let mut back = client
        .event_group("default", "relay", "r1", Duration::ZERO)
        .await
        .expect("group");
    client
        .enqueue(&email(9), EnqueueOptions::new().task_id("g9"))
        .await
        .expect("enqueue");
    let e = back.next().await.expect("event").expect("read");
    assert_eq!(e.task_id, "g9");
    // A group on a queue whose stream is off is refused.
    b.set_events(&q(), false).await.expect("off");
    assert!(matches!(
        client
            .event_group("default", "relay", "r3", idle)
            .await
            .err(),
        Some(BrokerError::EventsOff { .. })
    ));
}

#[tokio::test]
async fn a_stream_turned_on_by_another_process_gets_this_ones_events() {
    let b = broker().await;
    let client = Client::new(b.clone());
    // This broker has seen the stream off...
    client
        .enqueue(&email(0), EnqueueOptions::new().task_id("seen-off"))
        .await
        .expect("enqueue");
    // ...and another one turns it on.
    let other = common::broker_in(b.keyspace().namespace()).await;
    other.set_events(&q(), true).await.expect("on");
    let mut n = 0;
    chronos_testkit::eventually(
        Duration::from_secs(5),
        "an enqueue of this broker in the stream",
        || {
            n += 1;
            let (client, b) = (client.clone(), b.clone());
            async move {
                let id = format!("after-{n}");
                client
                    .enqueue(&email(n), EnqueueOptions::new().task_id(id.clone()))
                    .await
                    .expect("enqueue");
                all(&b).await.iter().any(|e| e.task_id == id)
            }
        },
    )
    .await;
    // Off is seen at once: the scripts write only while the stream exists.
    other.set_events(&q(), false).await.expect("off");
    client
        .enqueue(&email(99), EnqueueOptions::new().task_id("after-off"))
        .await
        .expect("enqueue");
    assert!(!b.events_on(&q()).await.expect("on?"));
}

#[tokio::test]
async fn a_read_whose_reply_is_lost_is_read_again_from_the_same_place() {
    let rig = common::rig().await;
    rig.direct.set_events(&q(), true).await.expect("on");
    let producer = Client::new(rig.direct.clone());
    let mut stream = Client::new(rig.via.clone())
        .events("default", EventCursor::New)
        .await
        .expect("stream");
    producer
        .enqueue(&email(1), EnqueueOptions::new().task_id("e1"))
        .await
        .expect("enqueue");
    // The stream's first read reaches Redis and takes e1's event; its reply is dropped and the
    // connection cut. The client sends the read again on its new connection, from the same id
    // (fred re-sends it; the stream's own resume after a failed read is the next test's).
    rig.proxy.drop_reply_to("XREAD");
    let mut seen = Vec::new();
    while seen.is_empty() {
        match stream.next().await.expect("a stream never ends") {
            Ok(e) => seen.push(e.task_id),
            Err(e) => eprintln!("read failed once, as it may: {e}"),
        }
    }
    rig.assert_lost(1);
    producer
        .enqueue(&email(2), EnqueueOptions::new().task_id("e2"))
        .await
        .expect("enqueue");
    let next = stream.next().await.expect("event").expect("read");
    seen.push(next.task_id);
    assert_eq!(seen, ["e1", "e2"], "nothing skipped, nothing twice");
}

#[tokio::test]
async fn a_group_without_names_or_gone_is_a_typed_error() {
    let b = broker().await;
    let client = Client::new(b.clone());
    b.set_events(&q(), true).await.expect("on");
    assert!(matches!(
        client
            .event_group("default", "", "r1", Duration::ZERO)
            .await
            .err(),
        Some(BrokerError::InvalidOption(_))
    ));
    let mut reader = b.open_event_reader().await.expect("reader");
    let missing = b
        .read_event_group(&mut reader, &q(), "nobody", "r1", None, 10, Duration::ZERO)
        .await;
    assert!(
        matches!(&missing, Err(BrokerError::InvalidOption(m)) if m.contains("no event group")),
        "{missing:?}"
    );
}

#[tokio::test]
async fn after_a_failed_read_the_stream_goes_on_from_its_last_event() {
    use chronos_broker::fred::interfaces::KeysInterface;
    let b = broker().await;
    let client = Client::new(b.clone());
    b.set_events(&q(), true).await.expect("on");
    let mut stream = client
        .events("default", EventCursor::New)
        .await
        .expect("stream");
    client
        .enqueue(&email(1), EnqueueOptions::new().task_id("e1"))
        .await
        .expect("enqueue");
    assert_eq!(
        stream.next().await.expect("event").expect("read").task_id,
        "e1"
    );
    // The stream's key is made a string: the next read fails (WRONGTYPE), on purpose.
    let key = b.keyspace().queue(&q()).events();
    let redis = b.client().clone();
    let _: i64 = redis.del(&key).await.expect("del");
    let _: () = redis
        .set(&key, "not a stream", None, None, false)
        .await
        .expect("set");
    let failed = stream.next().await.expect("an answer");
    assert!(failed.is_err(), "{failed:?}");
    // Back to a stream, with an event written before the next read: the stream reads it,
    // from after e1, rather than only what comes after its next read.
    let _: i64 = redis.del(&key).await.expect("del");
    b.set_events(&q(), true).await.expect("on");
    client
        .enqueue(&email(2), EnqueueOptions::new().task_id("e2"))
        .await
        .expect("enqueue");
    let next = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("e2 came")
        .expect("event")
        .expect("read");
    assert_eq!(next.task_id, "e2");
}

/// The Redis broker, but the first read of new group events (`>`) is lost after Redis ran it:
/// its answer never comes back (`Hang`: the future waits for ever, so the caller's timeout
/// drops it) or comes back as an error (`Fail`, a connection that broke on the way back).
#[derive(Clone)]
struct LosesRead {
    inner: RedisBroker,
    mode: Loss,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Clone, Copy)]
enum Loss {
    Hang,
    Fail,
}

impl chronos_broker::Enqueue for LosesRead {
    async fn enqueue(
        &self,
        tasks: Vec<chronos_broker::NewTask>,
    ) -> Result<Vec<Result<chronos_broker::TaskInfo, BrokerError>>, BrokerError> {
        self.inner.enqueue(tasks).await
    }
}

impl Events for LosesRead {
    type EventReader = <RedisBroker as Events>::EventReader;

    async fn open_event_reader(&self) -> Result<Self::EventReader, BrokerError> {
        self.inner.open_event_reader().await
    }

    async fn set_events(&self, queue: &QueueName, on: bool) -> Result<(), BrokerError> {
        self.inner.set_events(queue, on).await
    }

    async fn events_on(&self, queue: &QueueName) -> Result<bool, BrokerError> {
        self.inner.events_on(queue).await
    }

    async fn last_event_id(&self, queue: &QueueName) -> Result<String, BrokerError> {
        self.inner.last_event_id(queue).await
    }

    async fn read_events(
        &self,
        reader: &mut Self::EventReader,
        queue: &QueueName,
        after: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        self.inner
            .read_events(reader, queue, after, count, block)
            .await
    }

    async fn create_event_group(&self, queue: &QueueName, group: &str) -> Result<(), BrokerError> {
        self.inner.create_event_group(queue, group).await
    }

    async fn read_event_group(
        &self,
        reader: &mut Self::EventReader,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        pending_after: Option<&str>,
        count: usize,
        block: Duration,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        let read = self
            .inner
            .read_event_group(reader, queue, group, consumer, pending_after, count, block)
            .await?;
        let lose = pending_after.is_none()
            && !read.is_empty()
            && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst);
        match (lose, self.mode) {
            (false, _) => Ok(read),
            (true, Loss::Hang) => std::future::pending().await,
            (true, Loss::Fail) => Err(BrokerError::Store(chronos_broker::StoreError::new(
                "connection closed on the way back",
                true,
            ))),
        }
    }

    async fn claim_events(
        &self,
        queue: &QueueName,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<TaskEvent>, BrokerError> {
        self.inner
            .claim_events(queue, group, consumer, min_idle, count)
            .await
    }

    async fn ack_events(
        &self,
        queue: &QueueName,
        group: &str,
        ids: &[String],
    ) -> Result<u64, BrokerError> {
        self.inner.ack_events(queue, group, ids).await
    }
}

/// A group read whose answer is lost after Redis delivered it loses no event: the next call
/// hands out what it took, once and before anything newer, even with no take-over of idle
/// events. Lost three ways: the `next` future dropped by a timeout while its read blocks in
/// Redis and the events arrive; a read whose answer never comes (dropped by the timeout); a
/// read that fails on the way back.
#[tokio::test]
async fn a_group_read_dropped_or_failed_midway_loses_nothing() {
    for mode in [None, Some(Loss::Hang), Some(Loss::Fail)] {
        let b = broker().await;
        b.set_events(&q(), true).await.expect("on");
        let lossy = LosesRead {
            inner: b.clone(),
            mode: mode.unwrap_or(Loss::Hang),
            armed: Default::default(),
        };
        let client = Client::new(lossy.clone());
        let mut relay = client
            .event_group("default", "relay", "r1", Duration::ZERO)
            .await
            .expect("group");
        let enqueue = |n: u32| {
            let client = client.clone();
            async move {
                client
                    .enqueue(&email(n), EnqueueOptions::new().task_id(format!("x{n}")))
                    .await
                    .expect("enqueue");
            }
        };
        match mode {
            None => {
                // The read blocks in Redis (nothing to read yet) when its future is dropped;
                // the events that come next are delivered to it all the same.
                let idle = tokio::time::timeout(Duration::from_millis(300), relay.next()).await;
                assert!(idle.is_err(), "nothing to read yet");
                for n in 0..3 {
                    enqueue(n).await;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(Loss::Hang) => {
                lossy.armed.store(true, std::sync::atomic::Ordering::SeqCst);
                for n in 0..3 {
                    enqueue(n).await;
                }
                let lost = tokio::time::timeout(Duration::from_millis(500), relay.next()).await;
                assert!(lost.is_err(), "the read's answer never came");
            }
            Some(Loss::Fail) => {
                lossy.armed.store(true, std::sync::atomic::Ordering::SeqCst);
                for n in 0..3 {
                    enqueue(n).await;
                }
                let failed = relay.next().await.expect("an answer");
                assert!(failed.is_err(), "{failed:?}");
            }
        }
        assert!(
            !lossy.armed.load(std::sync::atomic::Ordering::SeqCst),
            "a read was lost"
        );
        enqueue(9).await;
        let mut got = Vec::new();
        while got.len() < 4 {
            let e = tokio::time::timeout(Duration::from_secs(5), relay.next())
                .await
                .unwrap_or_else(|_| panic!("events lost with the read: got only {got:?}"))
                .expect("a stream never ends")
                .expect("read");
            relay.ack(&e).await.expect("ack");
            got.push(e.task_id);
        }
        assert_eq!(got, ["x0", "x1", "x2", "x9"], "each once, in order");
    }
}

/// A start and a heartbeat whose replies are lost are sent again by the client (the scripts
/// are idempotent): each delivery still has one `started` event, and the progress one
/// `progress` event.
#[tokio::test]
async fn a_resent_start_or_heartbeat_writes_its_event_once() {
    let rig = common::rig().await;
    rig.direct.set_events(&q(), true).await.expect("on");
    let producer = Client::new(rig.direct.clone());
    let record = producer
        .enqueue(&email(1), EnqueueOptions::new().task_id("kept"))
        .await
        .expect("enqueue");
    let plain = producer
        .enqueue(&email(2), EnqueueOptions::new())
        .await
        .expect("enqueue");
    let mut reader = rig.via.open_reader().await.expect("reader");
    let f = rig
        .via
        .fetch(&mut reader, &q(), "w", &[], 10, Duration::from_millis(200))
        .await
        .expect("fetch");
    assert_eq!(f.leases.len(), 2);
    let ids: Vec<_> = f.leases.iter().map(|l| l.id.clone()).collect();
    rig.lose_reply_of("start");
    rig.via.start(&q(), &ids).await.expect("start re-sent");
    rig.assert_lost(1);

    let kept = f
        .leases
        .iter()
        .find(|l| l.id.task_id == "kept")
        .expect("the task with a record");
    rig.lose_reply_of("heartbeat");
    rig.via
        .keep_alive(
            &q(),
            "w",
            std::slice::from_ref(&kept.id.msg_id),
            &[ProgressUpdate {
                msg_id: kept.id.msg_id.clone(),
                task_id: "kept".into(),
                json: br#"{"percent":10}"#.to_vec(),
            }],
        )
        .await
        .expect("progress re-sent");
    rig.assert_lost(2);

    let mut events_reader = rig.direct.open_event_reader().await.expect("reader");
    let events = rig
        .direct
        .read_events(&mut events_reader, &q(), "0-0", 1000, Duration::ZERO)
        .await
        .expect("read");
    let names =
        |id: &str| -> Vec<String> { of(&events, id).into_iter().map(|(name, _)| name).collect() };
    assert_eq!(names(&record.id), ["enqueued", "started", "progress"]);
    assert_eq!(names(&plain.id), ["enqueued", "started"]);
}
