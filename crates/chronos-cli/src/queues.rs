//! `chronos queue ...`: queue counts, pausing, deleting and history, and the hint a listing
//! of no queue prints; `queue limits` lives in limits.rs.

use chronos_admin::{printable, Admin};
use chronos_broker::{HistorySpan, RedisBroker};
use clap::{Subcommand, ValueEnum};

use crate::dates::{date, datetime};
use crate::limits::{self, LimitsCmd};
use crate::out::Out;
use crate::table::print_table;

/// The `queue` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum QueueCmd {
    /// Every queue with its counts.
    Ls,
    /// One queue's counts and today's history.
    Show { queue: String },
    /// Workers stop fetching from the queue.
    Pause { queue: String },
    /// Workers fetch from the queue again.
    Resume { queue: String },
    /// Lifts a block a handler set (`TaskError::rate_limited`): the queue's own, or rate key
    /// --key's. Tasks already held back keep their due time.
    Unblock {
        queue: String,
        /// The blocked rate key (default: the queue's own block).
        #[arg(long)]
        key: Option<String>,
    },
    /// Deletes the queue (refused while it holds tasks, unless --force).
    Rm {
        queue: String,
        /// Delete its tasks too, in every state.
        #[arg(long)]
        force: bool,
    },
    /// Processed and failed per day (last 90 days) or per minute (last 24 hours).
    History {
        queue: String,
        /// Bucket size.
        #[arg(long, value_enum, default_value_t = By::Day)]
        by: By,
        /// Show only the last N buckets (default: 14 days, or 60 minutes).
        #[arg(long)]
        last: Option<usize>,
    },
    /// Limits stored in Redis (rate, burst, concurrency, per-key rate, aging), which override
    /// every server's configured ones; running servers apply a change within about 2 s.
    #[command(subcommand)]
    Limits(LimitsCmd),
}

/// Most blocked rate keys `queue show` lists (soonest end first).
const BLOCKED_KEYS_SHOWN: usize = 100;

/// The bucket of `queue history`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum By {
    Day,
    Minute,
}

/// Runs one `queue` subcommand.
pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: QueueCmd,
) -> anyhow::Result<()> {
    match cmd {
        QueueCmd::Limits(cmd) => limits::run(admin, out, cmd).await,
        QueueCmd::Ls => out.queues(&admin.queues().await?),
        QueueCmd::Show { queue } => {
            let row = admin.queue(&queue).await?;
            let today = admin
                .history(&queue, HistorySpan::Days)
                .await?
                .last()
                .copied();
            let blocks = admin.queue_blocks(&queue, BLOCKED_KEYS_SHOWN).await?;
            if out.json {
                let keys: Vec<_> = blocks
                    .keys
                    .iter()
                    .map(|(k, until)| serde_json::json!({"key": k, "until_ms": until}))
                    .collect();
                let throttled = serde_json::json!({
                    "queue_until_ms": blocks.queue_until_ms,
                    "keys": keys,
                    "today": blocks.throttled_today,
                });
                out.line(
                    &serde_json::json!({ "queue": row, "today": today, "throttled": throttled }),
                )
            } else {
                out.queues(std::slice::from_ref(&row))?;
                if !row.levels.is_empty() {
                    let rows: Vec<Vec<String>> = row
                        .levels
                        .iter()
                        .map(|l| {
                            vec![
                                l.level.to_string(),
                                l.pending.to_string(),
                                l.active.to_string(),
                                l.oldest_pending_ms
                                    .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                                    .unwrap_or_default(),
                            ]
                        })
                        .collect();
                    crate::table::print_table(&["LEVEL", "PENDING", "ACTIVE", "OLDEST"], &rows);
                }
                if let Some(t) = today {
                    println!("today: processed {}, failed {}", t.processed, t.failed);
                }
                if blocks.throttled_today > 0 {
                    println!("throttled today: {} times", blocks.throttled_today);
                }
                if let Some(until) = blocks.queue_until_ms {
                    println!("throttled until {} (the whole queue)", datetime(until));
                }
                if !blocks.keys.is_empty() {
                    let rows: Vec<Vec<String>> = blocks
                        .keys
                        .iter()
                        .map(|(k, until)| vec![printable(k).into_owned(), datetime(*until)])
                        .collect();
                    print_table(&["BLOCKED KEY", "THROTTLED UNTIL"], &rows);
                }
                Ok(())
            }
        }
        QueueCmd::Pause { queue } => {
            admin.set_paused(&queue, true).await?;
            out.done(
                &serde_json::json!({"queue": queue, "paused": true}),
                &format!("queue {queue} paused"),
            )
        }
        QueueCmd::Resume { queue } => {
            admin.set_paused(&queue, false).await?;
            out.done(
                &serde_json::json!({"queue": queue, "paused": false}),
                &format!("queue {queue} resumed"),
            )
        }
        QueueCmd::Unblock { queue, key } => {
            let lifted = admin.unblock(&queue, key.as_deref()).await?;
            let what = key.as_deref().map_or("the queue".to_string(), |k| {
                format!("rate key {}", printable(k))
            });
            out.done(
                &serde_json::json!({"queue": queue, "key": key, "lifted": lifted}),
                &if lifted {
                    format!("queue {queue}: block of {what} lifted")
                } else {
                    format!("queue {queue}: {what} was not blocked")
                },
            )
        }
        QueueCmd::Rm { queue, force } => {
            let n = admin.delete_queue(&queue, force).await?;
            out.done(
                &serde_json::json!({"queue": queue, "deleted": true, "tasks_deleted": n}),
                &format!("queue {queue} deleted ({n} tasks deleted)"),
            )
        }
        QueueCmd::History { queue, by, last } => {
            let (span, default) = match by {
                By::Day => (HistorySpan::Days, 14),
                By::Minute => (HistorySpan::Minutes, 60),
            };
            let rows = admin.history(&queue, span).await?;
            let n = last.unwrap_or(default).min(rows.len());
            let rows = rows.get(rows.len() - n..).unwrap_or_default();
            if out.json {
                return rows.iter().try_for_each(|r| out.line(r));
            }
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let at = if by == By::Day {
                        date(r.start_ms)
                    } else {
                        datetime(r.start_ms)
                    };
                    vec![at, r.processed.to_string(), r.failed.to_string()]
                })
                .collect();
            print_table(
                &[
                    if by == By::Day { "DAY" } else { "MINUTE" },
                    "PROCESSED",
                    "FAILED",
                ],
                &table,
            );
            Ok(())
        }
    }
}

/// After a listing that showed no queue: says the namespace is empty and where queues are, since
/// an empty listing is the sign of a wrong or forgotten --namespace.
pub(crate) async fn hint_if_empty(admin: &Admin<RedisBroker>) {
    if admin.queues().await.is_ok_and(|q| q.is_empty()) {
        let ns = admin.broker().keyspace().namespace().to_string();
        let others = admin.other_namespaces().await;
        if others.is_empty() {
            eprintln!("chronos: namespace {ns:?} holds no queue");
        } else {
            eprintln!(
                "chronos: namespace {ns:?} holds no queue; namespaces with queues on this Redis: {} (pass --namespace NAME)",
                printable(&others.join(", "))
            );
        }
    }
}
