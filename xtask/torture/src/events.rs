//! Reads the event streams of the queues that have them on, continuously from the start of
//! the run, so that nothing is lost to the stream's trim or to an operator turning events off
//! (which deletes the stream).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::{Events as _, QueueName, RedisBroker, TaskEvent};
use tokio::task::JoinHandle;

/// What a reader collected.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub(crate) by_queue: HashMap<String, Vec<TaskEvent>>,
}

impl Collected {
    /// The events of task `id` in `queue`, in stream order.
    pub(crate) fn of(&self, queue: &str, id: &str) -> Vec<&TaskEvent> {
        self.by_queue
            .get(queue)
            .map(|v| v.iter().filter(|e| e.task_id == id).collect())
            .unwrap_or_default()
    }
}

/// Readers of `queues`' streams, until `stop` is set (then one last read each).
pub(crate) fn start(
    broker: RedisBroker,
    queues: &[&str],
    stop: Arc<AtomicBool>,
) -> Vec<JoinHandle<(String, Vec<TaskEvent>)>> {
    queues
        .iter()
        .map(|name| {
            let (broker, stop, name) = (broker.clone(), stop.clone(), name.to_string());
            tokio::spawn(async move {
                let events = read(&broker, &name, &stop).await;
                (name, events)
            })
        })
        .collect()
}

async fn read(broker: &RedisBroker, name: &str, stop: &AtomicBool) -> Vec<TaskEvent> {
    let mut out = Vec::new();
    let Ok(queue) = QueueName::new(name) else {
        return out;
    };
    let mut reader = None;
    // Stream ids grow with time, so after a stream was deleted (events off) and made again,
    // reading on after the last id seen misses nothing of the new one.
    let mut after = "0-0".to_string();
    let mut last_round = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            if last_round {
                break;
            }
            last_round = true;
        }
        if reader.is_none() {
            reader = broker.open_event_reader().await.ok();
        }
        let Some(r) = reader.as_mut() else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        match broker
            .read_events(r, &queue, &after, 1_000, Duration::from_millis(100))
            .await
        {
            Ok(batch) => {
                if let Some(last) = batch.last() {
                    after = last.id.clone();
                }
                out.extend(batch);
            }
            Err(_) => {
                // Events off, or Redis away: look again shortly, on a fresh connection.
                reader = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    out
}
