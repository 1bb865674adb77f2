//! A broker that forwards every call to a real [`RedisBroker`] and injects chosen faults into
//! the calls that settle a delivery: a start mark held back or failed, an ack that fails while
//! a switch is on. Faults are the ones a failover or a slow network makes; the store is real.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos_broker::fred::error::{Error as RedisError, ErrorKind};
use chronos_broker::*;

/// The switches, shared by clones.
#[derive(Debug, Default)]
pub struct Switches {
    /// Start marks wait this long (ms) before they are sent.
    pub start_delay_ms: AtomicU64,
    /// This many start calls fail with a connection error.
    pub start_failures: AtomicU32,
    /// While set, acks fail with a connection error.
    pub fail_acks: AtomicBool,
    /// Start calls that reached Redis.
    pub starts: AtomicU32,
    /// Ack calls made (failed ones too).
    pub acks: AtomicU32,
    /// `keep_alive` calls made (the heartbeat's and the progress loop's).
    pub progress_reports: AtomicU32,
}

/// Wraps a [`RedisBroker`]; clones share the switches.
#[derive(Debug, Clone)]
pub struct Faulty {
    pub inner: RedisBroker,
    pub switches: Arc<Switches>,
}

impl Faulty {
    pub fn new(inner: RedisBroker) -> Self {
        Self {
            inner,
            switches: Arc::default(),
        }
    }
}

fn cut(what: &str) -> BrokerError {
    let e = RedisError::new(
        ErrorKind::IO,
        format!("injected: connection cut during {what}"),
    );
    BrokerError::Store(StoreError::new(e, true))
}

impl Consume for Faulty {
    // Hand-written: `start`, `settle` and a `fetch` that carries settlements heed the switches;
    // the compiler lists any method left out.
    type Reader = <RedisBroker as Consume>::Reader;

    fn open_reader(&self) -> impl Future<Output = Result<Self::Reader, BrokerError>> + Send {
        self.inner.open_reader()
    }

    fn ensure_queue(&self, q: &QueueName) -> impl Future<Output = Result<(), BrokerError>> + Send {
        self.inner.ensure_queue(q)
    }

    /// A read that carries completions is an ack too: the switches cut it as they cut
    /// `settle`.
    async fn fetch(
        &self,
        r: &mut Self::Reader,
        q: &QueueName,
        c: &str,
        carry: &[Settlement],
        n: usize,
        block: Duration,
    ) -> Result<Fetched, BrokerError> {
        self.ack(carry)?;
        self.inner.fetch(r, q, c, carry, n, block).await
    }

    async fn settle(&self, settlements: &[Settlement]) -> Result<Vec<Settled>, BrokerError> {
        self.ack(settlements)?;
        self.inner.settle(settlements).await
    }

    fn watch(
        &self,
        r: &mut Self::Reader,
        qs: &[QueueName],
        c: &str,
        n: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Option<Vec<(usize, Fetched)>>, BrokerError>> + Send {
        self.inner.watch(r, qs, c, n, block)
    }

    fn close_reader(&self, reader: Self::Reader) -> impl Future<Output = ()> + Send {
        self.inner.close_reader(reader)
    }

    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send {
        self.inner.interrupter(reader)
    }

    async fn start(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> Result<Vec<StartOutcome>, BrokerError> {
        let delay = self.switches.start_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let failing = self
            .switches
            .start_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(cut("start"));
        }
        self.switches.starts.fetch_add(1, Ordering::SeqCst);
        self.inner.start(queue, leases).await
    }
}

impl Faulty {
    /// Counts a call that settles completions, and fails it while acks fail.
    fn ack(&self, settlements: &[Settlement]) -> Result<(), BrokerError> {
        if !settlements
            .iter()
            .any(|s| matches!(s.end, End::Completed { .. }))
        {
            return Ok(());
        }
        self.switches.acks.fetch_add(1, Ordering::SeqCst);
        if self.switches.fail_acks.load(Ordering::SeqCst) {
            return Err(cut("ack"));
        }
        Ok(())
    }

    /// Counts the calls the switches watch among those forwarded as they are.
    fn count(&self, method: &'static str) -> Result<(), BrokerError> {
        if method == "keep_alive" {
            self.switches
                .progress_reports
                .fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Maintain for Faulty {
    chronos_broker::forward!(Maintain => inner, before count);
}

impl Inspect for Faulty {
    chronos_broker::forward!(Inspect => inner);
}

impl SampleQueues for Faulty {
    chronos_broker::forward!(SampleQueues => inner);
}

impl Throttle for Faulty {
    chronos_broker::forward!(Throttle => inner);
}

impl chronos_broker::Settings for Faulty {
    chronos_broker::forward!(Settings => inner);
}

impl Flows for Faulty {
    chronos_broker::forward!(Flows => inner);
}
