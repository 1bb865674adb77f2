//! What becomes of a task whose retries are exhausted.

use serde::{Deserialize, Serialize};

/// What happens to a task whose retries are exhausted (or that fails with a skip-retry error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeadLetter {
    /// Keep it in the queue's archive for inspection and manual re-run (the default).
    #[default]
    Archive,
    /// Drop it. The server's dead-letter hook still sees it.
    Discard,
}
