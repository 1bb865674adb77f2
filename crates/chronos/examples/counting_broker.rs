//! A broker wrapper that counts every call a `Server` makes, per method, and can fail the next
//! call of a chosen method: the shape of a metrics or fault-injection layer. It implements what a
//! `Server` needs (`WorkerBroker` lists it) plus `Enqueue`, so a `Client` can use it too.
//!
//! `chronos::forward!` writes every method of a capability; the traits have no default bodies,
//! so a wrapper that left one out would not compile (before 0.2.0, a forgotten `signals` or
//! `cancel_requested` silently made the server poll and never hear of an operator's cancel).
//!
//! `cargo run -p chronos-rs --example counting_broker` (uses CHRONOS_REDIS_URL, else starts a
//! throwaway redis-server).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronos::fred::error::{Error as RedisError, ErrorKind};
use chronos::prelude::*;
use chronos::{BrokerError, Consume, Enqueue, Maintain, StoreError};
use chronos::{SampleQueues, Throttle};

/// Wraps any broker; clones share the counters.
#[derive(Debug, Clone)]
pub struct Counting<B> {
    inner: B,
    calls: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    fail_next: Arc<Mutex<Option<&'static str>>>,
}

impl<B> Counting<B> {
    /// Wraps `inner` with every counter at zero.
    pub fn new(inner: B) -> Self {
        let (calls, fail_next) = (Arc::default(), Arc::default());
        Self {
            inner,
            calls,
            fail_next,
        }
    }

    /// Calls of `method` so far.
    pub fn calls(&self, method: &str) -> u64 {
        self.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with its count, by name.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        let calls = self.calls.lock().unwrap();
        calls.iter().map(|(m, n)| (*m, *n)).collect()
    }

    /// The next call of `method` fails with a transient (connection) error.
    pub fn fail_next(&self, method: &'static str) {
        *self.fail_next.lock().unwrap() = Some(method);
    }

    fn count(&self, method: &'static str) {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
    }

    fn enter(&self, method: &'static str) -> Result<(), BrokerError> {
        self.count(method);
        let mut fail = self.fail_next.lock().unwrap();
        if *fail != Some(method) {
            return Ok(());
        }
        *fail = None;
        let e = RedisError::new(ErrorKind::IO, format!("injected fault in {method}"));
        Err(BrokerError::Store(StoreError::new(e, true)))
    }
}

// Every capability a server or a client uses, forwarded by the one macro: each call that
// answers a `Result` is counted (and maybe failed) by `enter` first.
impl<B: Consume> Consume for Counting<B> {
    type Reader = B::Reader;
    chronos::forward!(Consume => inner, before enter);
}

impl<B: Maintain> Maintain for Counting<B> {
    chronos::forward!(Maintain => inner, before enter);
}

impl<B: Inspect> Inspect for Counting<B> {
    chronos::forward!(Inspect => inner, before enter);
}

impl<B: SampleQueues> SampleQueues for Counting<B> {
    chronos::forward!(SampleQueues => inner, before enter);
}

impl<B: Throttle> Throttle for Counting<B> {
    chronos::forward!(Throttle => inner, before enter);
}

impl<B: chronos::Settings> chronos::Settings for Counting<B> {
    chronos::forward!(Settings => inner, before enter);
}

impl<B: chronos::Flows> chronos::Flows for Counting<B> {
    chronos::forward!(Flows => inner, before enter);
}

impl<B: Enqueue> Enqueue for Counting<B> {
    chronos::forward!(Enqueue => inner, before enter);
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Ping;

impl TaskArgs for Ping {
    const KIND: &'static str = "ping";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let broker = Counting::new(RedisBroker::connect(chronos_testkit::shared_url()?).await?);
    let mut mux = Mux::new();
    mux.handle(|_: Context, _: Task<Ping>| async { Ok(()) })?;
    let server = Server::new(broker.clone(), mux, ServerConfig::default())?;
    let server = server.start().await?;
    broker.fail_next("settle"); // the first settlement (an ack) fails; the server retries it
    Client::new(broker.clone())
        .enqueue(&Ping, EnqueueOptions::new())
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.shutdown().await;
    for (method, calls) in broker.counts() {
        println!("{method}: {calls} calls");
    }
    Ok(())
}
