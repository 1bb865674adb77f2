//! The Redis broker as a [`Connect`] broker, so `Client::connect(url)` builds one.

use std::future::Future;

use chronos_core::{BrokerError, Connect};

use crate::RedisBroker;

impl Connect for RedisBroker {
    fn connect(url: String) -> impl Future<Output = Result<Self, BrokerError>> + Send {
        RedisBroker::connect(url)
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        RedisBroker::close(self)
    }
}
