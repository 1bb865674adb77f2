//! The worker's capability: fetching deliveries and settling them.

use std::future::Future;
use std::time::Duration;

use crate::{
    BrokerError, Fetched, Interrupt, LeaseId, QueueName, Settled, Settlement, StartOutcome,
};

/// Delivers tasks to workers and settles them: a delivery is read ([`Consume::fetch`]), marked
/// started ([`Consume::start`]) and ended by a [`Settlement`] ([`Consume::settle`], or carried
/// by the next fetch). Eight methods, none with a default body; the per-end calls of earlier
/// releases (`complete`, `retry`, ...) live on as [`SettleExt`](crate::SettleExt), built on
/// `settle` for every store.
pub trait Consume: Send + Sync {
    /// A connection reserved for blocking reads (a blocking read stalls every other command on
    /// its connection, so it never shares one).
    type Reader: Send + 'static;

    /// Opens a reader.
    fn open_reader(&self) -> impl Future<Output = Result<Self::Reader, BrokerError>> + Send;

    /// Closes a reader (waits at most for its current block to end).
    fn close_reader(&self, reader: Self::Reader) -> impl Future<Output = ()> + Send;

    /// Makes sure the queue can be consumed (creates its stream and group when missing).
    fn ensure_queue(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<(), BrokerError>> + Send;

    /// Settles the deliveries `carry` names (as [`Consume::settle`] would), then reads up to
    /// `count` new tasks of `queue` for `consumer`, waiting up to `block` when none is ready
    /// (`Duration::ZERO`: return at once; `count` 0: only settle). The answers to `carry` come
    /// back in [`Fetched::settled`], one per settlement, in order.
    ///
    /// Carrying is how a busy worker settles and reads in one round trip where the store can:
    /// the Redis store acknowledges the bare acks of `queue` ([`Settlement::is_bare_ack`])
    /// inside its read (unless the queue keeps events), and settles every other end carried in its own call first. A store may
    /// then let the queue's processed counters lag a busy consumer a little (see the store's
    /// docs); they are exact once a call takes nothing.
    ///
    /// Each returned lease is held by `consumer` until it is settled or reclaimed, but it is
    /// not an attempt yet: call [`Consume::start`] right before running it. A delivery fetched
    /// and never started (a crash, a lost reply) is re-delivered later without spending an
    /// attempt. A fetch that finds work at once and is re-sent by the client after a lost reply
    /// settles nothing twice and returns the same deliveries again; the reply of a blocking wait
    /// lost on a reconnect leaves its deliveries to the recoverer (no attempt spent,
    /// re-delivered after `recover_min_idle`).
    fn fetch(
        &self,
        reader: &mut Self::Reader,
        queue: &QueueName,
        consumer: &str,
        carry: &[Settlement],
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Fetched, BrokerError>> + Send;

    /// Marks fetched deliveries of one queue as started, in one round trip; one outcome per
    /// lease, in order. Re-sending is harmless (a started delivery stays started).
    fn start(
        &self,
        queue: &QueueName,
        leases: &[LeaseId],
    ) -> impl Future<Output = Result<Vec<StartOutcome>, BrokerError>> + Send;

    /// Settles deliveries, of any queues and any ends, in as few round trips as the store can
    /// (Redis: the completions of one queue in one call per level and per 1000, its requeues in
    /// one call per level, every other end in a call of its own); one answer per settlement, in
    /// order, of the variant of its [`End`](crate::End) ([`Settled`]). Each end keeps the
    /// guarantees its variant states: a stale lease changes nothing and is answered stale, a
    /// settlement sent again after a lost reply or an error takes no effect twice (so after an
    /// error, which may leave some settled and some not, sending them all again is the way
    /// on), and only the ends that say so count an attempt or release a lock.
    ///
    /// A store that settles a batch with one count (Redis acknowledges many completions, or
    /// requeues many deliveries, in one command that answers how many) answers that many of the
    /// batch settled, in order, and the rest stale: the number is exact, which ones were stale
    /// is not. A store answers [`BrokerError::Unsupported`] for an end it does not know ([`End`](crate::End) is
    /// non-exhaustive).
    fn settle(
        &self,
        settlements: &[Settlement],
    ) -> impl Future<Output = Result<Vec<Settled>, BrokerError>> + Send;

    /// Waits up to `block` for new tasks of any of `queues` with one blocking read on `reader`,
    /// taking up to `count` per queue, with the guarantees of a blocking [`Consume::fetch`]
    /// (each lease held by `consumer`, not an attempt yet; a reply lost on a reconnect leaves
    /// its deliveries to the recoverer, unspent). Returns `(index into queues, fetched)` for
    /// each queue that had something. An empty `queues` returns at once, so a caller can probe
    /// support. None: this store cannot read these queues together (Redis Cluster, where
    /// streams of different slots cannot share a read): block per queue with
    /// [`Consume::fetch`] instead.
    fn watch(
        &self,
        reader: &mut Self::Reader,
        queues: &[QueueName],
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Option<Vec<(usize, Fetched)>>, BrokerError>> + Send;

    /// A handle that ends a blocking read in flight on `reader` early, as a timeout would (so
    /// nothing is taken or stranded); None when the store has none, or when it
    /// refuses this connection the means (Redis: an ACL user without `CLIENT UNBLOCK`). The
    /// worker then reads no queues together ([`Consume::watch`]): each queue blocks on its own
    /// reader, so a task never waits for another queue's block to end.
    fn interrupter(&self, reader: &Self::Reader) -> impl Future<Output = Option<Interrupt>> + Send;
}
