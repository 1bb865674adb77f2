//! `chronos queue limits ...`: the settings of a queue stored in Redis, which override every
//! server's configured limits field by field (running servers apply a change within about two
//! seconds). `set` stores values (`none` lifts a configured limit), `unset` removes them (each
//! server's configuration applies again).

use std::time::Duration;

use anyhow::Context as _;
use chronos_admin::{Admin, SettingsRow};
use chronos_broker::{parse_duration, Rate, RedisBroker, Setting, SettingsChange};
use clap::{Args, Subcommand};

use crate::out::Out;
use crate::table::print_table;

/// The `queue limits` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum LimitsCmd {
    /// The stored settings of one queue, or of every queue. `-` means nothing is stored: each
    /// server's configuration applies.
    Ls { queue: Option<String> },
    /// Stores settings of a queue (only those named change).
    Set {
        queue: String,
        #[command(flatten)]
        values: SetValues,
    },
    /// Removes stored settings of a queue: each server's configuration applies again.
    Unset {
        queue: String,
        #[command(flatten)]
        fields: UnsetFields,
    },
}

/// The values of `queue limits set`.
#[derive(Args, Debug)]
pub(crate) struct SetValues {
    /// At most N starts per period across the cluster (`100/1s`, `5/250ms`), or `none` to lift
    /// a configured rate.
    #[arg(long, value_name = "N/PERIOD|none")]
    rate: Option<String>,
    /// Starts of the rate that may be granted at once.
    #[arg(long, value_name = "N")]
    burst: Option<u32>,
    /// At most N tasks held at once across the cluster, or `none` to lift a configured limit.
    #[arg(long, value_name = "N|none")]
    concurrency: Option<String>,
    /// At most N starts per period per rate key, or `none`.
    #[arg(long, value_name = "N/PERIOD|none")]
    per_key_rate: Option<String>,
    /// How long a waiting task of a less urgent priority level may wait before it is served
    /// ahead of newer, more urgent work (`60s`, `5m`; at least 1s).
    #[arg(long, value_name = "DURATION")]
    aging: Option<String>,
    /// Retried tasks go to this priority level (0-9 or highest, high, normal, low, lowest)
    /// when it is more urgent than their own: retries run ahead of the backlog.
    #[arg(long, value_name = "LEVEL")]
    retry_level: Option<String>,
}

/// The fields of `queue limits unset`.
#[derive(Args, Debug)]
pub(crate) struct UnsetFields {
    /// The rate.
    #[arg(long)]
    rate: bool,
    /// The burst.
    #[arg(long)]
    burst: bool,
    /// The concurrency.
    #[arg(long)]
    concurrency: bool,
    /// The per-key rate.
    #[arg(long)]
    per_key_rate: bool,
    /// The aging time.
    #[arg(long)]
    aging: bool,
    /// The retry level.
    #[arg(long)]
    retry_level: bool,
    /// Every stored setting.
    #[arg(long)]
    all: bool,
}

/// Runs one `queue limits` subcommand.
pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: LimitsCmd,
) -> anyhow::Result<()> {
    match cmd {
        LimitsCmd::Ls { queue } => {
            let rows = match queue {
                Some(q) => vec![admin.queue_settings(&q).await?],
                None => admin.all_queue_settings().await?,
            };
            print_rows(out, &rows)
        }
        LimitsCmd::Set { queue, values } => {
            let change = set_change(&values)?;
            let row = admin.change_queue_settings(&queue, &change).await?;
            done(out, &row, "stored")
        }
        LimitsCmd::Unset { queue, fields } => {
            let change = unset_change(&fields);
            let row = admin.change_queue_settings(&queue, &change).await?;
            done(out, &row, "unset")
        }
    }
}

fn set_change(v: &SetValues) -> anyhow::Result<SettingsChange> {
    let mut c = SettingsChange::new();
    if let Some(r) = &v.rate {
        c = c.rate(rate_setting(r).context("--rate")?);
    }
    if let Some(n) = v.burst {
        c = c.burst(n);
    }
    if let Some(n) = &v.concurrency {
        let s = if n == "none" {
            Setting::Off
        } else {
            Setting::On(
                n.parse()
                    .with_context(|| format!("--concurrency {n:?}: expected a number or none"))?,
            )
        };
        c = c.concurrency(s);
    }
    if let Some(r) = &v.per_key_rate {
        c = c.per_key_rate(rate_setting(r).context("--per-key-rate")?);
    }
    if let Some(a) = &v.aging {
        c = c.aging(aging(a)?);
    }
    if let Some(l) = &v.retry_level {
        c = c.retry_level(
            l.parse::<chronos_broker::Priority>()
                .with_context(|| format!("--retry-level {l:?}"))?,
        );
    }
    Ok(c)
}

fn rate_setting(text: &str) -> anyhow::Result<Setting<Rate>> {
    if text == "none" {
        return Ok(Setting::Off);
    }
    Ok(Setting::On(Rate::parse(text)?))
}

fn aging(text: &str) -> anyhow::Result<Duration> {
    parse_duration(text)
        .with_context(|| format!("--aging {text:?}: expected a duration like 60s, 5m or 1h"))
}

fn unset_change(f: &UnsetFields) -> SettingsChange {
    let mut c = SettingsChange::new();
    if f.rate || f.all {
        c = c.unset_rate();
    }
    if f.burst || f.all {
        c = c.unset_burst();
    }
    if f.concurrency || f.all {
        c = c.unset_concurrency();
    }
    if f.per_key_rate || f.all {
        c = c.unset_per_key_rate();
    }
    if f.aging || f.all {
        c = c.unset_aging();
    }
    if f.retry_level || f.all {
        c = c.unset_retry_level();
    }
    c
}

fn done(out: &Out, row: &SettingsRow, what: &str) -> anyhow::Result<()> {
    if out.json {
        return out.line(row);
    }
    println!(
        "queue {} settings {what}",
        chronos_admin::printable(&row.queue)
    );
    print_rows(out, std::slice::from_ref(row))
}

fn print_rows(out: &Out, rows: &[SettingsRow]) -> anyhow::Result<()> {
    if out.json {
        return rows.iter().try_for_each(|r| out.line(r));
    }
    let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.queue.clone(),
                cell(&r.rate),
                cell(&r.burst),
                cell(&r.concurrency),
                cell(&r.per_key_rate),
                cell(&r.aging),
                cell(&r.retry_level),
            ]
        })
        .collect();
    print_table(
        &[
            "QUEUE",
            "RATE",
            "BURST",
            "CONCURRENCY",
            "PER-KEY RATE",
            "AGING",
            "RETRY LEVEL",
        ],
        &table,
    );
    Ok(())
}
