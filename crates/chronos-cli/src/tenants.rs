//! `chronos tenant ...`: the tenants sharing a queue ([`chronos_broker::EnqueueOptions::tenant`])
//! with their counts, and their settings stored in Redis (weight, concurrency cap, backlog cap,
//! pause), which running servers apply at their next fetch. A tenant's own settings override,
//! field by field, the queue's default for all its tenants (`--default`), which overrides the
//! built-in one: weight 1, no cap, not paused.

use anyhow::Context as _;
use chronos_admin::{Admin, TenantList, TenantSettingsChanged, TenantSettingsRow};
use chronos_broker::{RedisBroker, TenantChange};
use clap::{ArgGroup, Args, Subcommand};

use crate::out::Out;
use crate::table::print_table;

/// Tenants listed when `--limit` is not given.
const DEFAULT_LIMIT: usize = 20;

/// The `tenant` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum TenantCmd {
    /// The tenants of a queue with the most tasks waiting, their counts and stored settings
    /// (`-`: nothing stored, the default line applies), the default and the totals.
    Ls {
        queue: String,
        /// Most tenants to list.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT)]
        limit: usize,
    },
    /// Stores settings of a tenant, or of the default for all tenants (only those named
    /// change). A tenant the queue does not know (no task waiting or running, nothing stored)
    /// is refused as a likely typo, unless --new.
    // The queue and the tenant come first: clap would print the required groups first, the
    // reverse of what the command takes.
    #[command(
        override_usage = "chronos tenant set [OPTIONS] <QUEUE> <TENANT|--default> <--weight <N>|--concurrency <N|none>|--backlog <N|none>>..."
    )]
    Set {
        queue: String,
        #[command(flatten)]
        who: Who,
        #[command(flatten)]
        values: SetValues,
        /// Store settings for a tenant that has no task yet.
        #[arg(long)]
        new: bool,
    },
    /// Removes stored settings of a tenant (the default's apply again), or of the default (the
    /// built-in ones apply).
    #[command(
        override_usage = "chronos tenant unset [OPTIONS] <QUEUE> <TENANT|--default> <--weight|--concurrency|--backlog|--paused|--all>..."
    )]
    Unset {
        queue: String,
        #[command(flatten)]
        who: Who,
        #[command(flatten)]
        fields: UnsetFields,
    },
    /// Pauses a tenant (or, with --default, every tenant without a pause setting of its own):
    /// its tasks wait, enqueues still succeed. A tenant the queue does not know is refused as
    /// a likely typo, unless --new.
    Pause {
        queue: String,
        #[command(flatten)]
        who: Who,
        /// Pause a tenant that has no task yet (its first tasks will wait).
        #[arg(long)]
        new: bool,
    },
    /// Resumes a tenant (or the default).
    Resume {
        queue: String,
        #[command(flatten)]
        who: Who,
    },
}

/// Which settings a command changes: one tenant's, or the default's.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("who").required(true).args(["tenant", "default"])))]
pub(crate) struct Who {
    /// The tenant key.
    tenant: Option<String>,
    /// The queue's default for all its tenants instead of one tenant.
    #[arg(long)]
    default: bool,
}

impl Who {
    fn tenant(&self) -> Option<&str> {
        if self.default {
            None
        } else {
            self.tenant.as_deref()
        }
    }
}

/// The values of `tenant set`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("values").required(true).multiple(true).args(["weight", "concurrency", "backlog"])))]
pub(crate) struct SetValues {
    /// Share of starts relative to the other tenants (1 to 1000; built-in 1).
    #[arg(long, value_name = "N")]
    weight: Option<u32>,
    /// At most N tasks of the tenant running at once across the cluster; `none` removes the
    /// stored cap (for a tenant the default's applies, for the default there is none).
    #[arg(long, value_name = "N|none")]
    concurrency: Option<String>,
    /// At most N tasks of the tenant waiting (an enqueue past it fails); `none` removes the
    /// stored cap as for --concurrency.
    #[arg(long, value_name = "N|none")]
    backlog: Option<String>,
}

/// The fields of `tenant unset`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("fields").required(true).multiple(true).args(["weight", "concurrency", "backlog", "paused", "all"])))]
pub(crate) struct UnsetFields {
    /// The weight.
    #[arg(long)]
    weight: bool,
    /// The concurrency cap.
    #[arg(long)]
    concurrency: bool,
    /// The backlog cap.
    #[arg(long)]
    backlog: bool,
    /// The pause setting.
    #[arg(long)]
    paused: bool,
    /// Every stored setting.
    #[arg(long)]
    all: bool,
}

/// Runs one `tenant` subcommand.
pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: TenantCmd,
) -> anyhow::Result<()> {
    match cmd {
        TenantCmd::Ls { queue, limit } => {
            let list = admin.tenants(&queue, limit).await?;
            print_list(out, &list)
        }
        TenantCmd::Set {
            queue,
            who,
            values,
            new,
        } => {
            let change = set_change(&values)?;
            known(admin, &queue, &who, Some(new)).await?;
            let done = admin.change_tenant(&queue, who.tenant(), &change).await?;
            changed(out, &done, "stored")
        }
        TenantCmd::Unset { queue, who, fields } => {
            known(admin, &queue, &who, None).await?;
            let done = admin
                .change_tenant(&queue, who.tenant(), &unset_change(&fields))
                .await?;
            changed(out, &done, "unset")
        }
        TenantCmd::Pause { queue, who, new } => {
            known(admin, &queue, &who, Some(new)).await?;
            let done = admin.pause_tenant(&queue, who.tenant()).await?;
            changed(out, &done, "paused")
        }
        TenantCmd::Resume { queue, who } => {
            known(admin, &queue, &who, None).await?;
            let done = admin.resume_tenant(&queue, who.tenant()).await?;
            changed(out, &done, "resumed")
        }
    }
}

/// Refuses a tenant the queue does not know (a typo would otherwise store settings that
/// nothing reads), unless `new` (None: the command has no --new) says it is meant. The
/// default always exists.
async fn known(
    admin: &Admin<RedisBroker>,
    queue: &str,
    who: &Who,
    new: Option<bool>,
) -> anyhow::Result<()> {
    let Some(t) = who.tenant() else {
        return Ok(());
    };
    if new == Some(true) {
        return Ok(());
    }
    match admin.require_tenant(queue, t).await {
        Err(chronos_admin::AdminError::TenantNotFound(e)) if new.is_some() => {
            anyhow::bail!("{e} (pass --new if the tenant has no task yet)")
        }
        r => Ok(r?),
    }
}

fn set_change(v: &SetValues) -> anyhow::Result<TenantChange> {
    let mut c = TenantChange::new();
    if let Some(w) = v.weight {
        c = c.weight(Some(w));
    }
    if let Some(n) = &v.concurrency {
        c = c.concurrency(cap(n).context("--concurrency")?);
    }
    if let Some(n) = &v.backlog {
        c = c.backlog(cap(n).context("--backlog")?);
    }
    Ok(c)
}

/// A cap as written: a number, or `none` (unset).
fn cap<T: std::str::FromStr>(text: &str) -> anyhow::Result<Option<T>> {
    if text == "none" {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| anyhow::anyhow!("{text:?}: expected a number or none"))
}

fn unset_change(f: &UnsetFields) -> TenantChange {
    let mut c = TenantChange::new();
    if f.weight || f.all {
        c = c.weight(None);
    }
    if f.concurrency || f.all {
        c = c.concurrency(None);
    }
    if f.backlog || f.all {
        c = c.backlog(None);
    }
    if f.paused || f.all {
        c = c.paused(None);
    }
    c
}

fn changed(out: &Out, done: &TenantSettingsChanged, what: &str) -> anyhow::Result<()> {
    if out.json {
        return out.line(done);
    }
    let who = match &done.tenant {
        Some(t) => format!("tenant {t}"),
        None => "default tenant settings".to_string(),
    };
    println!(
        "queue {}: {} {what}: {}",
        chronos_admin::printable(&done.queue),
        chronos_admin::printable(&who),
        settings_text(&done.settings)
    );
    Ok(())
}

/// `weight 2, concurrency -, backlog 100, paused -` (`-`: not stored).
fn settings_text(s: &TenantSettingsRow) -> String {
    let c = cells(s);
    format!(
        "weight {}, concurrency {}, backlog {}, paused {}",
        c[0], c[1], c[2], c[3]
    )
}

/// Weight, concurrency, backlog and paused as table cells (`-`: not stored).
fn cells(s: &TenantSettingsRow) -> [String; 4] {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    [
        or_dash(s.weight.map(|n| n.to_string())),
        or_dash(s.concurrency.map(|n| n.to_string())),
        or_dash(s.backlog.map(|n| n.to_string())),
        or_dash(s.paused.map(|p| if p { "yes" } else { "no" }.to_string())),
    ]
}

fn print_list(out: &Out, list: &TenantList) -> anyhow::Result<()> {
    if out.json {
        return out.line(list);
    }
    let now = chronos_broker::now_ms();
    let rows: Vec<Vec<String>> = list
        .tenants
        .iter()
        .map(|t| {
            let [weight, concurrency, backlog, paused] = cells(&t.settings);
            vec![
                t.tenant.clone(),
                t.waiting.to_string(),
                t.running.to_string(),
                t.oldest_age_ms(now).map(age).unwrap_or_else(|| "-".into()),
                if t.ready { "yes" } else { "no" }.to_string(),
                weight,
                concurrency,
                backlog,
                paused,
            ]
        })
        .collect();
    if !rows.is_empty() {
        print_table(
            &[
                "TENANT",
                "WAITING",
                "RUNNING",
                "OLDEST",
                "READY",
                "WEIGHT",
                "CONCURRENCY",
                "BACKLOG",
                "PAUSED",
            ],
            &rows,
        );
    }
    println!(
        "default for all tenants: {} (-: built-in: weight 1, no cap, not paused)",
        settings_text(&list.default)
    );
    let mut total = format!(
        "{} tenant{}: {} waiting, {} running",
        list.total,
        if list.total == 1 { "" } else { "s" },
        list.waiting,
        list.running
    );
    let more = list.more();
    if more > 0 {
        total.push_str(&format!(
            "; {more} more tenant{} not listed (--limit)",
            if more == 1 { "" } else { "s" }
        ));
    }
    println!("{total}");
    Ok(())
}

/// A wait as people read it: `4.2s`, `42s`, `5m03s`, `2h05m`, `3d04h`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..10 => format!("{:.1}s", ms as f64 / 1000.0),
        10..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn waits_read_in_the_unit_that_fits() {
        assert_eq!(age(4_200), "4.2s");
        assert_eq!(age(42_000), "42s");
        assert_eq!(age(303_000), "5m03s");
        assert_eq!(age(7_500_000), "2h05m");
        assert_eq!(age(273_600_000), "3d04h");
    }
}
