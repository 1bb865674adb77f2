//! A consumer-group relay of a queue's events that is SIGKILLed mid-stream loses nothing: the
//! relay process (`chronos-test-relay`) writes each event to a file and then acks it, and kills
//! itself with SIGKILL right after writing one event and before acking it. A second relay
//! process takes over what the dead one left unacked; every event of the stream ends up
//! written, the one in flight at the kill twice (at least once, as promised).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use chronos::prelude::*;
use chronos::{Events, QueueName};
use chronos_tests::Work;

fn relay(url: &str, ns: &str, consumer: &str, out: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chronos-test-relay"));
    c.env("CHRONOS_REDIS_URL", url)
        .env("CHRONOS_NS", ns)
        .env("RELAY_CONSUMER", consumer)
        .env("RELAY_OUT", out)
        .env("RELAY_CLAIM_MS", "300")
        .stdout(Stdio::null());
    c
}

/// `event id -> lines naming it` over the relays' files.
fn written(files: &[&std::path::Path]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for f in files {
        for line in std::fs::read_to_string(f).unwrap_or_default().lines() {
            if let Some(id) = line.split(' ').next() {
                *seen.entry(id.to_string()).or_insert(0) += 1;
            }
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_mid_stream_loses_no_event() {
    let url = chronos_testkit::shared_url().expect("redis");
    let ns = chronos_testkit::namespace();
    let broker = RedisBroker::builder(url.clone())
        .namespace(ns.clone())
        .connect()
        .await
        .expect("connect");
    let q = QueueName::new("default").expect("queue");
    broker.set_events(&q, true).await.expect("events on");
    let client = Client::new(broker.clone());
    // The group starts with the events written after it is made: make it before the load.
    client
        .event_group("default", "relay", "setup", Duration::ZERO)
        .await
        .expect("group");
    let dir = tempfile::tempdir().expect("dir");
    let (first_out, second_out) = (dir.path().join("r1"), dir.path().join("r2"));

    let mut first = relay(&url, &ns, "r1", &first_out)
        .env("RELAY_DIE_AFTER", "40")
        .spawn()
        .expect("spawn relay r1");
    for n in 0..100u64 {
        client
            .enqueue(
                &Work { sleep_ms: n },
                EnqueueOptions::new().task_id(format!("e{n}")),
            )
            .await
            .expect("enqueue");
    }
    let status = tokio::task::spawn_blocking(move || first.wait())
        .await
        .expect("join")
        .expect("wait r1");
    assert_eq!(status.signal(), Some(9), "r1 ended by SIGKILL: {status:?}");
    let before = written(&[&first_out]);
    assert_eq!(before.len(), 40, "r1 wrote 40 events before its kill");

    let mut second = relay(&url, &ns, "r2", &second_out)
        .spawn()
        .expect("spawn relay r2");
    let mut reader = broker.open_event_reader().await.expect("reader");
    let stream: BTreeSet<String> = broker
        .read_events(&mut reader, &q, "0-0", 1000, Duration::ZERO)
        .await
        .expect("read")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(stream.len(), 100, "one enqueued event per task");
    chronos_testkit::eventually(
        Duration::from_secs(30),
        "every event of the stream written by a relay",
        || {
            let seen = written(&[&first_out, &second_out]);
            let stream = stream.clone();
            async move { stream.iter().all(|id| seen.contains_key(id)) }
        },
    )
    .await;
    let _ = second.kill();
    let _ = second.wait();
    let seen = written(&[&first_out, &second_out]);
    // The event r1 wrote and never acked went out again from r2; every other once.
    let twice: Vec<&String> = seen
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(id, _)| id)
        .collect();
    let last_of_first = std::fs::read_to_string(&first_out)
        .expect("r1 out")
        .lines()
        .last()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .expect("a line");
    assert_eq!(twice, vec![&last_of_first], "{seen:?}");
    assert!(seen.keys().all(|id| stream.contains(id)));
}
