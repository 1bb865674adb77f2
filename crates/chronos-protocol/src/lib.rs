//! The Rust-Lua protocol of chronos-rs: the Lua scripts that make every state transition of a
//! task in Redis, and the names and numbers the Rust side and those scripts agree on.
//!
//! This crate is the single place where the protocol is spelled. A field of a task record, a
//! stride of an argument list or a pseudo-level is a Rust constant here (the task state field is [`STATE`], say)
//! and reaches every script as a Lua `local` through [`prologue`], so the two sides cannot
//! drift; this crate's tests fail when a script spells a record field as a literal.
//!
//! It is used by `chronos-broker`, which loads [`sources`] into its Redis client and speaks
//! the argument layouts the scripts document in their headers. It is published so that the
//! broker can be, not as an API of its own: names here change with the scripts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod names;
mod scripts;

pub use names::*;
pub use scripts::{sources, Scripts};
