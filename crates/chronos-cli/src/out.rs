//! The output of a command: JSON lines for scripts, text for people.

use std::io::Write;

use chronos_admin::{printable, QueueRow};
use serde::Serialize;

use crate::table::queue_table;

/// Where results go: JSON lines (`--json`) or text for people.
pub(crate) struct Out {
    /// JSON lines instead of tables.
    pub(crate) json: bool,
}

impl Out {
    /// One JSON line on stdout.
    pub(crate) fn line<T: Serialize + ?Sized>(&self, v: &T) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer(&mut stdout, v)?;
        writeln!(stdout)?;
        Ok(())
    }

    /// The JSON line, or the text line with its untrusted parts (ids, names) escaped.
    pub(crate) fn done(&self, json: &serde_json::Value, text: &str) -> anyhow::Result<()> {
        if self.json {
            self.line(json)
        } else {
            println!("{}", printable(text));
            Ok(())
        }
    }

    /// The queue table, without totals.
    pub(crate) fn queues(&self, rows: &[QueueRow]) -> anyhow::Result<()> {
        self.queue_table(rows, None)
    }

    /// The queue table, with a totals row (no state) when given.
    pub(crate) fn queue_table(
        &self,
        rows: &[QueueRow],
        total: Option<&QueueRow>,
    ) -> anyhow::Result<()> {
        if self.json {
            return rows.iter().try_for_each(|r| self.line(r));
        }
        print!("{}", queue_table(rows, total));
        Ok(())
    }
}
