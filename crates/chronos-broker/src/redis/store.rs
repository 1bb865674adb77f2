//! fred's errors as the broker's: the one place that knows which of them are worth retrying.

use fred::error::{Error, ErrorKind};

use crate::{BrokerError, StoreError};

/// A fred error as a [`BrokerError::Store`], classified once.
pub(crate) fn store(e: Error) -> BrokerError {
    let transient = transient(&e);
    BrokerError::Store(StoreError::new(e, transient))
}

/// Redis unreachable, timed out, busy or failing over: the same call may succeed later. A
/// malformed URL, bad credentials, a refused command or a reply of the wrong shape are not.
fn transient(e: &Error) -> bool {
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Sentinel => true,
        // Server errors that say "try again": loading, failover, busy script, OOM.
        ErrorKind::Unknown => [
            "LOADING",
            "TRYAGAIN",
            "BUSY",
            "MASTERDOWN",
            "CLUSTERDOWN",
            "READONLY",
            "OOM",
        ]
        .iter()
        .any(|p| e.details().starts_with(p)),
        _ => false,
    }
}

/// True when `e` is a Redis error whose message holds `what` (a server error's code, such as
/// `NOGROUP`).
pub(crate) fn says(e: &BrokerError, what: &str) -> bool {
    match e {
        BrokerError::Store(e) => e
            .downcast_ref::<Error>()
            .is_some_and(|e| e.details().contains(what)),
        _ => false,
    }
}
