//! Untrusted text made safe for a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character that could steer a terminal written as an escape, for text
/// output (tables, fields, messages) of strings that come from tasks, Redis or the command line.
///
/// Guarantees: the answer holds no C0 control character (U+0000..U+001F, tabs and line breaks
/// included), no DEL (U+007F), no C1 control (U+0080..U+009F, where U+009B starts an escape
/// sequence on many terminals) and no bidirectional override or isolate (U+202A..U+202E,
/// U+2066..U+2069, which reorder what is shown). Each is written as `\u{XX}` (`\t`, `\n`, `\r`
/// as themselves, escaped); a backslash stays a single backslash. Text without any of these
/// is returned borrowed, unchanged. JSON output needs no such step: serde_json escapes C0
/// controls, and a JSON consumer does not interpret the rest.
///
/// ```
/// assert_eq!(chronos_admin::printable("ok\x1b[2J"), "ok\\u{1b}[2J");
/// assert_eq!(chronos_admin::printable("plain"), "plain");
/// ```
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] for multi-line text (a task's log lines): the same guarantees, except that a
/// line break (`\n`, or `\r\n`, written as `\n`) stays a line break, so each line prints on
/// its own. A lone `\r`, which would let a line overwrite the one shown before it, is still
/// escaped, as is every other control character.
///
/// ```
/// assert_eq!(chronos_admin::printable_lines("one\ntwo\r\n\x1b[2J"), "one\ntwo\n\\u{1b}[2J");
/// ```
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && unsafe_char(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split_inclusive('\n') {
        let (body, ends) = match line.strip_suffix('\n') {
            Some(b) => (b.strip_suffix('\r').unwrap_or(b), true),
            None => (line, false),
        };
        out.push_str(&printable(body));
        if ends {
            out.push('\n');
        }
    }
    Cow::Owned(out)
}

fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::{printable, printable_lines};

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("a\x1b]0;owned\x07b"), "a\\u{1b}]0;owned\\u{7}b");
        assert_eq!(printable("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(printable("line\nbreak\ttab"), "line\\nbreak\\ttab");
        assert_eq!(printable("rtl\u{202e}txt"), "rtl\\u{202e}txt");
        assert_eq!(printable("del\x7f"), "del\\u{7f}");
        assert_eq!(printable("émoji ✓ email:send"), "émoji ✓ email:send");
    }

    #[test]
    fn line_breaks_stay_and_every_other_control_is_escaped() {
        assert_eq!(printable_lines("a\nb\n"), "a\nb\n");
        assert_eq!(printable_lines("a\r\nb"), "a\nb");
        assert_eq!(printable_lines("a\rb\tc\x1b[2J\n"), "a\\rb\\tc\\u{1b}[2J\n");
        assert_eq!(printable_lines("rtl\u{202e}\nx"), "rtl\\u{202e}\nx");
    }
}
