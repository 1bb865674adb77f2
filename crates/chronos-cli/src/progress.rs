//! The progress line of a bulk action.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use chronos_admin::BulkStatus;

/// The progress of a bulk action on stderr, so stdout keeps only the result (a JSON line with
/// `--json`). On a terminal one line rewritten in place (at most ten times a second); otherwise
/// a line at the first step and then at most every two seconds, for logs.
pub(crate) struct Progress {
    verb: &'static str,
    expected: Option<u64>,
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    /// A progress display for `verb`, of about `expected` tasks when known.
    pub(crate) fn new(verb: &'static str, expected: Option<u64>) -> Self {
        Self {
            verb,
            expected,
            tty: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    /// Shows `s`, unless the last line is too recent.
    pub(crate) fn show(&mut self, s: &BulkStatus) {
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(2)
        };
        if !s.running() || self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let of = match self.expected {
            Some(n) => format!(" of about {n}"),
            None => String::new(),
        };
        let line = format!(
            "{}: {} done{of}, {} matching found, {} read",
            self.verb, s.done, s.matched, s.scanned
        );
        if self.tty {
            eprint!("\r\x1b[K{line} (Ctrl-C stops)");
        } else {
            eprintln!("chronos: {line}");
        }
        self.shown = true;
    }

    /// Ends the rewritten line, if one was shown.
    pub(crate) fn end(&self) {
        if self.tty && self.shown {
            eprintln!();
        }
    }
}
