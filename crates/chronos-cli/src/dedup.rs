//! `chronos dedup ...`: the deduplication locks held in a queue (`EnqueueOptions::dedup` and
//! `unique`), and releasing one so the next enqueue with its key creates a task.

use chronos_admin::Admin;
use chronos_broker::RedisBroker;
use clap::Subcommand;

use crate::out::Out;
use crate::table::print_table;

/// Locks listed when `--limit` is not given.
const DEFAULT_LIMIT: usize = 100;

/// The `dedup` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum DedupCmd {
    /// The locks held in a queue, by key: the task holding each, its state and the time left
    /// (`#<hash>`: a lock on the kind and payload).
    Ls {
        queue: String,
        /// Most locks to list.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT)]
        limit: usize,
    },
    /// Releases a lock (the holder keeps running): the next enqueue with the key creates a task.
    Rm {
        queue: String,
        /// The key as `dedup ls` shows it.
        key: String,
        /// Only while this task holds it.
        #[arg(long, value_name = "ID")]
        holder: Option<String>,
    },
}

pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: DedupCmd,
) -> anyhow::Result<()> {
    match cmd {
        DedupCmd::Ls { queue, limit } => {
            let locks = admin.dedup_locks(&queue, limit).await?;
            if out.json {
                for l in &locks {
                    out.line(l)?;
                }
                return Ok(());
            }
            if locks.is_empty() {
                println!("no deduplication lock held in {queue}");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = locks
                .iter()
                .map(|l| {
                    vec![
                        l.key.clone(),
                        l.holder.clone(),
                        l.holder_state
                            .map(|s| s.as_str().to_string())
                            .unwrap_or_else(|| "gone".into()),
                        l.expires_in_ms
                            .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                            .unwrap_or_else(|| "never".into()),
                    ]
                })
                .collect();
            print_table(&["KEY", "HOLDER", "STATE", "EXPIRES IN"], &rows);
            Ok(())
        }
        DedupCmd::Rm { queue, key, holder } => {
            let released = admin
                .release_dedup_lock(&queue, &key, holder.as_deref())
                .await?;
            let text = if released {
                format!("{queue}: lock {key} released")
            } else {
                format!("{queue}: lock {key} not held (or held by another task): nothing released")
            };
            out.done(
                &serde_json::json!({"queue": queue, "key": key, "released": released}),
                &text,
            )
        }
    }
}
