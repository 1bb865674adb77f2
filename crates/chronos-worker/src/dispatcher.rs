//! Starts buffered tasks as slots free up, choosing the queue by weight (or strict priority).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::WorkerBroker;

use crate::executor;
use crate::runtime::Runtime;

/// Longest wait for the drawn queue before drawing again.
const REDRAW: Duration = Duration::from_millis(100);

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    loop {
        let permit = tokio::select! {
            p = rt.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = rt.stop_fetch.cancelled() => return,
        };
        rt.awaiting_task.store(true, Ordering::Relaxed);
        rt.space.notify_waiters();
        let mut chosen = None;
        let (q, lease, waited) = loop {
            match rt.pop(chosen) {
                Ok(next) => break next,
                Err(wait_for) => chosen = wait_for,
            }
            tokio::select! {
                _ = rt.ready.notified() => {}
                // A backstop: look again even if no wake-up comes, so a drawn queue that was
                // paused or started failing meanwhile is dropped from the draw.
                _ = tokio::time::sleep(REDRAW) => {}
                _ = rt.stop_fetch.cancelled() => return,
            }
        };
        rt.awaiting_task.store(false, Ordering::Relaxed);
        rt.space.notify_waiters();
        let rt2 = rt.clone();
        rt.running.spawn(async move {
            executor::run(&rt2, q, lease, waited).await;
            drop(permit);
            rt2.space.notify_waiters();
        });
    }
}
