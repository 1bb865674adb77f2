//! The checker: every promise of the run held against the model, one module per concern.
//! Each check is conservative where the model cannot be sure, and says so in its docs; none
//! asserts nothing.

mod books;
mod caps;
mod event_log;
pub(crate) mod facts;
mod liveness;
mod tasks;

pub(crate) use facts::{Books, Facts, KeyInfo, Observed, Record, Violation};
pub(crate) use liveness::BOUND_US;

use crate::gen::Plan;
use crate::model::Model;

/// Every violation the run shows.
pub(crate) fn all(plan: &Plan, model: &Model, obs: &Observed) -> Vec<Violation> {
    let f = Facts::new(plan, model, obs);
    let mut out = Vec::new();
    tasks::check(&f, &mut out);
    caps::check(&f, &mut out);
    liveness::check(&f, &mut out);
    event_log::check(&f, &mut out);
    books::check(&f, &mut out);
    out
}
