//! The log lines of the commands that serve (`dash`, `ingest`): every console action and
//! login, refused requests, what the libraries log. On stderr, filtered by `RUST_LOG` (default
//! `info`), as text or as one JSON object per line (`--log-format json`), which log
//! collectors read without a parser of their own.

use std::io::IsTerminal as _;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One line of text per event: time, level, target, message, fields.
    #[default]
    Text,
    /// One JSON object per event (`timestamp`, `level`, `target`, `fields`, `span`s).
    Json,
}

/// Installs the process's log subscriber. A `RUST_LOG` that does not parse falls back to
/// `info` with a warning, rather than logging nothing.
pub(crate) fn install(format: LogFormat) {
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new("info"), Some(format!("RUST_LOG {v:?}: {e}"))),
        },
        _ => (EnvFilter::new("info"), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Another subscriber already set (never in the binary) keeps its place.
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
    };
    if let Some(bad) = bad {
        eprintln!("chronos: warning: {bad}; logging at info");
    }
}
