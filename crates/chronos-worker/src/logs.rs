//! A task's own log lines, kept with the attempt that wrote them: [`crate::Context::log`], and
//! the `tracing` events a handler emits when the application installs [`LogCapture`]. Each
//! attempt collects into its own capped buffer, which the worker hands to the script that
//! settles the attempt (one row of the task's attempt history, so the lines live and go with
//! the task's record). A task that succeeds without a retention keeps no record, so its lines
//! are dropped with it.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context as LayerContext;
use tracing_subscriber::Layer;

/// Rewrites an attempt's log text before it is written (to hide secrets, tokens, addresses).
pub type RedactFn = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// What is kept of each attempt's own log lines ([`crate::ServerConfig::task_logs`]).
#[derive(Clone)]
pub struct TaskLogs {
    /// Lines kept per attempt; later ones are counted, not kept (default 200).
    pub max_lines: usize,
    /// Bytes kept per attempt, lines included whole or not at all (default 16 KiB).
    pub max_bytes: usize,
    /// Applied to the attempt's text before it is written (default none).
    pub redact: Option<RedactFn>,
}

impl Default for TaskLogs {
    fn default() -> Self {
        Self {
            max_lines: 200,
            max_bytes: 16 * 1024,
            redact: None,
        }
    }
}

impl TaskLogs {
    /// These limits with `redact` applied before writing.
    pub fn redact(mut self, redact: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.redact = Some(Arc::new(redact));
        self
    }
}

impl fmt::Debug for TaskLogs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLogs")
            .field("max_lines", &self.max_lines)
            .field("max_bytes", &self.max_bytes)
            .field("redact", &self.redact.is_some())
            .finish()
    }
}

/// Where the lines of the attempt whose handler runs in this task go.
pub(crate) trait LineSink: Send + Sync {
    /// Adds one line (see [`Buffer::push`]).
    fn push_line(&self, level: &str, text: &str);
}

impl LineSink for Buffer {
    fn push_line(&self, level: &str, text: &str) {
        self.push(level, text);
    }
}

tokio::task_local! {
    /// The sink of the attempt whose handler runs in this task.
    static ATTEMPT_LOG: Arc<dyn LineSink>;
}

/// One attempt's lines, capped.
#[derive(Debug)]
pub(crate) struct Buffer {
    started: Instant,
    max_lines: usize,
    max_bytes: usize,
    inner: Mutex<Lines>,
}

#[derive(Debug, Default)]
struct Lines {
    text: String,
    kept: usize,
    dropped: u64,
}

impl Buffer {
    pub(crate) fn new(limits: &TaskLogs) -> Self {
        Self {
            started: Instant::now(),
            max_lines: limits.max_lines,
            max_bytes: limits.max_bytes,
            inner: Mutex::new(Lines::default()),
        }
    }

    /// Adds one line, `+<ms since the attempt began> <level> <text>`, or counts it as dropped
    /// once a cap is reached.
    pub(crate) fn push(&self, level: &str, text: &str) {
        let ms = self.started.elapsed().as_millis();
        let line = format!("+{ms}ms {level} {}", text.replace('\n', " "));
        // A poisoned lock only means a panic elsewhere while holding it; the lines are intact.
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if l.kept >= self.max_lines || l.text.len() + line.len() + 1 > self.max_bytes {
            l.dropped += 1;
            return;
        }
        if !l.text.is_empty() {
            l.text.push('\n');
        }
        l.text.push_str(&line);
        l.kept += 1;
    }

    /// The attempt's text (redacted), with a last line that counts the lines dropped; None when
    /// nothing was logged.
    pub(crate) fn take(&self, redact: Option<&RedactFn>) -> Option<String> {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut text = std::mem::take(&mut l.text);
        if l.dropped > 0 {
            if !text.is_empty() {
                text.push('\n');
            }
            let _ = write!(text, "... {} more lines not kept", l.dropped);
        }
        l.kept = 0;
        l.dropped = 0;
        if text.is_empty() {
            return None;
        }
        Some(match redact {
            Some(r) => r(&text),
            None => text,
        })
    }
}

/// Runs `f` (an attempt's handler) with `sink` as the place its log lines go.
pub(crate) async fn scope<F: std::future::Future>(sink: Arc<dyn LineSink>, f: F) -> F::Output {
    ATTEMPT_LOG.scope(sink, f).await
}

/// A `tracing` layer that keeps, with each task's attempt, the events its handler emits at
/// `level` or above (with their fields), as [`crate::Context::log`] does: the lines are capped
/// per attempt ([`TaskLogs`]), redacted, and written with the attempt's row of the task's
/// history, so `chronos task logs`, the console and `TaskRecord::attempts` show them. Install
/// it beside your own layers:
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
/// let subscriber = tracing_subscriber::registry()
///     .with(chronos_worker::LogCapture::new(tracing::Level::INFO));
/// # drop(subscriber);
/// ```
///
/// An event counts when it is emitted from the handler's own task (the future the handler
/// returned): work the handler spawns onto other tasks is not its attempt's.
#[derive(Debug, Clone, Copy)]
pub struct LogCapture {
    level: Level,
}

impl LogCapture {
    /// Keeps the events at `level` or more severe.
    pub fn new(level: Level) -> Self {
        Self { level }
    }
}

impl<S: Subscriber> Layer<S> for LogCapture {
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
        let meta = event.metadata();
        // `Level` orders by verbosity: TRACE is the greatest.
        if *meta.level() > self.level {
            return;
        }
        let _ = ATTEMPT_LOG.try_with(|b| {
            let mut line = Line::default();
            event.record(&mut line);
            b.push_line(meta.level().as_str(), &line.finish(meta.target()));
        });
    }
}

/// An event's message and fields as one line.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Line {
    fn finish(self, target: &str) -> String {
        format!("{target}: {}{}", self.message, self.fields)
    }
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_stop_at_either_cap_and_say_how_many_were_dropped() {
        let b = Buffer::new(&TaskLogs {
            max_lines: 3,
            ..TaskLogs::default()
        });
        for i in 0..5 {
            b.push("INFO", &format!("line {i}\nwith a break"));
        }
        let text = b.take(None).expect("text");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].ends_with("INFO line 0 with a break"), "{text}");
        assert_eq!(lines[3], "... 2 more lines not kept");
        assert_eq!(b.take(None), None, "taken once");

        let b = Buffer::new(&TaskLogs {
            max_bytes: 40,
            ..TaskLogs::default()
        });
        b.push("WARN", "short");
        b.push("WARN", &"x".repeat(100));
        let text = b.take(None).expect("text");
        assert!(text.lines().next().unwrap_or("").ends_with("WARN short"));
        assert!(text.ends_with("... 1 more lines not kept"), "{text}");
    }

    #[test]
    fn the_redaction_sees_the_whole_text() {
        let limits = TaskLogs::default().redact(|s| s.replace("secret-token", "[redacted]"));
        let b = Buffer::new(&limits);
        b.push("INFO", "calling with secret-token");
        let text = b.take(limits.redact.as_ref()).expect("text");
        assert!(text.ends_with("calling with [redacted]"), "{text}");
    }

    #[tokio::test]
    async fn the_layer_keeps_its_tasks_events_at_its_level_only() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(LogCapture::new(Level::INFO));
        let _guard = tracing::subscriber::set_default(subscriber);
        let b = Arc::new(Buffer::new(&TaskLogs::default()));
        tracing::info!("outside any attempt");
        scope(b.clone() as Arc<dyn LineSink>, async {
            tracing::info!(rows = 3, "imported");
            tracing::debug!("too verbose");
            tracing::warn!(target: "billing", "card declined");
        })
        .await;
        let text = b.take(None).expect("text");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("INFO") && lines[0].contains("imported rows=3"),
            "{text}"
        );
        assert!(lines[1].contains("WARN billing: card declined"), "{text}");
    }
}
