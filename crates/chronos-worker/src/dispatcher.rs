//! Starts buffered tasks as slots free up, choosing the queue by weight (or strict priority).

use std::sync::Arc;

use chronos_broker::Broker;

use crate::executor;
use crate::runtime::Runtime;

pub(crate) async fn run<B: Broker>(rt: Arc<Runtime<B>>) {
    loop {
        let permit = tokio::select! {
            p = rt.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = rt.stop_fetch.cancelled() => return,
        };
        rt.space.notify_waiters();
        let mut chosen = None;
        let (q, lease) = loop {
            match rt.pop(chosen) {
                Ok(next) => break next,
                Err(wait_for) => chosen = wait_for,
            }
            tokio::select! {
                _ = rt.ready.notified() => {}
                _ = rt.stop_fetch.cancelled() => return,
            }
        };
        rt.space.notify_waiters();
        let rt2 = rt.clone();
        rt.running.spawn(async move {
            executor::run(&rt2, q, lease).await;
            drop(permit);
            rt2.space.notify_waiters();
        });
    }
}
