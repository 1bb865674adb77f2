//! Moves due delayed and retry tasks into their queue's stream.
//!
//! With a broker that pushes signals, it sleeps until the earliest due time of its queues (each
//! forward call tells the next one), woken early by a push when a task gets an earlier due time
//! than its set held, and forwards a queue that holds delayed tasks at least every
//! `safety_interval`; after a reconnect of the subscriber it forwards every queue at once, since
//! a push may have been lost. A queue with nothing delayed waits for a push, and for its turn:
//! one such queue is forwarded per safety interval, so the idle queues of a server cost one call
//! per interval together, however many they are. A busy queue costs at most one call per
//! `forward_interval`, unless a push says sooner. Without signals it polls every queue every
//! `forward_interval`.

use std::sync::Arc;
use std::time::Duration;

use chronos_core::{Forwarded, Signal, Signals};
use tokio::time::Instant;
use tracing::warn;

use crate::loops::{every, Turn};
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// Tasks moved per script call; more calls follow at once while a backlog remains.
const LIMIT: usize = 500;
/// Calls per queue per pass: bounded so one huge backlog cannot starve the other queues.
const ROUNDS: usize = 20;
/// When a queue with nothing delayed is passed over next, unless a push or its turn comes
/// first (both always do: this only keeps the deadline finite).
const IDLE: Duration = Duration::from_secs(24 * 3600);

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    match rt.broker.signals().await {
        Ok(Some(signals)) => {
            if pushed(&rt, signals).await {
                return;
            }
            warn!("the signal subscriber is gone; forwarding by polling");
        }
        Ok(None) => {}
        Err(e) => {
            warn!(error = %e, "could not subscribe to due-time pushes; forwarding by polling")
        }
    }
    every(&rt, rt.config.forward_interval, || forward(&rt)).await
}

/// Polling: every queue, every period.
async fn forward<B: WorkerBroker>(rt: &Runtime<B>) {
    for q in 0..rt.queues.len() {
        forward_one(rt, q).await;
    }
}

/// Forwards what is due in queue `q`; None on an error (logged).
async fn forward_one<B: WorkerBroker>(rt: &Runtime<B>, q: usize) -> Option<Forwarded> {
    let queue = &rt.queues[q].name;
    let mut last = Forwarded::default();
    for _ in 0..ROUNDS {
        match rt.broker.forward_due_next(queue, LIMIT).await {
            Ok(f) if f.moved as usize >= LIMIT => last = f,
            Ok(f) => return Some(f),
            Err(e) => {
                warn!(queue = %queue, error = %e, "forward failed");
                return None;
            }
        }
    }
    // A backlog is left: come back at once.
    Some(Forwarded {
        next: Some(Duration::ZERO),
        ..last
    })
}

/// Sleeps until the earliest due time; true when stopped, false when the subscriber is gone.
async fn pushed<B: WorkerBroker>(rt: &Runtime<B>, mut signals: Signals) -> bool {
    let safety = rt.config.safety_interval;
    // When each queue is due for a pass: all at once first.
    let now = Instant::now();
    let mut due: Vec<Instant> = vec![now; rt.queues.len()];
    // The next turn of a queue with nothing delayed (see the module docs).
    let mut turn = Turn::default();
    let mut next_turn = now + safety;
    loop {
        let wake = due
            .iter()
            .copied()
            .min()
            .unwrap_or(next_turn)
            .min(next_turn);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            s = signals.recv() => {
                match s {
                    Some(Signal::Due { queue, after }) => {
                        if let Some(q) = rt.queue_index(&queue) {
                            due[q] = due[q].min(Instant::now() + after);
                        }
                    }
                    Some(Signal::Resync) => due.fill(Instant::now()),
                    Some(Signal::Paused | Signal::Settings { .. }) => {}
                    None => return false,
                }
                continue;
            }
            _ = rt.stop_maintenance.cancelled() => return true,
        }
        let now = Instant::now();
        if now >= next_turn {
            if let Some(q) = turn.next(due.len()) {
                due[q] = due[q].min(now);
            }
            next_turn = now + safety;
        }
        for (q, at) in due.iter_mut().enumerate() {
            if *at > now {
                continue;
            }
            // Passes of one queue are at least `forward_interval` apart (as when polling), so
            // a set of many scattered due times costs no more than polling did; only a push
            // (a new earliest due time) brings a pass sooner.
            let gap = rt.config.forward_interval.min(safety);
            let next = match forward_one(rt, q).await {
                // Nothing delayed: a push or its turn brings the next pass.
                Some(f) => f.next.map_or(IDLE, |n| n.max(gap).min(safety)),
                // Redis trouble: try again soon, not at the end of the safety interval.
                None => gap,
            };
            *at = Instant::now() + next;
        }
    }
}
