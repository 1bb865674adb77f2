//! The CLI's text tables and fields. Every cell goes through [`printable`]: task payloads,
//! queue names and errors come from Redis and must not steer the terminal.
//!
//! The demo (`crates/chronos-demo`) compiles this file too (`#[path]`), so its queue table is
//! the one `chronos queue ls` prints, without the operations library carrying presentation.

use chronos_admin::{printable, QueueRow};

/// Left-aligned columns, two spaces apart, headers first. Ends with a newline. Every cell goes through
/// [`printable`], so no cell can move the cursor, end its line or steer the terminal.
pub(crate) fn text_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c).into_owned()).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The queue table of `chronos stats` / `chronos queue ls`, with a totals row (no state) when
/// given.
pub(crate) fn queue_table(rows: &[QueueRow], total: Option<&QueueRow>) -> String {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|q| (q, if q.paused { "paused" } else { "running" }))
        .chain(total.map(|t| (t, "-")))
        .map(|(q, state)| {
            vec![
                q.name.clone(),
                state.into(),
                q.pending.to_string(),
                q.active.to_string(),
                q.scheduled.to_string(),
                q.retry.to_string(),
                q.archived.to_string(),
                q.completed.to_string(),
                q.cancelled.to_string(),
                q.processed.to_string(),
                q.failed.to_string(),
            ]
        })
        .collect();
    text_table(
        &[
            "QUEUE",
            "STATE",
            "PENDING",
            "ACTIVE",
            "SCHEDULED",
            "RETRY",
            "ARCHIVED",
            "COMPLETED",
            "CANCELLED",
            "PROCESSED",
            "FAILED",
        ],
        &table,
    )
}

/// `key  value` lines, keys padded to one width, values made [`printable`].
pub(crate) fn print_fields(fields: &[(&str, String)]) {
    let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in fields {
        println!("{k:<w$}  {}", printable(v));
    }
}

/// Left-aligned columns, two spaces apart, headers first.
pub(crate) fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    print!("{}", text_table(headers, rows));
}

/// `s` cut to `n` characters, an ellipsis marking the cut.
pub(crate) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clipping_marks_the_cut() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
