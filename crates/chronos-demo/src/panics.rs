//! Handler panics are part of the show: the first few with their message (the task is
//! retried; a backtrace would bury the progress lines), then only a count in the progress line.

use std::sync::atomic::{AtomicU64, Ordering};

/// How the payment handler's deliberate panics start: the panic hook condenses these only.
pub(crate) const DELIBERATE_PANIC: &str = "card processor returned garbage";

/// Handler panics whose message is printed; the rest are only counted in the progress line.
const PANICS_SHOWN: u64 = 3;

/// The line (if any) for the `n`-th handler panic: the first few with their message, then one
/// saying the rest are counted, then silence (at 300 tasks/s the demo panics about three
/// times a second: a line each would drown the progress lines).
fn panic_line(n: u64, message: &str) -> Option<String> {
    let message = chronos_admin::printable(message);
    match n {
        n if n <= PANICS_SHOWN => Some(format!(
            "(demo) handler panic #{n}, caught and retried: {message}"
        )),
        n if n == PANICS_SHOWN + 1 => Some(format!(
            "(demo) handler panic #{n}: further panics are counted in the progress line (\"panics\")"
        )),
        _ => None,
    }
}

/// Handler panics so far (counted by the panic hook, shown in the progress line).
pub(crate) static PANICS: AtomicU64 = AtomicU64::new(0);

/// Installs the panic hook that prints and counts handler panics.
pub(crate) fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        // Any other panic is a bug, and always shown in full.
        if !message.starts_with(DELIBERATE_PANIC) {
            let at = info
                .location()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            eprintln!(
                "(demo) unexpected panic{at}: {}",
                chronos_admin::printable(&message)
            );
            return;
        }
        let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(line) = panic_line(n, &message) {
            eprintln!("{line}");
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_panics_get_a_line_the_rest_are_counted() {
        let lines: Vec<String> = (1..=75).filter_map(|n| panic_line(n, "boom")).collect();
        assert_eq!(lines.len(), PANICS_SHOWN as usize + 1, "{lines:?}");
        assert!(lines[0].contains("#1") && lines[0].contains("boom"));
        assert!(lines
            .last()
            .is_some_and(|l| l.contains("counted in the progress line")));
        assert_eq!(
            panic_line(2, "evil\x1b[2J")
                .as_deref()
                .map(|l| l.contains('\x1b')),
            Some(false)
        );
    }
}
