//! `chronos events ...`: a queue's event stream: turn it on or off, and follow it.

use std::time::Duration;

use chronos_admin::{printable, Admin};
use chronos_broker::{Client, EventCursor, Events as _, QueueName, RedisBroker, TaskEvent};
use clap::Subcommand;

use crate::dates::{datetime, parse_duration};
use crate::out::Out;

/// The `events` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum EventsCmd {
    /// Turns a queue's event stream on: every transition of its tasks is written to it from now
    /// on (the newest 10,000 or so are kept). A name that names no queue is refused as a likely
    /// typo, unless --new.
    On {
        queue: String,
        /// Switch on a queue that has no task yet (its first tasks' events are kept).
        #[arg(long)]
        new: bool,
    },
    /// Turns a queue's event stream off, deleting its events and its consumer groups.
    Off { queue: String },
    /// Prints a queue's events as they are written (Ctrl-C stops).
    Tail {
        queue: String,
        /// Only events of tasks of this kind.
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// Only events of this task.
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// Start with the oldest events the stream keeps instead of new ones.
        #[arg(long)]
        from_start: bool,
        /// Stop after this many events.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Stop after this long (`30s`, `5m`).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        timeout: Option<Duration>,
    },
}

pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: EventsCmd,
) -> anyhow::Result<()> {
    let broker = admin.broker();
    match cmd {
        EventsCmd::On { queue, new } => {
            // Through the admin: a queue name that names no queue is refused, not switched on.
            match admin.set_events(&queue, true).await {
                Err(chronos_admin::AdminError::QueueNotFound(_)) if new => {
                    broker.set_events(&QueueName::new(&queue)?, true).await?
                }
                Err(chronos_admin::AdminError::QueueNotFound(e)) => {
                    anyhow::bail!("{e} (pass --new if the queue has no task yet)")
                }
                r => r?,
            }
            out.done(
                &serde_json::json!({"queue": queue, "events": true}),
                &format!("{queue}: events on"),
            )
        }
        EventsCmd::Off { queue } => {
            admin.set_events(&queue, false).await?;
            out.done(
                &serde_json::json!({"queue": queue, "events": false}),
                &format!("{queue}: events off (its events and groups deleted)"),
            )
        }
        EventsCmd::Tail {
            queue,
            kind,
            task,
            from_start,
            limit,
            timeout,
        } => {
            let from = if from_start {
                EventCursor::Oldest
            } else {
                EventCursor::New
            };
            let mut stream = Client::new(broker.clone()).events(&queue, from).await?;
            let mut shown = 0;
            let tail = async {
                while let Some(event) = stream.next().await {
                    let e = match event {
                        Ok(e) => e,
                        Err(e) => {
                            eprintln!("chronos: reading events: {e} (reading on)");
                            continue;
                        }
                    };
                    if kind.as_ref().is_some_and(|k| *k != e.kind)
                        || task.as_ref().is_some_and(|t| *t != e.task_id)
                    {
                        continue;
                    }
                    if out.json {
                        out.line(&e)?;
                    } else {
                        println!("{}", line(&e));
                    }
                    shown += 1;
                    if limit.is_some_and(|n| shown >= n) {
                        break;
                    }
                }
                anyhow::Ok(())
            };
            match timeout {
                Some(d) => tokio::time::timeout(d, tail).await.unwrap_or(Ok(())),
                None => tail.await,
            }
        }
    }
}

/// One event for people: time, type, task, kind, then what it says.
pub(crate) fn line(e: &TaskEvent) -> String {
    format!(
        "{}  {:<12} {}  {}  {}",
        datetime(e.at_ms),
        e.event.name(),
        printable(&e.task_id),
        printable(&e.kind),
        printable(&e.event.detail(datetime))
    )
    .trim_end()
    .to_string()
}
