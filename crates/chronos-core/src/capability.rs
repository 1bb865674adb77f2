//! The capability traits, one per file: what a broker can do. The worker and the scheduler ask
//! only for the capabilities they use; none has default bodies, so a store or a wrapper states
//! each answer, and forgetting one is a compile error ([`crate::forward!`] writes the plain
//! forwarding ones).

mod broker;
mod consume;
mod coordinate;
mod enqueue;
mod events;
mod flows;
mod inspect;
mod maintain;
mod manage_schedules;
mod operate;
mod results;
mod sample_queues;
mod schedules;
mod settings;
mod tenants;
mod throttle;

pub use broker::Broker;
pub use consume::Consume;
pub use coordinate::Coordinate;
pub use enqueue::Enqueue;
pub use events::Events;
pub use flows::Flows;
pub use inspect::Inspect;
pub use maintain::Maintain;
pub use manage_schedules::ManageSchedules;
pub use operate::Operate;
pub use results::Results;
pub use sample_queues::SampleQueues;
pub use schedules::Schedules;
pub use settings::Settings;
pub use tenants::Tenants;
pub use throttle::Throttle;
