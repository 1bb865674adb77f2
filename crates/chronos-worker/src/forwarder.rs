//! Moves due delayed and retry tasks into their queue's stream.

use std::sync::Arc;

use tracing::warn;

use crate::runtime::{every, Runtime};
use crate::WorkerBroker;

/// Tasks moved per script call; more calls follow at once while a backlog remains.
const LIMIT: usize = 500;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    every(&rt, rt.config.forward_interval, || forward(&rt)).await
}

async fn forward<B: WorkerBroker>(rt: &Runtime<B>) {
    for (queue, _) in &rt.queues {
        // Bounded so one huge backlog cannot starve the other queues of forwarding.
        for _ in 0..20 {
            match rt.broker.forward_due(queue, LIMIT).await {
                Ok(n) if n as usize >= LIMIT => continue,
                Ok(_) => break,
                Err(e) => {
                    warn!(queue = %queue, error = %e, "forward failed");
                    break;
                }
            }
        }
    }
}
