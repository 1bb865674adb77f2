//! `Client::connect(url)` for a client over Redis. The client type lives in `chronos-core`,
//! which knows no store, so opening one from a URL is this crate's trait; it is implemented for
//! `Client<RedisBroker>` alone, which is how `Client::connect(url)` needs no type annotation.

use std::future::Future;

use crate::{BrokerError, Client, RedisBroker};

/// Opens and closes a [`Client`] over Redis (in `chronos::prelude`).
pub trait Connect: Sized {
    /// Connects a client to `url` with the default namespace.
    fn connect(url: impl Into<String>) -> impl Future<Output = Result<Self, BrokerError>> + Send;

    /// Quits the Redis connection once the replies of commands already sent are in, and does not
    /// reconnect. Every clone of this client, and the [`RedisBroker`] it was built from (with a
    /// server or scheduler running on it), shares that connection: close when all of them are
    /// done. A call made on one of them afterwards fails with [`BrokerError::Store`] (a timeout,
    /// after the broker's 10 s command timeout).
    fn close(self) -> impl Future<Output = ()> + Send;
}

impl Connect for Client<RedisBroker> {
    fn connect(url: impl Into<String>) -> impl Future<Output = Result<Self, BrokerError>> + Send {
        // The URL becomes a `String` first: the caller's `impl Into` need not be `Send`.
        let url: String = url.into();
        async move { Ok(Client::new(RedisBroker::connect(url).await?)) }
    }

    async fn close(self) {
        self.broker().close().await
    }
}
