//! The operations type: a broker wrapped for operating it. Each module of the crate adds the
//! methods of what it operates (queues, tasks, actions, schedules, ...) in an `impl` block of
//! its own.

use chronos_broker::{Inspect, ManageSchedules, Operate, Schedules};

/// Operations over a broker.
#[derive(Debug, Clone)]
pub struct Admin<B> {
    // Every module of the crate adds methods to Admin in its own impl block.
    pub(crate) broker: B,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + 'static> Admin<B> {
    /// Wraps `broker`.
    pub fn new(broker: B) -> Self {
        Self { broker }
    }

    /// The broker.
    pub fn broker(&self) -> &B {
        &self.broker
    }
}
