//! `chronos stats`: every queue's counts with totals, and the servers, schedules and leader.

use chronos_admin::{printable, Admin};
use chronos_broker::RedisBroker;

use crate::out::Out;

/// Prints the overview.
pub(crate) async fn run(admin: &Admin<RedisBroker>, out: &Out) -> anyhow::Result<()> {
    let o = admin.overview().await?;
    if out.json {
        return out.line(&o);
    }
    out.queue_table(&o.queues, Some(&o.total))?;
    println!(
        "servers: {}   schedules: {}   leader: {}",
        o.servers,
        o.schedules,
        printable(&o.leader.map_or("none".to_string(), |l| l.id))
    );
    Ok(())
}
