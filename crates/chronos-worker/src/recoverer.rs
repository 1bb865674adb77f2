//! Takes deliveries whose worker stopped heartbeating (crashed, frozen, cut off) and re-queues
//! them, or dead-letters those with no attempt left.

use std::sync::Arc;

use chronos_broker::LeaseId;
use tracing::{info, warn};

use crate::executor::notify_dead;
use crate::runtime::{every, Runtime};
use crate::WorkerBroker;

/// Most deliveries reclaimed per queue per pass (in pages of 100): a server that crashed holding
/// thousands is recovered in a pass or two, not at 100 per interval.
const PER_PASS: usize = 5000;

pub(crate) async fn run<B: WorkerBroker>(rt: Arc<Runtime<B>>) {
    every(&rt, rt.config.recover_interval, || recover(&rt)).await
}

async fn recover<B: WorkerBroker>(rt: &Runtime<B>) {
    for (queue, _) in &rt.queues {
        match rt
            .broker
            .reclaim_idle(queue, rt.config.recover_min_idle, PER_PASS)
            .await
        {
            Ok(r) => {
                if r.requeued > 0 {
                    crate::metrics::recovered(queue.as_str(), r.requeued);
                    info!(queue = %queue, n = r.requeued, "re-queued tasks of a lost worker");
                }
                for dead in r.dead {
                    let id = LeaseId::new(queue.clone(), dead.task_id, String::new());
                    let reason = "worker lost on the last allowed attempt";
                    // Already dead-lettered by the reclaim script: a group member is counted now.
                    if let Ok(env) = &dead.envelope {
                        if let Err(e) = crate::flow::failed(&rt.broker, env, reason).await {
                            warn!(task_id = %id.task_id, error = %e, "could not count a lost group member as failed; its group will not fire");
                        }
                    }
                    notify_dead(rt, &id, dead.envelope.ok(), reason, dead.discarded).await;
                }
            }
            Err(e) => warn!(queue = %queue, error = %e, "recovery failed"),
        }
    }
}
