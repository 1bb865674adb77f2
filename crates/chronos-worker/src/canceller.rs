//! Operator cancellation of running tasks: polls the broker for cancel requests on the
//! deliveries this server runs and fires their handlers' `Context` cancellation. Only the
//! handler's signal fires: a handler that ignores it runs on and settles as usual.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::loops::every;
use crate::runtime::Runtime;
use crate::WorkerBroker;

/// How often running deliveries are checked: a cancel is seen well within a second. Costs one
/// small command per queue with running tasks per tick, and nothing while idle.
const POLL: Duration = Duration::from_millis(250);

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    every(&rt, POLL, || poll(&rt)).await
}

async fn poll<B: WorkerBroker>(rt: &Runtime<B>) {
    for (q, slot) in rt.queues.iter().enumerate() {
        let queue = &slot.name;
        let ids = rt.running_ids(q);
        if ids.is_empty() {
            continue;
        }
        match rt.broker.cancel_requested(queue, &ids).await {
            Ok(asked) if !asked.is_empty() => {
                info!(queue = %queue, n = asked.len(), "cancel requested by an operator");
                rt.signal(q, &asked);
            }
            Ok(_) => {}
            Err(e) => warn!(queue = %queue, error = %e, "could not check for cancel requests"),
        }
    }
}
