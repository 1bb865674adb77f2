//! chronos-rs: a Redis-backed distributed task queue and cron/interval scheduler.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

#[doc(inline)]
pub use chronos_broker::*;
