//! Every capability at once, for code that wants a whole broker.

use crate::{Consume, Coordinate, Enqueue, Inspect, Maintain, ManageSchedules, Schedules};

/// Everything the worker runtime and the scheduler need; implemented for every type that has
/// all the capabilities.
pub trait Broker:
    Enqueue + Consume + Maintain + Coordinate + Inspect + Schedules + ManageSchedules + Clone + 'static
{
}

impl<T> Broker for T where
    T: Enqueue
        + Consume
        + Maintain
        + Coordinate
        + Inspect
        + Schedules
        + ManageSchedules
        + Clone
        + 'static
{
}
