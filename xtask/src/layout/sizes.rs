//! The size rule of `cargo xtask layout` (issue 36): in the crates under `crates/`, no Rust file
//! over [`MAX_FILE_LINES`] lines and no function over [`MAX_FN_LINES`] lines, so that a file
//! stays one room a reader can take in and a function one step they can follow.
//!
//! A file counts its physical lines, as `wc -l` does, its inline tests included (tests that
//! crowd a file go to a `tests.rs` of their own, which is not counted). A function counts from
//! its `fn` line to its closing brace; functions of `#[cfg(test)]` items are left out. `.lua`
//! files are not measured here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::source::{find_all, ident_at, is_ident_char, matching_close, skip_ws};

/// Most lines of a library Rust file.
pub(super) const MAX_FILE_LINES: usize = 800;
/// Most lines of a function of a library crate.
pub(super) const MAX_FN_LINES: usize = 120;

/// Files and functions over the limits when this rule was written (issue 36), as the path from
/// the workspace root, followed by `::<function>` for a function. They are reported but do not
/// fail the check; an entry that is no longer over its limit (split, shortened, renamed) fails
/// it, so this list can only shrink.
pub(super) const KNOWN_LONG: &[&str] = &[
    // Being rewritten with the settlement path (issue 36); left alone here.
    "crates/chronos-broker/src/redis/schedules.rs::fire",
    "crates/chronos-cli/src/queues.rs::run",
    "crates/chronos-cli/src/tasks.rs::run",
    "crates/chronos-dash/src/actions.rs::bulk",
    "crates/chronos-dash/src/metrics.rs::render",
    "crates/chronos-dash/src/pages/queue.rs::page",
    "crates/chronos-dash/src/pages/task.rs::page",
    "crates/chronos-demo/src/main.rs::main",
    "crates/chronos-worker/src/fetcher.rs::run",
    "crates/chronos-worker/src/limiter.rs::round",
];

/// One Rust file of a library crate, measured.
#[derive(Debug)]
pub(super) struct Room {
    /// Its path (from the workspace root, once [`super::check_with`] has placed it).
    pub(super) path: String,
    /// Physical lines.
    pub(super) lines: usize,
    /// Its functions over [`MAX_FN_LINES`]: name and lines.
    pub(super) long_fns: Vec<(String, usize)>,
}

/// The functions of `code` (comments, literals and test items blanked) longer than `limit`
/// lines, with their lengths, in the order they start. A nested function is measured on its
/// own and inside its parent.
pub(super) fn long_functions(code: &[char], limit: usize) -> Vec<(String, usize)> {
    // line_before[i]: the newlines before position i.
    let mut line_before = Vec::with_capacity(code.len() + 1);
    let mut n = 0;
    for &c in code {
        line_before.push(n);
        if c == '\n' {
            n += 1;
        }
    }
    line_before.push(n);
    let mut out = Vec::new();
    for at in find_all(code, "fn") {
        let starts_word = at == 0 || !is_ident_char(code[at - 1]);
        if !starts_word || !code.get(at + 2).is_some_and(|c| c.is_whitespace()) {
            continue;
        }
        let Some(name) = ident_at(code, skip_ws(code, at + 2)) else {
            continue; // `fn(u8) -> u8`, a pointer type
        };
        // The body is the first `{` outside the signature's brackets; a `;` first means none
        // (a trait method without a default, an extern declaration).
        let mut depth = 0usize;
        let mut open = None;
        for (j, &c) in code.iter().enumerate().skip(at) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = matching_close(code, open).min(code.len());
        let lines = line_before[close] - line_before[at] + 1;
        if lines > limit {
            out.push((name, lines));
        }
    }
    out
}

/// The rule's report section and its failures, for `rooms` measured with `known` tolerated.
pub(super) fn check(rooms: &[Room], known: &[&str]) -> (String, Vec<String>) {
    // By name: two functions of one name in one file (methods of two types) are one entry, as
    // long as the longer.
    let mut by_name: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in rooms {
        if r.lines > MAX_FILE_LINES {
            by_name.insert(r.path.clone(), (r.lines, MAX_FILE_LINES));
        }
        for (name, lines) in &r.long_fns {
            let e = by_name
                .entry(format!("{}::{name}", r.path))
                .or_insert((0, MAX_FN_LINES));
            e.0 = e.0.max(*lines);
        }
    }
    let mut over: Vec<(String, usize, usize)> = by_name
        .into_iter()
        .map(|(what, (lines, limit))| (what, lines, limit))
        .collect();
    over.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut text = format!(
        "\nRoom sizes (crates/*/src: files over {MAX_FILE_LINES} lines, functions over \
         {MAX_FN_LINES}):"
    );
    let mut failures = Vec::new();
    if over.is_empty() {
        text.push_str(" none\n");
    } else {
        text.push('\n');
    }
    for (what, lines, limit) in &over {
        let tag = if known.contains(&what.as_str()) {
            "  (known, see KNOWN_LONG)"
        } else {
            failures.push(format!("{what}: {lines} lines (limit {limit})"));
            ""
        };
        let _ = writeln!(text, "  {lines:>5}  {what}{tag}");
    }
    for k in known {
        if !over.iter().any(|(what, _, _)| what == k) {
            failures.push(format!(
                "KNOWN_LONG lists {k} but it is no longer over its limit; remove the entry"
            ));
        }
    }
    (text, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::source::strip;

    #[test]
    fn functions_are_measured_from_fn_to_their_closing_brace() {
        let text = "trait T { fn decl(&self); }\n\
                    fn short() {}\n\
                    pub(crate) async fn long(\n    a: [u8; 2],\n) -> u8 {\n    let s = \"}\";\n    // }\n    1\n}\n\
                    type F = fn(u8) -> u8;\n";
        let code = strip(text);
        assert_eq!(
            long_functions(&code, 0),
            [("short".into(), 1), ("long".into(), 7)]
        );
        assert_eq!(long_functions(&code, 6), [("long".to_string(), 7)]);
        assert!(long_functions(&code, 7).is_empty());
    }

    #[test]
    fn known_entries_are_tolerated_until_they_are_stale() {
        let rooms = [Room {
            path: "crates/a/src/lib.rs".into(),
            lines: MAX_FILE_LINES + 1,
            long_fns: vec![("big".into(), MAX_FN_LINES + 1)],
        }];
        let (_, strict) = check(&rooms, &[]);
        assert_eq!(strict.len(), 2, "{strict:?}");
        let known = ["crates/a/src/lib.rs", "crates/a/src/lib.rs::big"];
        let (text, none) = check(&rooms, &known);
        assert!(none.is_empty(), "{none:?}");
        assert!(text.contains("known"), "{text}");
        let (_, stale) = check(&[], &known);
        assert_eq!(stale.len(), 2, "{stale:?}");
    }
}
