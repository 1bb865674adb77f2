//! `chronos server ls` and `chronos leader`: the processes running the queues.

use chronos_admin::{printable, Admin};
use chronos_broker::RedisBroker;
use clap::Subcommand;

use crate::dates::datetime;
use crate::out::Out;
use crate::table::print_table;

/// The `server` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum ServerCmd {
    /// Every live worker server.
    Ls,
}

/// Runs one `server` subcommand.
pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: ServerCmd,
) -> anyhow::Result<()> {
    match cmd {
        ServerCmd::Ls => {
            let all = admin.servers().await?;
            if out.json {
                return all.iter().try_for_each(|s| out.line(s));
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|s| {
                    let queues: Vec<String> =
                        s.queues.iter().map(|(q, w)| format!("{q}:{w}")).collect();
                    vec![
                        s.id.clone(),
                        s.host.clone(),
                        s.pid.to_string(),
                        queues.join(","),
                        format!("{}/{}", s.running, s.concurrency),
                        datetime(s.started_at_ms),
                        datetime(s.last_seen_ms),
                    ]
                })
                .collect();
            print_table(
                &[
                    "ID",
                    "HOST",
                    "PID",
                    "QUEUES",
                    "BUSY",
                    "STARTED",
                    "LAST SEEN",
                ],
                &rows,
            );
            Ok(())
        }
    }
}

/// `chronos leader`: the scheduler leader, its epoch and since when.
pub(crate) async fn leader(admin: &Admin<RedisBroker>, out: &Out) -> anyhow::Result<()> {
    let l = admin.leader().await?;
    if out.json {
        return out.line(&serde_json::json!({ "leader": l }));
    }
    match l {
        Some(l) => println!(
            "leader {} (epoch {}, since {})",
            printable(&l.id),
            l.epoch,
            datetime(l.since_ms)
        ),
        None => println!("no leader"),
    }
    Ok(())
}
