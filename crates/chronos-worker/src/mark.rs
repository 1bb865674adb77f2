//! A request to mark one delivery started, as the executor sends it and the start loop
//! (starter.rs) batches it. Its own file so that the runtime, which holds the channel these go
//! through, does not depend on the loop that reads them.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use chronos_core::{LeaseId, StartOutcome};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;

/// The waits before a failed unawaited mark is sent again: 100 ms, doubling up to 2 s.
pub(crate) const RESEND: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));

/// One delivery about to start, and where its outcome goes (None: Redis could not be reached).
/// Without a reply channel the loop acts on the outcome itself: `Lost` cancels the attempt, and
/// a mark that could not be sent is sent again until it lands or the attempt ends.
#[derive(Debug)]
pub(crate) struct StartRequest {
    /// The delivery to mark.
    pub(crate) lease: LeaseId,
    /// Where the outcome goes when the requester waits for it.
    pub(crate) reply: Option<oneshot::Sender<Option<StartOutcome>>>,
    /// Set by the executor when the attempt has ended: a mark not sent by then is not needed.
    pub(crate) ended: Option<Arc<AtomicBool>>,
    /// The running attempt's token, cancelled when the mark finds the delivery gone (made
    /// stale while it was being fetched: an edit, a deduplication's replace, a forced queue
    /// delete).
    pub(crate) lost: Option<CancellationToken>,
    /// The waits before this mark is sent again if it fails.
    pub(crate) backoff: Backoff,
}
